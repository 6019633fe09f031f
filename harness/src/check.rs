//! Typed failures, shared by the runners.
//!
//! A runner compares every observable after every step; the first
//! comparison that fails becomes a [`Failure`]: a value naming the target,
//! the step, the [`OpKind`], the [`Check`], the [`Phase`] (concurrent
//! target), the table flavour and the capacity, with the whole human
//! message, e.g.
//!
//! ```text
//! pool_ops: step 7 `Commit(2)` (capacity 128): capacity: expected 128, got 64
//! ```
//!
//! Runners return `Result<Events, Failure>` ([`Checked`]); a fuzz target
//! panics with the message ([`Failure::raise`]); the triage tool keeps the
//! value and groups failures by [`Failure::signature`], built from those
//! values rather than from text or stack frames. A panic that does not
//! come from a check (an assertion inside the allocator) becomes a
//! [`Check::Panic`] attributed to the step that was running
//! ([`Failure::from_panic`]). A runner can also narrate every comparison it
//! makes ([`start_narrating`]), which is how `triage repro` shows a run
//! side by side.

use core::fmt::{self, Debug, Display};
use std::cell::RefCell;

/// The result of a runner or of one of its checks (the failure boxed: it
/// is rare, and the happy path stays small).
pub type Checked<T = ()> = Result<T, Box<Failure>>;

/// Which comparison failed. `Display` gives the name used in messages and
/// signatures.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// The pool's capacity after a step.
    Capacity,
    /// The set of used ids.
    UsedIds,
    /// The id an acquire returned.
    AcquiredId,
    /// The id a find returned.
    FoundId,
    /// The size a grow or shrink request asked for.
    RequestedSize,
    /// Whether an allocation was kept for its commit, and whether it holds
    /// memory (a C resizer holds NULL after a failed allocation).
    AllocationKept,
    /// A resizer's length, emptiness and inline/heap switch, read through
    /// its public API.
    ResizerShape,
    /// One id of a bulk acquire.
    BulkId,
    /// The capacity in the middle of a bulk acquire.
    BulkCapacity,
    /// Whether a reset could build its pool.
    ResetSucceeds,
    /// Whether a pool at the ceiling could be built.
    CeilingPoolBuilt,
    /// The capacity of a pool built at the ceiling.
    CeilingPoolCapacity,
    /// The grow request of a pool at the ceiling.
    CeilingGrowRequest,
    /// The result of a table operation.
    Outcome,
    /// A node lookup.
    Lookup,
    /// The table's own invariants (pool and `by_handle` agree, ...).
    Invariant,
    /// `by_handle` against the model's.
    ByHandle,
    /// The pool's bits, read one id at a time, against the model's.
    PoolBits,
    /// `by_node`, every live node, against the model's.
    ByNode,
    /// The planned allocation failures not consumed yet.
    PendingFailures,
    /// A new handle 0 given to a process that is not the context manager.
    HandleZero,
    /// The table flavours handed out different results.
    FlavoursDisagree,
    /// A design's own invariants (the fast pool's summaries and counters,
    /// the augmented tree's shape).
    DesignInvariant,
    /// An operation that never finished.
    Livelock,
    /// The C driver's `BUG()` in `binder_get_ref_for_node_olocked` (a
    /// descriptor already in `refs_by_desc`) where the model expected none.
    KernelCrash,
    /// A warning (`WARN_ON`, `pr_err`) the model did not expect, or one it
    /// expected that did not come.
    Warning,
    /// Two versions run side by side on the same program behaved
    /// differently (see [`crate::history`]).
    VersionsDiffer,
    /// A table (or its pool, where the pool keeps one) reports another
    /// version than the one it was built for.
    Version,
    /// Whether the table says its process has died, against the model.
    Death,
    /// How many ids the shrinker says a reclaim would give back
    /// (`count_objects`), against the model's reclaim.
    Reclaimable,
    /// The kernel's own C and ours disagree (`kernel_dbitmap`).
    Kernel,
    /// What the processes read after a command (`binder_commands`).
    Reads,
    /// The kernel log lines a command printed (`binder_commands`).
    KernelLog,
    /// The C and the Rust driver showed userspace different things
    /// (`binder_commands`).
    DriversDiffer,
    /// A panic that came from no check; the name is the first clause of
    /// its message, digits folded (`attempt to subtract with overflow`).
    Panic(String),
}

