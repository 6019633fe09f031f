//! A program's text as a trace file holds it: a `procs` line, then one
//! step a line (`docs/commands.md`). Blank lines and lines starting with `#`
//! are skipped, so a trace can say what it checks.

use idpool::driver::{Procs, Program, Step};

/// Parses a trace file's text. The error names the line.
pub fn parse(text: &str) -> Result<Program, String> {
    let mut procs = None;
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |e: String| format!("line {}: {e}: {line:?}", i + 1);
        // A whole `binder_commands` trace: its header says what it is.
        match words[..] {
            ["idpool-trace", "v1"] | ["target", "binder_commands"] => continue,
            ["target", other] => {
                return Err(at(format!("a trace of {other}, not binder_commands")))
            }
            ["version", v] if v != "c-mainline" && v != "rust-mainline" => return Err(at(
                "the real drivers are mainline: a trace naming another version cannot run on them"
                    .into(),
            )),
            ["version", _] => continue,
            _ => {}
        }
        if words[0].starts_with("in-") || words.last().is_some_and(|w| w.starts_with("fail-")) {
            return Err(at("a step run in a window or with a failing allocation cannot be reproduced on a real kernel".into()));
        }
        if words[0] == "procs" {
            if procs.is_some() {
                return Err(at("a second `procs` line".into()));
            }
            procs = Some(Procs::parse(&words[1..]).map_err(at)?);
            continue;
        }
        if procs.is_none() {
            return Err(at("expected `procs N` before the first step".into()));
        }
        steps.push(Step::parse_words(&words).map_err(at)?);
    }
    let program = Program {
        procs: procs.ok_or("no `procs` line")?,
        steps,
    };
    program.check()?;
    Ok(program)
}

/// The text form [`parse`] reads back.
pub fn to_text(program: &Program) -> String {
    let mut text = program.procs_line();
    text.push('\n');
    for step in &program.steps {
        text.push_str(&step.to_string());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_blank_lines_are_skipped_and_text_round_trips() {
        let text = "# the manager\nprocs 0 1000\n\np1 set-manager\np0 send 0 node 1\n";
        let p = parse(text).unwrap();
        assert_eq!(p.procs.euids, [0, 1000]);
        assert_eq!(p.steps.len(), 2);
        assert_eq!(parse(&to_text(&p)).unwrap(), p);
    }

    #[test]
    fn errors_name_the_line() {
        assert!(parse("p0 exit\n").unwrap_err().contains("line 1"));
        assert!(parse("procs 2\np2 exit\n").unwrap_err().contains("p2"));
        assert!(parse("procs 1\np0 fly\n").unwrap_err().contains("line 2"));
        assert!(parse("# nothing\n").unwrap_err().contains("procs"));
    }
}
