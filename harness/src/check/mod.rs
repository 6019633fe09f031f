//! Typed failures and the comparison that produces them, shared by every
//! runner.
//!
//! A runner compares every observable after every step; the first
//! comparison that fails becomes a [`Failure`]: a value naming the target
//! (the registry entry's name, handed to the runner), the step, the
//! [`OpKind`], the [`Check`], the [`Phase`] (step machines), the
//! [`Flavour`] the check was about and the capacity, with the whole human
//! message, e.g.
//!
//! ```text
//! pool_ops: step 7 `Commit(2)` (capacity 128): capacity: expected 128, got 64
//! ```
//!
//! Runners return `Result<Events, Failure>` ([`Checked`]); a fuzz target
//! panics with the message ([`Failure::raise`]); the triage tool keeps the
//! value and groups failures by their [`Signature`], built from those
//! values rather than from text or stack frames.
//!
//! - [`failure`]: [`Failure`], [`Signature`], [`Flavour`], [`Detail`];
//! - [`at`]: [`At`], where a runner is, and its comparisons (`eq`,
//!   `compare`, `failure`);
//! - [`mod@narrate`]: the step being run (so that a panic from no check is
//!   attributed to it, [`Failure::from_panic`], [`catching`]) and the
//!   narration of every comparison that `triage repro` prints.

pub mod at;
pub mod failure;
pub mod narrate;

pub use at::At;
pub use failure::{Detail, Failure, FailureJson, Flavour, FlavourName, Signature};
pub use narrate::{
    begin_step, catching, narrate, quietly, start_narrating, stop_narrating, take_narration,
};

use core::fmt::{self, Debug, Display};

/// The result of a runner or of one of its checks (the failure boxed: it
/// is rare, and the happy path stays small).
pub type Checked<T = ()> = Result<T, Box<Failure>>;

/// What a check on the ids means when it fails.
const IDS_LOST: &str =
    "the bitmap and the handle tree disagree: an id was lost (it could be issued twice) or leaked";
/// What a check on the capacity means when it fails.
const POLICY: &str = "the pool's size differs from the grow/shrink policy (docs/spec.md): a \
                      resize committed when it should not have, or the other way round";
/// What a check at the ceiling means when it fails.
const CEILING: &str = "the 2^30-id ceiling (Rust) or the 32-bit grow size and its wrap at 2^31 \
                       (C) is not where docs/spec.md puts it";
/// What a check of an answer means when it fails.
const ANSWER: &str = "the allocator's answer is not what the naive model expects: not the \
                      smallest free id, or not the right error";

/// Declares [`Check`] from one list: each comparison with the name used in
/// messages and signatures and what its failure means, so that a new kind
/// of comparison is one entry here.
macro_rules! checks {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $meaning:expr;)*) => {
        /// Which comparison failed. `Display` gives the name used in
        /// messages and signatures; [`Check::meaning`] says what a failure
        /// of it means.
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Check {
            $($(#[doc = $doc])* $variant,)*
            /// A panic that came from no check; the name is the first
            /// clause of its message, digits folded (`attempt to subtract
            /// with overflow`).
            Panic(String),
        }

        impl Check {
            /// What a failure of this check means, in plain words.
            pub fn meaning(&self) -> &'static str {
                match self {
                    $(Check::$variant => $meaning,)*
                    Check::Panic(_) => "the allocator itself panicked (an assertion or an \
                                        arithmetic overflow) at this step",
                }
            }
        }

        impl Display for Check {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(Check::$variant => $name,)*
                    Check::Panic(what) => return write!(f, "panic: {what}"),
                })
            }
        }
    };
}

