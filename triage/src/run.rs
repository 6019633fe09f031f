//! Running a trace and catching how it fails.

use idpool_harness::check::{self, Check, Checked, Failure};
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

/// What a failed check means, in plain words.
pub fn explain(failure: &Failure) -> &'static str {
    match failure.check {
        Check::Panic(_) => {
            "the allocator itself panicked (an assertion or an arithmetic overflow) at this step"
        }
        Check::Livelock => {
            "a thread never finished its operation: the protocol can loop forever under this schedule"
        }
        Check::Invariant | Check::UsedIds | Check::ByHandle | Check::PoolBits | Check::ByNode => {
            "the bitmap and the handle tree disagree: an id was lost (it could be issued twice) or leaked"
        }
        Check::PendingFailures => {
            "the table made a different number of allocations than the model expects: an allocation skipped or made twice"
        }
        Check::Capacity | Check::BulkCapacity | Check::RequestedSize | Check::AllocationKept | Check::ResizerShape | Check::ResetSucceeds => {
            "the pool's size differs from SPEC.md's grow/shrink policy: a resize committed when it should not have, or the other way round"
        }
        Check::HandleZero => {
            "handle 0 belongs to the context manager, and another process's reference got it"
        }
        Check::KernelCrash => {
            "the C driver gave a descriptor that refs_by_desc already holds and hit BUG(): a kernel crash"
        }
        Check::Warning => {
            "the kernel logged a warning (WARN_ON, pr_err) the model did not expect, or did not log one it expected"
        }
        Check::VersionsDiffer => {
            "two upstream versions run side by side on the same program behaved differently"
        }
        Check::Version => {
            "a table or its pool follows another upstream version than the one it was built for"
        }
        Check::Death => {
            "the table says its process is dead when it is alive, or alive when it is dead"
        }
        Check::Reclaimable => {
            "the shrinker's count of reclaimable ids (count_objects) is not what its reclaim (scan_objects) would give back"
        }
        Check::FlavoursDisagree => {
            "the table flavours (mainline's three and the designs) handed out different ids for the same history"
        }
        Check::DesignInvariant => {
            "a design's own bookkeeping (the fast pool's summaries and counters, the augmented tree's shape) is broken"
        }
        Check::CeilingPoolBuilt | Check::CeilingPoolCapacity | Check::CeilingGrowRequest => {
            "the 2^30-id ceiling (Rust) or the 32-bit grow size and its wrap at 2^31 (C) is not where SPEC.md puts it"
        }
        Check::AcquiredId | Check::FoundId | Check::BulkId | Check::Outcome | Check::Lookup => {
            "the allocator's answer is not what the naive model expects: not the smallest free id, or not the right error"
        }
        Check::Kernel => {
            "the kernel's own dbitmap.h and our DBitmap did different things on the same call; the message says which side the model stands with"
        }
        Check::Reads => {
            "a process read other BR_* returns after a command than the driver's naive model expects"
        }
        Check::KernelLog => {
            "the driver printed other kernel log lines than its naive model expects"
        }
        Check::DriversDiffer => {
            "the C and the Rust driver showed userspace different things for the same commands; the message names the known difference, or none if it is new"
        }
    }
}