impl Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Check::Capacity => "capacity",
            Check::UsedIds => "used ids",
            Check::AcquiredId => "acquired id",
            Check::FoundId => "found id",
            Check::RequestedSize => "requested size",
            Check::AllocationKept => "allocation kept for commit",
            Check::ResizerShape => "resizer shape",
            Check::BulkId => "bulk acquire id",
            Check::BulkCapacity => "capacity during the bulk acquire",
            Check::ResetSucceeds => "reset succeeds",
            Check::CeilingPoolBuilt => "ceiling pool built",
            Check::CeilingPoolCapacity => "ceiling pool capacity",
            Check::CeilingGrowRequest => "grow request at the ceiling",
            Check::Outcome => "outcome",
            Check::Lookup => "lookup",
            Check::Invariant => "invariant",
            Check::ByHandle => "by_handle",
            Check::PoolBits => "pool bits",
            Check::ByNode => "by_node",
            Check::PendingFailures => "planned failures pending",
            Check::HandleZero => "handle 0 to a non-manager",
            Check::FlavoursDisagree => "flavours disagree",
            Check::DesignInvariant => "design invariant",
            Check::Livelock => "livelock",
            Check::KernelCrash => "kernel crash",
            Check::Warning => "warning",
            Check::VersionsDiffer => "versions differ",
            Check::Version => "version",
            Check::Death => "process death",
            Check::Reclaimable => "reclaimable ids",
            Check::Kernel => "kernel",
            Check::Reads => "reads",
            Check::KernelLog => "kernel log",
            Check::DriversDiffer => "drivers differ",
            Check::Panic(what) => return write!(f, "panic: {what}"),
        })
    }
}

/// Declares [`OpKind`] from one list, with its `Display`.
macro_rules! op_kinds {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// The kind of operation a failure happened in, across every op
        /// language (an op type says its kind through [`Op::kind`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpKind {
            $($(#[doc = $doc])* $name,)*
        }

        impl Display for OpKind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(OpKind::$name => stringify!($name),)*
                })
            }
        }
    };
}

op_kinds! {
    /// Acquire one id.
    Acquire,
    /// Find an id without acquiring it.
    FindThenDrop,
    /// Release one id or one reference.
    Release,
    /// Request and allocate a resize.
    Prepare,
    /// Commit a pending resize.
    Commit,
    /// Acquire many ids.
    AcquireMany,
    /// Release a range of ids.
    ReleaseMany,
    /// Release every id from a point up.
    ReleaseFrom,
    /// Start over with a fresh pool.
    Reset,
    /// Probe the 2^30 ceiling on a pool built aside.
    ProbeCeiling,
    /// Insert a reference to a node.
    Insert,
    /// One more reference.
    Increment,
    /// One reference less.
    Decrement,
    /// Look a node up.
    Lookup,
    /// The memory-pressure callback (the shrinker's reclaim).
    Reclaim,
    /// The process dies.
    Kill,
    /// Plan allocation failures.
    FailNext,
    /// Insert many fresh nodes.
    InsertMany,
    /// Drop every handle from one up.
    DropFrom,
    /// Drop every handle.
    DropAll,
    /// Drop a prefilled handle.
    ReleasePrefill,
    /// The checks after the last step.
    EndOfRun,
    /// Corrupt the pool behind the table's back.
    Corrupt,
    /// Build the tables from given handles (`start-from`).
    StartFrom,
    /// Start over with a fresh pool whose allocation fails.
    ResetFailing,
    /// Become the context manager.
    SetManager,
    /// A one-way transaction.
    Transaction,
    /// Free a received buffer.
    FreeBuffer,
    /// Request or clear a death notification.
    Death,
}

