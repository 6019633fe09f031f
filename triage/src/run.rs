//! Running a trace and catching how it fails; what a run says, as prose
//! for `repro` and as JSON for the scripts.

use idpool_harness::check::{self, Checked, Failure, FailureJson};
use idpool_harness::history::Finding;
use idpool_harness::trace::Trace;
use idpool_harness::Events;
use serde::ser::{Serialize, Serializer};

/// Replays `trace`; `Err` with the failure when it fails (a panic inside
/// the allocator included, not printed).
pub fn run(trace: &Trace) -> Checked<Events> {
    check::catching(|| trace.check())
}

/// Replays `trace` with narration on: the lines it narrated, and the result.
pub fn narrated(trace: &Trace) -> (Vec<String>, Checked<Events>) {
    check::start_narrating();
    let result = run(trace);
    let lines = check::take_narration();
    check::stop_narrating();
    (lines, result)
}

/// The narration, each step's header flush left and its comparisons
/// indented under it.
pub fn print_narration(lines: &[String]) {
    for line in lines {
        let indent = if line.starts_with("step ") || line.starts_with('t') {
            ""
        } else {
            "    "
        };
        println!("{indent}{line}");
    }
}

/// `PASS` with the paths reached, or `FAIL` with the step, the signature,
/// the message and what the failed check means.
pub fn print_verdict(result: &Checked<Events>) {
    match result {
        Ok(events) => {
            let reached: Vec<_> = (events.counts().into_iter())
                .filter(|&(_, n)| n > 0)
                .collect();
            println!("PASS: allocator and model agree at every step; paths reached: {reached:?}");
        }
        Err(f) => {
            println!("FAIL at step {} [{}]", f.step, f.signature());
            println!("    {}", f.message.replace('\n', "\n    "));
            println!("    meaning: {}", f.check.meaning());
        }
    }
}

/// Prints `value` as JSON, compact, on one line: what `--json` prints.
pub fn print_json(value: &impl Serialize) {
    println!(
        "{}",
        serde_json::to_string(value).expect("the tools' JSON values serialise")
    );
}

/// The paths a run reached, as a JSON object of nonzero counters, in the
/// order [`Events::counts`] gives them.
pub struct EventsJson(Vec<(&'static str, u32)>);

impl EventsJson {
    /// The nonzero counters of `events`.
    pub fn of(events: &Events) -> EventsJson {
        EventsJson(
            (events.counts().into_iter())
                .filter(|&(_, n)| n > 0)
                .collect(),
        )
    }
}

impl Serialize for EventsJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().copied())
    }
}

/// A failure as JSON ([`Failure::to_json`]), with the known upstream
/// finding it is after its fields.
#[derive(serde::Serialize)]
pub struct FailureWithFinding {
    #[serde(flatten)]
    failure: FailureJson,
    finding: Option<&'static str>,
}

impl FailureWithFinding {
    /// `f` and the finding it is, if it is a known one.
    pub fn of(f: &Failure) -> FailureWithFinding {
        FailureWithFinding {
            failure: f.to_json(),
            finding: Finding::of(f).map(Finding::name),
        }
    }
}
