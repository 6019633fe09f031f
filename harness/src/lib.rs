//! The differential harness shared by every fuzz engine, the triage tool and
//! the tests.
//!
//! Bytes become a list of operations (through [`arbitrary`]); the runners
//! apply each operation to the allocator and to a naive model, and panic at
//! the first divergence or broken invariant with the step, the operation,
//! what was expected and what happened. The models never call the
//! allocator: they are a set of live ids (`IdSet`), `BTreeMap`s, the plain gap
//! scan, and SPEC.md's capacity formulas ([`oracle`]).
//!
//! Data flows one way: input bytes decode to an op program
//! ([`decode`], [`sched::decode`]); a runner drives the allocator and the
//! model ([`pool`], [`table`], [`sched`]); the first divergence is a typed
//! [`check::Failure`]; a program prints as a [`trace::Trace`], which the
//! triage tool replays and shrinks. Every target is listed once, in
//! [`registry::TARGETS`]. A fuzz target calls one of [`pool_ops`],
//! [`dbitmap_ops`], [`handle_table`], [`concurrent_resize`],
//! [`kernel_dbitmap`] (or
//! [`trace::roundtrip`]) and does nothing else.

pub mod bits;
pub mod check;
pub mod commands;
pub mod designs;
pub mod dict;
pub mod domain;
pub mod feedback;
pub mod files;
pub mod history;
pub mod idset;
pub mod input;
pub mod kernel;
pub mod model;
pub mod mutant;
pub mod oracle;
pub mod pool;
pub mod registry;
pub mod sched;
pub mod seeds;
pub mod shrink;
pub mod table;
pub mod table_start;
pub mod table_target;
pub mod targets;
pub mod text;
pub mod trace;

pub use registry::{Target, TARGETS};

use arbitrary::{Arbitrary, Unstructured};

/// The most operations one input runs.
pub const MAX_OPS: usize = 64;

