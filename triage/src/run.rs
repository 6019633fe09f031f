//! Running a trace and catching how it fails; what a run says, as prose
//! for `repro` and as JSON for the scripts.

use idpool_harness::check::{self, Checked, Failure};
use idpool_harness::history::Finding;
use idpool_harness::json::Json;
use idpool_harness::trace::Trace;
use idpool_harness::Events;

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

/// The paths a run reached, as a JSON object of nonzero counters.
pub fn events_json(events: &Events) -> Json {
    let reached = (events.counts().into_iter())
        .filter(|&(_, n)| n > 0)
        .map(|(name, n)| (name, Json::int(n)));
    Json::Obj(reached.collect())
}

/// A failure as a JSON object ([`Failure::to_json`]), with the known
/// upstream finding it is.
pub fn failure_json(f: &Failure) -> Json {
    let Json::Obj(mut fields) = f.to_json() else {
        unreachable!("a failure is an object")
    };
    let finding = Finding::of(f).map(Finding::name);
    fields.push(("finding", Json::opt_str(finding)));
    Json::Obj(fields)
}