/// An operation of some op language.
pub trait Op: Debug {
    /// Its kind, for failures and dictionaries.
    fn kind(&self) -> OpKind;
}

/// The phase of a Binder operation's step machine (the allocator's
/// `Operation::phase` names), for failures of the concurrent target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// The first critical section.
    Start,
    /// Allocating the reference (unlocked).
    AllocRef,
    /// Picking an id.
    Pick,
    /// Allocating a larger map (unlocked).
    GrowAlloc,
    /// Committing a grow.
    GrowCommit,
    /// Allocating a smaller map (unlocked).
    ShrinkAlloc,
    /// Committing a shrink.
    ShrinkCommit,
    /// Finished.
    Done,
    /// A phase this harness does not know by name yet.
    Other(&'static str),
}

impl Phase {
    /// The phase the allocator calls `name`.
    pub fn of(name: &'static str) -> Phase {
        match name {
            "start" => Phase::Start,
            "alloc-ref" => Phase::AllocRef,
            "pick" => Phase::Pick,
            "grow-alloc" => Phase::GrowAlloc,
            "grow-commit" => Phase::GrowCommit,
            "shrink-alloc" => Phase::ShrinkAlloc,
            "shrink-commit" => Phase::ShrinkCommit,
            "done" => Phase::Done,
            other => Phase::Other(other),
        }
    }

    /// Whether the step commits a resize.
    pub fn is_commit(self) -> bool {
        matches!(self, Phase::GrowCommit | Phase::ShrinkCommit)
    }
}

impl Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Start => "start",
            Phase::AllocRef => "alloc-ref",
            Phase::Pick => "pick",
            Phase::GrowAlloc => "grow-alloc",
            Phase::GrowCommit => "grow-commit",
            Phase::ShrinkAlloc => "shrink-alloc",
            Phase::ShrinkCommit => "shrink-commit",
            Phase::Done => "done",
            Phase::Other(name) => name,
        })
    }
}

/// The capacity regime of a failure, for its signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Regime {
    /// No bitmap (disabled dbitmap, linear scan).
    NoBitmap,
    /// One inline word.
    Inline,
    /// Two words.
    TwoWords,
    /// Up to 4096 ids.
    Small,
    /// Up to 2^20 ids.
    Deep,
    /// Beyond.
    Huge,
}

impl Regime {
    /// The regime of a pool of `capacity` ids.
    pub fn of(capacity: usize) -> Regime {
        match capacity {
            0 => Regime::NoBitmap,
            1..=64 => Regime::Inline,
            65..=128 => Regime::TwoWords,
            129..=4096 => Regime::Small,
            4097..=1048576 => Regime::Deep,
            _ => Regime::Huge,
        }
    }
}

impl Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Regime::NoBitmap => "no-bitmap",
            Regime::Inline => "inline",
            Regime::TwoWords => "two-words",
            Regime::Small => "small",
            Regime::Deep => "deep",
            Regime::Huge => "huge",
        })
    }
}

/// A failed check, as a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The target.
    pub target: &'static str,
    /// The step (0-based) at which it failed.
    pub step: usize,
    /// The kind of operation that failed.
    pub op: OpKind,
    /// Which check failed.
    pub check: Check,
    /// The table flavour the check was about (`idpool`, `dbitmap`,
    /// `linear`), if it was about one.
    pub flavour: Option<&'static str>,
    /// The phase of the step (concurrent target only).
    pub phase: Option<Phase>,
    /// The capacity of the pool when it failed.
    pub capacity: usize,
    /// What the check saw, for the failures whose check and flavour do not
    /// tell one bug from another (the known upstream findings,
    /// [`crate::history::Finding::of`]); `None` for the others.
    pub detail: Option<Detail>,
    /// The whole message, for people.
    pub message: String,
}