/// Declares [`Events`] and its helpers from one list of counters, so that
/// a new counter cannot be forgotten by `counts` or `merge`.
macro_rules! events {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// How often the interesting paths were taken in a run. The smoke
        /// test asserts that random inputs reach all of them.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Events {
            $($(#[doc = $doc])* pub $name: u32,)*
        }

        impl Events {
            /// Every counter with its name.
            pub fn counts(&self) -> Vec<(&'static str, u32)> {
                vec![$((stringify!($name), self.$name),)*]
            }

            /// Adds `other`'s counts to these.
            pub fn merge(&mut self, other: Events) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

events! {
    /// A grow raised the capacity.
    grow_committed,
    /// A grow commit found the pool already as large (stale resizer).
    stale_grow_ignored,
    /// A grow request was refused at the 2^30 ceiling.
    grow_at_ceiling,
    /// A shrink lowered the capacity.
    shrink_committed,
    /// A shrink commit re-validated and refused.
    shrink_refused,
    /// A stale shrink raised the capacity (the kernel's quirk).
    shrink_raised_capacity,
    /// An injected allocation failure took effect.
    alloc_failed,
    /// An acquire found the pool full.
    pool_full,
    /// A dbitmap was disabled.
    disabled,
    /// A disabled dbitmap's table found an id with the linear scan.
    scan_fallback,
    /// A dead process refused an insert.
    dead_refused,
    /// A step ran with a capacity of 4096 ids or more.
    deep,
    /// A critical section ran while another thread's operation was between
    /// two of its steps (concurrent target only).
    interleaved,
    /// A design driven beside mainline was compared with it at a capacity
    /// of 4096 ids or more (`pool_ops`: the fast pool).
    design_deep,
    /// A reclaim gave ids back (the shrinker).
    reclaimed,
    /// The augmented tree handed out a handle of 64 or more.
    tree_wide,
    /// A context manager's insert found the map full, dropped the lock,
    /// and at its grow commit handle 0 had changed hands (concurrent
    /// target only).
    manager_grow_zero_moved,
    /// A context manager's insert found the map full, dropped the lock,
    /// and another context manager's node was inserted before its grow
    /// commit (concurrent target only).
    manager_grow_other_manager,
    /// The process died while an insert had dropped the lock, and the
    /// insert then finished (refused or not, per version; concurrent
    /// target only).
    killed_in_window,
    /// A dead process's table took a new reference (the C driver, which
    /// does not look).
    dead_inserted,
    /// A lookup of a node (concurrent target only).
    lookups,
    /// A handle table was built from given handles, one of them above
    /// 65,535 (`start-from`).
    started_above_16_bits,
    /// A pool built with an injected allocation failure was refused (the
    /// Rust `with_capacity` above one word; `pool_ops`).
    reset_refused,
    /// A map was disabled at `dbitmap_init` (its allocation failed) and the
    /// run went on with it (`dbitmap_ops`, `kernel_dbitmap`).
    disabled_at_init,
    /// A C grow size was asked at a size where the 32-bit shift wraps
    /// (2^31 bits and up; computed, not allocated).
    grow_target_wrapped,
    /// A corruption changed a bit of the pool (concurrent target only).
    corrupted,
    /// A pick met a pool/`by_handle` mismatch and the version warned and
    /// returned `EINVAL`, as its model expected (Rust mainline; concurrent
    /// target only).
    mismatch_einval,
    /// A pick met a mismatch and the version logged it and searched on, as
    /// its model expected (Rust's first posting; concurrent target only).
    mismatch_search_on,
    /// A pick met a mismatch and the kernel's `BUG()` fired, as the
    /// version's model expected after the corruption (C; concurrent target
    /// only).
    mismatch_crash,
    /// The C and the Rust driver differed in a way a known rule explains
    /// (`binder_commands`).
    drivers_differ,
    /// A process became the context manager (`binder_commands`).
    manager_registered,
    /// A process became the context manager after an earlier one died
    /// (`binder_commands`).
    manager_replaced,
    /// A transaction's object was translated for its receiver
    /// (`binder_commands`).
    objects_translated,
    /// A transaction's object reached its receiver as handle 0
    /// (`binder_commands`).
    handle_zero_received,
    /// A death notification was read (`binder_commands`).
    death_delivered,
    /// `BINDER_GET_NODE_INFO_FOR_REF` answered with counts
    /// (`binder_commands`).
    node_info_answered,
    /// A process held more than 64 references, past its handle map's
    /// first grow (`binder_commands`).
    refs_past_one_word,
}

/// Decodes up to [`MAX_OPS`] operations; trailing bytes that do not make a
/// whole operation are ignored.
pub fn decode<'a, Op: Arbitrary<'a>>(data: &'a [u8]) -> Vec<Op> {
    let mut u = Unstructured::new(data);
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS && !u.is_empty() {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    ops
}

/// Runs target `name` on `data`, panicking at the first failure as a fuzz
/// target does; `None` for an unknown target.
pub fn run_target(name: &str, data: &[u8]) -> Option<Events> {
    Some(registry::fuzz(registry::target(name)?, data))
}

/// Target `pool_ops`: the Rust `IdPool` against the model, `FastPool`
/// beside it.
pub fn pool_ops(data: &[u8]) -> Events {
    registry::fuzz(&targets::POOL_OPS, data)
}

/// Target `dbitmap_ops`: the C `dbitmap` against the model.
pub fn dbitmap_ops(data: &[u8]) -> Events {
    registry::fuzz(&targets::DBITMAP_OPS, data)
}

/// Target `handle_table`: mainline's three table flavours and the three
/// designs side by side.
pub fn handle_table(data: &[u8]) -> Events {
    registry::fuzz(&targets::HANDLE_TABLE, data)
}

/// Target `concurrent_resize`: 2 to 4 simulated threads whose steps are
/// interleaved as the bytes say (see [`sched`]).
pub fn concurrent_resize(data: &[u8]) -> Events {
    registry::fuzz(&targets::CONCURRENT_RESIZE, data)
}

/// Target `kernel_dbitmap`: the kernel's own C dbitmap, ours and the model
/// on the `dbitmap_ops` program (see [`kernel`]). Needs the kernel header.
pub fn kernel_dbitmap(data: &[u8]) -> Events {
    registry::fuzz(&targets::KERNEL_DBITMAP, data)
}

/// Target `binder_commands`: the C and the Rust driver at the command
/// level (see [`commands`]).
pub fn binder_commands(data: &[u8]) -> Events {
    registry::fuzz(&targets::BINDER_COMMANDS, data)
}

/// A concurrent run's outcome as [`Events`].
pub fn sched_events(out: &sched::Outcome) -> Events {
    Events {
        grow_committed: out.grows,
        shrink_committed: out.shrinks,
        alloc_failed: out.failed_allocs,
        interleaved: out.interleaved,
        reclaimed: out.reclaims,
        manager_grow_zero_moved: out.manager_grow_zero_moved,
        manager_grow_other_manager: out.manager_grow_other_manager,
        killed_in_window: out.killed_in_window,
        dead_refused: out.dead_refused,
        dead_inserted: out.dead_inserted,
        lookups: out.lookups,
        corrupted: out.corruptions,
        mismatch_einval: out.mismatch_einval,
        mismatch_search_on: out.mismatch_search_on,
        mismatch_crash: out.mismatch_crash,
        ..Events::default()
    }
}
