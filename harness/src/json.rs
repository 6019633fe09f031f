//! The tools' `--json` output (the `targets` binary, `triage`): the few
//! kinds of value they print, written by hand, so that the scripts read
//! fields rather than prose.

use core::fmt::{self, Display, Write};

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A number with a fraction.
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, its fields in the order given.
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// A string, or `null`.
    pub fn opt_str(s: Option<impl Into<String>>) -> Json {
        s.map_or(Json::Null, Json::str)
    }

    /// A count.
    pub fn int(n: impl TryInto<i64>) -> Json {
        n.try_into().map_or(Json::Null, Json::Int)
    }
}

/// Writes `s` as a JSON string: quoted, with `"`, `\` and the control
/// characters escaped.
fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            '\r' => f.write_str("\\r")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl Display for Json {
    /// Compact JSON, on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Num(x) if x.is_finite() => write!(f, "{x}"),
            Json::Num(_) => f.write_str("null"),
            Json::Str(s) => write_str(f, s),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_str(f, key)?;
                    write!(f, ":{value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of value, and the characters a string must escape.
    #[test]
    fn values_print_as_json() {
        let value = Json::Obj(vec![
            ("name", Json::str("a \"quoted\"\\path\n\u{1}")),
            ("n", Json::int(3u32)),
            ("x", Json::Num(1.5)),
            ("nan", Json::Num(f64::NAN)),
            ("ok", Json::Bool(true)),
            ("none", Json::opt_str(None::<String>)),
            ("list", Json::Arr(vec![Json::Int(1), Json::Null])),
        ]);
        assert_eq!(
            value.to_string(),
            r#"{"name":"a \"quoted\"\\path\n\u0001","n":3,"x":1.5,"nan":null,"ok":true,"none":null,"list":[1,null]}"#
        );
    }
}