/// What a failed check saw, as values: which descriptor a crash was about
/// and whose insert it was, what two versions side by side returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The C driver's `BUG()` ([`Check::KernelCrash`]) on an insert.
    Crash {
        /// The version of the table that crashed.
        version: idpool::Version,
        /// The descriptor found twice in `refs_by_desc`.
        id: u32,
        /// Whether the insert was the context manager's.
        manager: bool,
    },
    /// Two versions run side by side on one request
    /// ([`Check::VersionsDiffer`]): each side's version, outcome, capacity
    /// and planned failures afterwards, in the order of the comparison's
    /// name.
    Versions {
        /// The request both ran.
        request: idpool::Request,
        /// The versions.
        versions: [idpool::Version; 2],
        /// What each returned.
        outcomes: [Result<u32, idpool::Error>; 2],
        /// The capacity both pools had before the request (a pair whose
        /// capacities differ is not compared again).
        before: usize,
        /// Each pool's capacity after the request.
        capacities: [usize; 2],
        /// The planned allocation failures each side had not consumed
        /// after the request: which allocations it attempted.
        pending: [u32; 2],
    },
    /// The C and the Rust driver differ in a way a rule of
    /// `commands::compare` explains.
    Drivers {
        /// The rule's name.
        rule: &'static str,
    },
}

impl Failure {
    /// How the oracle failed: target, check (with its flavour), op kind,
    /// capacity regime, e.g. `pool_ops/capacity/Commit/small` or
    /// `handle_table/idpool: invariant/Decrement/inline`. Two failures with
    /// the same signature are taken to be the same bug.
    pub fn signature(&self) -> String {
        let flavour = self.flavour.map(|f| format!("{f}: ")).unwrap_or_default();
        format!(
            "{}/{flavour}{}/{}/{}",
            self.target,
            self.check,
            self.op,
            Regime::of(self.capacity)
        )
    }

    /// The same failure, with `detail`.
    pub fn with_detail(mut self: Box<Self>, detail: Detail) -> Box<Failure> {
        self.detail = Some(detail);
        self
    }

    /// Panics with the message, as a fuzz target must.
    #[track_caller]
    pub fn raise(self) -> ! {
        panic!("{}", self.message)
    }

    /// The failure behind a caught panic that came from no check: built
    /// from the panic's message and the step that was running (see
    /// [`begin_step`]).
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        let (target, step, op, capacity) =
            CURRENT
                .with(|c| *c.borrow())
                .unwrap_or(("?", 0, OpKind::EndOfRun, 0));
        // The first clause of the message names the check: "handle table
        // corruption", "attempt to subtract with overflow", ...
        let first = message.split([':', '\n']).next().unwrap_or_default();
        let name = first
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        Failure {
            target,
            step,
            op,
            check: Check::Panic(name),
            flavour: None,
            phase: None,
            capacity,
            detail: None,
            message: format!("{target}: step {step} (capacity {capacity}): panic: {message}"),
        }
    }
}

impl Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a runner is doing right now: target, step, op kind, capacity.
type Context = (&'static str, usize, OpKind, usize);

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
    static NARRATION: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runners call this as each step starts: a panic that does not come from
/// a check (an assertion inside the allocator, say) is then attributed to
/// the step by [`Failure::from_panic`], and a narration gets a header line.
pub fn begin_step(target: &'static str, step: usize, op: &impl Op, capacity: usize) {
    CURRENT.with(|c| *c.borrow_mut() = Some((target, step, op.kind(), capacity)));
    narrate(|| format!("step {step}: {op:?} (capacity {capacity})"));
}

/// From now on, on this thread, every comparison is recorded until
/// [`stop_narrating`].
pub fn start_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = Some(Vec::new()));
}

/// Stops recording comparisons.
pub fn stop_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = None);
}

