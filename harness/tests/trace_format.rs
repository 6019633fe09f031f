//! `docs/trace-format.md` is the one grammar of traces: every example it
//! gives parses, and prints back as written (comments aside).

use idpool_harness::targets::parse_trace;

/// The fenced blocks of `docs/trace-format.md` that hold a trace.
fn examples() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/trace-format.md");
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match (&mut current, line.starts_with("```")) {
            (None, true) => current = Some(String::new()),
            (Some(block), true) => {
                if block.lines().any(|l| l.starts_with("idpool-trace ")) {
                    blocks.push(std::mem::take(block));
                }
                current = None;
            }
            (Some(block), false) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, false) => {}
        }
    }
    blocks
}

#[test]
fn every_example_of_the_trace_format_parses_and_prints_back() {
    let examples = examples();
    assert!(
        examples.len() >= 6,
        "the page's examples: {}",
        examples.len()
    );
    let mut targets = Vec::new();
    for text in examples {
        let trace = parse_trace(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let canonical: String = (text.lines())
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(trace.to_string(), canonical, "prints back as written");
        targets.push(trace.target());
    }
    for target in [
        "pool_ops",
        "dbitmap_ops",
        "handle_table",
        "concurrent_resize",
    ] {
        assert!(targets.contains(&target), "no example of {target}");
    }
}
