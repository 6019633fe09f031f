//! Running a trace and catching how it fails.

use idpool_harness::check::{self, Failure};
use idpool_harness::trace::Trace;
use idpool_harness::Events;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Replays `trace`; `Err` with the structured failure when it fails.
/// Panic messages are not printed: the failure carries them.
pub fn run(trace: &Trace) -> Result<Events, Failure> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(|| trace.replay()));
    std::panic::set_hook(hook);
    result.map_err(|payload| check::failure_from_panic(payload.as_ref()))
}

/// Replays `trace` with narration on: the lines it narrated, and the result.
pub fn narrated(trace: &Trace) -> (Vec<String>, Result<Events, Failure>) {
    check::start_narrating();
    let result = run(trace);
    let lines = check::take_narration();
    check::stop_narrating();
    (lines, result)
}

/// What a failed check means, in plain words.
pub fn explain(failure: &Failure) -> &'static str {
    let c = failure.check.as_str();
    if c.starts_with("panic") {
        "the allocator itself panicked (an assertion or an arithmetic overflow) at this step"
    } else if c.contains("livelock") {
        "a thread never finished its operation: the protocol can loop forever under this schedule"
    } else if c.contains("invariant") || c.contains("used ids") || c.contains("by_handle") {
        "the bitmap and the handle tree disagree: an id was lost (it could be issued twice) or leaked"
    } else if c.contains("capacity")
        || c.contains("requested size")
        || c.contains("allocation kept")
    {
        "the pool's size differs from SPEC.md's grow/shrink policy: a resize committed when it should not have, or the other way round"
    } else if c.contains("handle 0") {
        "handle 0 belongs to the context manager, and another process's reference got it"
    } else if c.contains("flavours disagree") {
        "IdPool, dbitmap and the linear scan handed out different ids for the same history"
    } else if c.contains("ceiling") {
        "the 2^30-id ceiling is not where SPEC.md puts it"
    } else {
        "the allocator's answer is not what the naive model expects: not the smallest free id, or not the right error"
    }
}