checks! {
    /// The pool's capacity after a step.
    Capacity => "capacity", POLICY;
    /// The set of used ids.
    UsedIds => "used ids", IDS_LOST;
    /// The id an acquire returned.
    AcquiredId => "acquired id", ANSWER;
    /// The id a find returned.
    FoundId => "found id", ANSWER;
    /// The size a grow or shrink request asked for.
    RequestedSize => "requested size", POLICY;
    /// Whether an allocation was kept for its commit, and whether it holds
    /// memory (a C resizer holds NULL after a failed allocation).
    AllocationKept => "allocation kept for commit", POLICY;
    /// A resizer's length, emptiness and inline/heap switch, read through
    /// its public API.
    ResizerShape => "resizer shape", POLICY;
    /// One id of a bulk acquire.
    BulkId => "bulk acquire id", ANSWER;
    /// The capacity in the middle of a bulk acquire.
    BulkCapacity => "capacity during the bulk acquire", POLICY;
    /// Whether a reset could build its pool.
    ResetSucceeds => "reset succeeds", POLICY;
    /// Whether a pool at the ceiling could be built.
    CeilingPoolBuilt => "ceiling pool built", CEILING;
    /// The capacity of a pool built at the ceiling.
    CeilingPoolCapacity => "ceiling pool capacity", CEILING;
    /// The grow request of a pool at the ceiling.
    CeilingGrowRequest => "grow request at the ceiling", CEILING;
    /// The result of a table operation.
    Outcome => "outcome", ANSWER;
    /// A node lookup.
    Lookup => "lookup", ANSWER;
    /// The table's own invariants (pool and `by_handle` agree, ...).
    Invariant => "invariant", IDS_LOST;
    /// `by_handle` against the model's.
    ByHandle => "by_handle", IDS_LOST;
    /// The pool's bits, read one id at a time, against the model's.
    PoolBits => "pool bits", IDS_LOST;
    /// `by_node`, every live node, against the model's.
    ByNode => "by_node", IDS_LOST;
    /// The planned allocation failures not consumed yet.
    PendingFailures => "planned failures pending",
        "the table made a different number of allocations than the model expects: an \
         allocation skipped or made twice";
    /// A new handle 0 given to a process that is not the context manager.
    HandleZero => "handle 0 to a non-manager",
        "handle 0 belongs to the context manager, and another process's reference got it";
    /// The table flavours handed out different results.
    FlavoursDisagree => "flavours disagree",
        "the table flavours (mainline's three and the designs) handed out different ids for \
         the same history";
    /// A design's own invariants (the fast pool's summaries and counters,
    /// the augmented tree's shape).
    DesignInvariant => "design invariant",
        "a design's own bookkeeping (the fast pool's summaries and counters, the augmented \
         tree's shape) is broken";
    /// An operation that never finished.
    Livelock => "livelock",
        "a thread never finished its operation: the protocol can loop forever under this \
         schedule";
    /// The C driver's `BUG()` in `binder_get_ref_for_node_olocked` (a
    /// descriptor already in `refs_by_desc`) where the model expected none.
    KernelCrash => "kernel crash",
        "the C driver gave a descriptor that refs_by_desc already holds and hit BUG(): a \
         kernel crash";
    /// A warning (`WARN_ON`, `pr_err`) the model did not expect, or one it
    /// expected that did not come.
    Warning => "warning",
        "the kernel logged a warning (WARN_ON, pr_err) the model did not expect, or did not \
         log one it expected";
    /// Two versions run side by side on the same program behaved
    /// differently (see [`crate::history`]).
    VersionsDiffer => "versions differ",
        "two upstream versions run side by side on the same program behaved differently";
    /// A table (or its pool, where the pool keeps one) reports another
    /// version than the one it was built for.
    Version => "version",
        "a table or its pool follows another upstream version than the one it was built for";
    /// Whether the table says its process has died, against the model.
    Death => "process death",
        "the table says its process is dead when it is alive, or alive when it is dead";
    /// How many ids the shrinker says a reclaim would give back
    /// (`count_objects`), against the model's reclaim.
    Reclaimable => "reclaimable ids",
        "the shrinker's count of reclaimable ids (count_objects) is not what its reclaim \
         (scan_objects) would give back";
    /// The kernel's own code and ours disagree (`kernel_dbitmap`,
    /// `kernel_idpool`).
    Kernel => "kernel",
        "the kernel's own code (dbitmap.h, or id_pool.rs and bitmap.rs) and ours did \
         different things on the same call; the message says which side the model stands with";
    /// The kernel's own C freed a map it had already freed
    /// (`kernel_dbitmap`'s historical header, at the process's release).
    DoubleFree => "double free",
        "memory safety: the kernel's own C freed a map it had already freed (a use after free \
         in the kernel), which AddressSanitizer reports under the fuzzers";
    /// What the processes read after a command (`binder_commands`).
    Reads => "reads",
        "a process read other BR_* returns after a command than the driver's naive model \
         expects";
    /// The kernel log lines a command printed (`binder_commands`).
    KernelLog => "kernel log",
        "the driver printed other kernel log lines than its naive model expects";
    /// The C and the Rust driver showed userspace different things
    /// (`binder_commands`).
    DriversDiffer => "drivers differ",
        "the C and the Rust driver showed userspace different things for the same commands; \
         the message names the known difference, or none if it is new";
}

impl Check {
    /// Whether a failure of this check is a memory-safety error of the code
    /// under test (which AddressSanitizer reports, under the fuzzers),
    /// rather than a difference from a model.
    pub fn is_memory_safety(&self) -> bool {
        matches!(self, Check::DoubleFree)
    }
}

/// The kind of operation a failure happened in: its name in signatures and
/// dictionaries (the op type's variant, `Commit`), and a class number for
/// the state feedback. Each op language names its own kinds ([`Op::kind`]);
/// the runners share [`OpKind::END_OF_RUN`].
///
/// # Invariants
///
/// `class` is below 64 (the feedback spends 6 bits on it), and two kinds
/// of one op language have different classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpKind {
    name: &'static str,
    class: u8,
}

impl OpKind {
    /// The checks after the last step of a run.
    pub const END_OF_RUN: OpKind = OpKind::new("EndOfRun", 21);

    /// The kind called `name`, of feedback class `class`.
    ///
    /// # Panics
    ///
    /// When `class` is 64 or more (at compile time in a `const`).
    pub const fn new(name: &'static str, class: u8) -> OpKind {
        assert!(class < 64, "an op kind's class is below 64");
        OpKind { name, class }
    }

    /// Its name, as signatures print it.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Its class, for the state feedback.
    pub fn class(self) -> u64 {
        u64::from(self.class)
    }
}

impl Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// An operation of some op language.
pub trait Op: Debug {
    /// Its kind, for failures, dictionaries and the state feedback.
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
