//! The differential harness shared by every fuzz engine, the triage tool and
//! the tests.
//!
//! Bytes become a program of operations; a runner applies each operation to
//! the allocator and to a naive model, and fails at the first divergence or
//! broken invariant with the step, the operation, what was expected and
//! what happened. The models never call the allocator: they are a set of
//! live ids, ordered maps, the plain gap scan and the capacity formulas of
//! `docs/spec.md`.
//!
//! # Layout: by target
//!
//! Three layers. A module imports from its own layer and the layers below,
//! never from a layer above.
//!
//! - **The list** (top): `src/targets/mod.rs` names every target once, one
//!   line each, and finds a target by name; `fuzz` is the one function
//!   every engine's glue calls, with the target's name.
//! - **One folder per target**, `src/targets/<name>/`: its operations (the
//!   op enum, how bytes decode to it, its kind and its trace line), its
//!   model, its runner, its trace form and its registry entry, a `static`
//!   in the folder's `mod.rs`. A target over another target's op language
//!   (`dbitmap_ops` and `kernel_dbitmap` run `pool_ops`' operations on
//!   other pools) holds only what differs: its pool adapter and its entry.
//!   A target folder imports the shared machinery, and the folder whose op
//!   language it runs; never the list.
//! - **Shared machinery** (bottom), which names no target: what a target
//!   is (`registry`), typed failures, their signatures and the comparison
//!   of expected with actual (`check`), the trace format (`trace`, `text`,
//!   `shrink`), the scheduler engine for step machines (`sched`), the model
//!   parts several targets share (`model`, `bits`, `history`, `oracle`,
//!   `designs`, `idset`, `domain`), and what the engines get besides a run
//!   (`feedback`, `seeds`, `dict`).
//!
//! A target's name exists once, in its registry entry: the entry hands it
//! to the runner, which puts it on every failure, signature, narration and
//! abstract state, so two targets over one op language never answer to
//! each other's name.
//!
//! # Adding a target
//!
//! 1. Its folder, `src/targets/<name>/`: for a list of operations, an op
//!    type implementing `check::Op`, `text::OpText` and `Arbitrary`, a
//!    runner `fn(target: &'static str, ops: &[Op]) -> check::Checked<Events>`
//!    that fails through `check::At`, and the entry
//!    `pub static <NAME>: OpsTarget<Op> = OpsTarget::new("<name>", "<what it drives>", run);`.
//!    A target whose input is more than a list of operations implements
//!    `registry::Target` and `trace::TraceBody` itself, as
//!    `concurrent_resize` does.
//! 2. One line in `src/targets/mod.rs`: `<name>::<NAME>,`.
//! 3. Its glue, the same three lines for every target:
//!    `fuzz/fuzz_targets/<name>.rs` with a `[[bin]]` in `fuzz/Cargo.toml`,
//!    `fuzz/afl/src/bin/<name>.rs` and `fuzz/honggfuzz/src/bin/<name>.rs`,
//!    each calling `idpool_harness::fuzz("<name>", data)`.
//! 4. Its generated files: `cargo run -p idpool-harness --bin seed-corpus -- <name>`
//!    and `cargo run -p idpool-harness --bin fuzz-dict -- fuzz/dict`.
//!
//! `cargo test` checks every step: the glue files and the manifest entry,
//! the dictionary, the corpus.
//!
//! (The layout above is being put in place: until it is, the modules
//! below still sit flat in `src/`.)

pub mod bits;
pub mod check;
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
