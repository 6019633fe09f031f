//! The differential harness shared by every fuzz engine, the triage tool and
//! the tests.
//!
//! Bytes become a list of operations (through [`arbitrary`]); the runners
//! apply each operation to the allocator and to a naive model, and panic at
//! the first divergence or broken invariant with the step, the operation,
//! what was expected and what happened. The models never call the
//! allocator: they are a `BTreeSet`/`BTreeMap` of live ids, the plain gap
//! scan, and SPEC.md's capacity formulas ([`oracle`]).
//!
//! One function per fuzz target: [`pool_ops`], [`dbitmap_ops`],
//! [`handle_table`], [`concurrent_resize`]. A fuzz target calls one of them
//! and does nothing else.

pub mod check;
pub mod domain;
pub mod oracle;
pub mod pool;
pub mod sched;
pub mod seeds;
pub mod table;
pub mod trace;

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

/// The fuzz targets, by name.
pub const TARGETS: [&str; 4] = [
    "pool_ops",
    "dbitmap_ops",
    "handle_table",
    "concurrent_resize",
];

/// Runs target `name` on `data`; `None` for an unknown target.
pub fn run_target(name: &str, data: &[u8]) -> Option<Events> {
    Some(match name {
        "pool_ops" => pool_ops(data),
        "dbitmap_ops" => dbitmap_ops(data),
        "handle_table" => handle_table(data),
        "concurrent_resize" => concurrent_resize(data),
        _ => return None,
    })
}

/// Target `pool_ops`: the Rust `IdPool` against the model.
pub fn pool_ops(data: &[u8]) -> Events {
    pool::run::<idpool::IdPool>(oracle::Policy::Rust, &decode(data))
}

/// Target `dbitmap_ops`: the C `dbitmap` against the model.
pub fn dbitmap_ops(data: &[u8]) -> Events {
    pool::run::<idpool::DBitmap>(oracle::Policy::C, &decode(data))
}

/// Target `handle_table`: the three table flavours side by side.
pub fn handle_table(data: &[u8]) -> Events {
    table::run(&decode(data))
}

/// Target `concurrent_resize`: 2 to 4 simulated threads whose steps are
/// interleaved as the bytes say (see [`sched`]).
pub fn concurrent_resize(data: &[u8]) -> Events {
    sched_events(&sched::concurrent_resize(data))
}

/// A concurrent run's outcome as [`Events`].
pub fn sched_events(out: &sched::Outcome) -> Events {
    Events {
        grow_committed: out.grows,
        shrink_committed: out.shrinks,
        alloc_failed: out.failed_allocs,
        interleaved: out.interleaved,
        ..Events::default()
    }
}