/// Takes the comparisons recorded since the last call.
pub fn take_narration() -> Vec<String> {
    NARRATION.with(|n| {
        n.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
}

/// Records one line of narration, if narrating.
pub fn narrate(line: impl FnOnce() -> String) {
    NARRATION.with(|n| {
        if let Some(lines) = n.borrow_mut().as_mut() {
            lines.push(line());
        }
    });
}

thread_local! {
    /// How many [`quietly`] calls this thread is inside.
    static QUIET: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with this thread's panic messages silenced (a panic's message
/// would only be noise: the caller catches it and keeps the value).
///
/// The panic hook is the whole process's: taking it and putting it back
/// around `f` would race with another thread doing the same (one of them
/// restores the silent hook for good, and every later panic of the
/// process goes unprinted). So the process's hook is wrapped once, and
/// the wrapper stays silent only for a thread inside `quietly`.
pub fn quietly<T>(f: impl FnOnce() -> T) -> T {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) == 0 {
                hook(info);
            }
        }));
    });
    /// Leaves the quiet section when dropped, a panic's unwinding included.
    struct Loud;
    impl Drop for Loud {
        fn drop(&mut self) {
            QUIET.with(|q| q.set(q.get() - 1));
        }
    }
    QUIET.with(|q| q.set(q.get() + 1));
    let _loud = Loud;
    f()
}

/// Runs `f`, turning a panic that came from no check into a [`Failure`]
/// (see [`Failure::from_panic`]); the panic is not printed.
pub fn catching<T>(f: impl FnOnce() -> Checked<T>) -> Checked<T> {
    quietly(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .unwrap_or_else(|payload| Err(Box::new(Failure::from_panic(payload.as_ref()))))
}

/// Where a runner is: which target, which step, which operation, and the
/// capacity at that moment.
pub struct At<'a, O: Op> {
    /// The target's name.
    pub target: &'static str,
    /// The step's index in the op list (0-based).
    pub step: usize,
    /// The operation being checked.
    pub op: &'a O,
    /// The pool's capacity when the step started.
    pub capacity: usize,
}

impl<O: Op> At<'_, O> {
    /// The failure of `check` (about `flavour`, if any) at this step;
    /// `what` says what went wrong.
    pub fn failure(
        &self,
        check: Check,
        flavour: Option<&'static str>,
        what: impl Display,
    ) -> Box<Failure> {
        Box::new(Failure {
            target: self.target,
            step: self.step,
            op: self.op.kind(),
            check,
            flavour,
            phase: None,
            capacity: self.capacity,
            detail: None,
            message: format!(
                "{}: step {} `{:?}` (capacity {}): {what}",
                self.target, self.step, self.op, self.capacity
            ),
        })
    }

    /// Fails `check` unless `expected == actual`; its name is what was
    /// compared.
    pub fn eq<T: PartialEq + Debug>(&self, check: Check, expected: T, actual: T) -> Checked {
        // The name is formatted only when it is printed: a `String` per
        // comparison was a few percent of a run.
        let what = check.clone();
        self.compare(check, None, what, expected, actual)
    }

    /// Fails `check` (about `flavour`) unless `expected == actual`; `what`
    /// names what was compared (formatted only on failure or when
    /// narrating: pass `format_args!` rather than a `String`).
    pub fn compare<T: PartialEq + Debug>(
        &self,
        check: Check,
        flavour: Option<&'static str>,
        what: impl Display,
        expected: T,
        actual: T,
    ) -> Checked {
        narrate(|| format!("{what}: model {expected:?} | allocator {actual:?}"));
        if expected == actual {
            return Ok(());
        }
        Err(self.failure(
            check,
            flavour,
            format_args!("{what}: expected {expected:?}, got {actual:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `quietly` leaves its thread loud again however `f` ends, a panic
    /// that unwinds through it included, and threads doing it at once do
    /// not leave each other quiet.
    #[test]
    fn quiet_sections_end_on_every_thread() {
        let quiet = || QUIET.with(|q| q.get());
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..100 {
                        let caught = catching::<()>(|| panic!("a check failed"));
                        assert!(caught.is_err());
                        let unwound =
                            std::panic::catch_unwind(|| quietly(|| panic!("through quietly")));
                        assert!(unwound.is_err());
                        assert_eq!(quiet(), 0);
                    }
                });
            }
        });
        assert_eq!(quietly(|| quietly(quiet)), 2);
        assert_eq!(quiet(), 0);
    }
}
