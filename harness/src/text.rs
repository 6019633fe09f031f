//! The words every op language's text form is made of: numbers, points,
//! nodes, `#k` indexes, and the arity check. Each op type prints and parses
//! itself next to its definition ([`OpText`]); `trace` adds the header.

use crate::domain::Point;
use core::fmt;

/// An operation's line in a trace: it prints itself and parses back.
pub trait OpText: Sized {
    /// Writes the line (no newline).
    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Parses a line split at single spaces.
    fn parse_text(words: &[&str]) -> Result<Self, String>;
    /// A simpler version of this op that the minimiser may try in its
    /// place (a smaller count, no injected failure), if there is one.
    fn simpler(&self) -> Option<Self> {
        None
    }
}

/// Prints an [`OpText`] with `Display`.
pub struct Text<'a, T>(pub &'a T);

impl<T: OpText> fmt::Display for Text<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_text(f)
    }
}

/// A number.
pub fn parse_num<T: std::str::FromStr>(w: &str) -> Result<T, String> {
    w.parse()
        .map_err(|_| format!("expected a number, found {w:?}"))
}

/// `#k`, `k` in `0..=`[`limits::INDEX`].
pub fn parse_index(w: &str) -> Result<u8, String> {
    w.strip_prefix('#')
        .ok_or_else(|| format!("expected #k, found {w:?}"))
        .and_then(|k| parse_in(k, limits::INDEX))
}

/// `nK`.
pub fn parse_node(w: &str) -> Result<u64, String> {
    w.strip_prefix('n')
        .ok_or_else(|| format!("expected a node nK, found {w:?}"))
        .and_then(parse_num)
}

/// The optional third word `manager`.
pub fn parse_manager(w: &[&str]) -> Result<bool, String> {
    match w.get(2) {
        None => Ok(false),
        Some(&"manager") => Ok(true),
        Some(other) => Err(format!("expected `manager` or nothing, found {other:?}")),
    }
}

/// ` manager` when `manager`, nothing otherwise.
pub fn manager_text(manager: bool) -> &'static str {
    if manager {
        " manager"
    } else {
        ""
    }
}

/// Checks that `w` (the op's name, then its arguments) has `min - 1` to
/// `max - 1` arguments.
pub fn arity(w: &[&str], min: usize, max: usize) -> Result<(), String> {
    if w.len() < min || w.len() > max {
        let want = if min == max {
            format!("{}", min - 1)
        } else {
            format!("{} to {}", min - 1, max - 1)
        };
        return Err(format!(
            "`{}` takes {want} argument(s), found {}",
            w[0],
            w.len() - 1
        ));
    }
    Ok(())
}

/// The one argument of a one-argument op, parsed by `parse`.
pub fn one<T>(w: &[&str], parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, String> {
    arity(w, 2, 2)?;
    parse(w[1])
}

/// A point: `n`, or `cap/4`, `cap/2`, `cap` with an optional `+1` or `-1`.
pub fn parse_point(w: &str) -> Result<Point, String> {
    let (base, delta) = match w.find(['+', '-']) {
        Some(i) => (&w[..i], &w[i..]),
        None => (w, ""),
    };
    let d: i8 = match delta {
        "" => 0,
        "+1" => 1,
        "-1" => -1,
        other => return Err(format!("bad offset {other:?} in {w:?}: only +1 or -1")),
    };
    Ok(match base {
        "cap/4" => Point::Quarter(d),
        "cap/2" => Point::Half(d),
        "cap" => Point::End(d),
        _ if delta.is_empty() && !base.starts_with("cap") => Point::At(parse_in(w, limits::POINT)?),
        _ => {
            return Err(format!(
                "bad point {w:?}: a number, or cap/4, cap/2, cap with +1 or -1"
            ))
        }
    })
}

/// The documented ranges of the numbers a trace may hold. A trace is text
/// a person may write, so every number is checked against its op's range
/// before anything runs ([`parse_in`]). The ranges are wider than what the
/// fuzz decoders generate, and bounded so that any accepted trace replays
/// in seconds and well under 1 GB.
pub mod limits {
    /// Operations in one op-list trace (the decoders make at most 64).
    pub const OPS: usize = 256;
    /// A plain id or offset (`point`): any 32-bit value.
    pub const POINT: u64 = u32::MAX as u64;
    /// The count of a pool bulk op (`acquire-many`, `release-many`) and of
    /// a table `insert-many`: 2^16 (the decoders draw up to 4096).
    pub const COUNT: u64 = 1 << 16;
    /// `reset n`: up to 2^20 ids (the decoder draws up to 2^16); the C
    /// flavour grows no further anyway.
    pub const RESET: u64 = 1 << 20;
    /// `probe-ceiling n`: up to one past the longest bitmap, 2^31 (a pool
    /// of 256 MiB, built aside and dropped).
    pub const CEILING: u64 = 1 << 31;
    /// `fail-next n`: up to 2^16 planned failures.
    pub const FAIL_NEXT: u64 = 1 << 16;
    /// `prefill n`: up to 4096 handles (the decoder draws up to 300).
    pub const PREFILL: u64 = 1 << 12;
    /// `keep n`: any 32-bit value (`keep >= prefill` releases none).
    pub const KEEP: u64 = u32::MAX as u64;
    /// Threads of a concurrent trace (the decoder makes 2 to 4).
    pub const THREADS: usize = 4;
    /// Operations of one thread (the decoder makes up to 6).
    pub const THREAD_OPS: usize = 16;
    /// A thread's `insert-many n`: up to 256 (the decoder draws up to 128).
    pub const THREAD_BULK: u64 = 256;
    /// Decisions of a schedule, `*k` repeats counted (a run takes at most
    /// a few thousand steps; decisions past its end are ignored).
    pub const SCHEDULE: u64 = 1 << 16;
    /// A thread number in a decision `tN`.
    pub const THREAD: u64 = THREADS as u64 - 1;
    /// An index `#k` (a handle of the table or of a thread, taken modulo
    /// how many there are; `corrupt clear #k` too) and a pool `commit k`.
    pub const INDEX: u64 = u8::MAX as u64;
    /// A handle of `start-from`: up to 2^18 (each bitmap flavour holds a
    /// map of twice that; see `handle_table`'s `start`).
    pub const START_HANDLE: u64 = 1 << 18;
    /// Handles of one `start-from` line: 1 to 6.
    pub const START_HANDLES: usize = 6;
}

/// A number in `0..=max`, the documented range of the op's argument
/// ([`limits`]): a number out of range is an error naming the range.
pub fn parse_in<T: TryFrom<u64>>(w: &str, max: u64) -> Result<T, String> {
    let n: u128 = parse_num(w)?;
    if n > u128::from(max) {
        return Err(format!("{n} is out of range: allowed 0..={max}"));
    }
    T::try_from(n as u64).map_err(|_| format!("{n} is out of range: allowed 0..={max}"))
}
