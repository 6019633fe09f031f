//! A `concurrent_resize` program: the pool, its version, the setup and
//! each simulated thread's operations ([`Program`]), and how bytes decode
//! to it (the schedule's bytes follow).

use crate::check::{Op, OpKind};
use arbitrary::{Arbitrary, Unstructured};
use idpool::{AugmentedTree, DBitmap, FastPool, IdPool, NodeId, Shrinker, Version};

/// Nodes the threads share: few, so that two threads insert the same one.
pub const SHARED_NODES: u64 = 6;
/// Prefilled handles refer to nodes from here on, apart from the threads'.
pub(crate) const PREFILL_NODES: NodeId = 1 << 40;
/// Bulk inserts use private nodes from here on.
pub(crate) const FRESH_NODES: NodeId = 1 << 41;
/// The counts [`ThreadOp::InsertMany`] draws from: enough for another
/// thread to fill, grow past, or refill what a resize is about to cut.
pub const BULK_COUNTS: [u16; 7] = [8, 32, 33, 64, 65, 66, 128];

/// One operation of a simulated thread.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadOp {
    /// Insert a reference to a shared node.
    Insert {
        /// The node (among [`SHARED_NODES`]).
        #[arbitrary(with = |u: &mut Unstructured| u.int_in_range(0..=SHARED_NODES - 1))]
        node: NodeId,
        /// Whether the caller is the context manager.
        manager: bool,
    },
    /// Drop one reference this thread holds (the k-th, modulo how many).
    Release(u8),
    /// Drop the reference of a prefilled handle, the k-th highest (modulo
    /// how many; 0 is the highest): its last reference, the release that
    /// shrinks.
    ReleasePrefill(#[arbitrary(with = |u: &mut Unstructured| u.int_in_range(0..=3))] u8),
    /// Take one more reference on a handle this thread holds.
    Increment(u8),
    /// Insert this many private nodes, one operation each.
    InsertMany(
        #[arbitrary(with = |u: &mut Unstructured| Ok(BULK_COUNTS[u.int_in_range(0..=BULK_COUNTS.len() - 1)?]))]
         u16,
    ),
    /// The memory-pressure callback, one critical section: the shrinker
    /// reclaims (its allocations fail if the schedule says so); nothing for
    /// the other flavours.
    Reclaim,
    /// The process dies (`binder_deferred_release` marking it dead), one
    /// critical section: the Rust driver refuses new references from then
    /// on (`ESRCH`), the C driver does not look.
    Kill,
    /// Look a shared node up in `by_node`, one critical section.
    Lookup(#[arbitrary(with = |u: &mut Unstructured| u.int_in_range(0..=SHARED_NODES - 1))] NodeId),
    /// Corrupt the pool's bits behind the table's back, one critical
    /// section: planned in the allocator's fault plan
    /// ([`idpool::Faults::corrupt`]) and applied by the table as its
    /// section starts. The model resolves the id and tracks the bits from
    /// then on (see `corrupt.rs`); nothing happens when the pool keeps no
    /// bits or nothing matches.
    Corrupt(CorruptBit),
}

/// Which bit [`ThreadOp::Corrupt`] changes, resolved on the model's record
/// of the bits at that critical section.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CorruptBit {
    /// Clear the bit of a live handle: the k-th whose bit is set, lowest
    /// first (k modulo how many). The pool will offer its id again.
    Clear(u8),
    /// Set the bit of an id below the capacity that neither a handle nor
    /// a bit holds: the k-th, lowest first (k modulo how many, among the
    /// lowest 256). The pool will skip it for good.
    Set(u8),
    /// The same, highest first: a set bit that keeps the pool from
    /// shrinking.
    SetHigh(u8),
}

/// The kind of an insert, in signatures and the state feedback.
pub(super) const INSERT: OpKind = OpKind::new("Insert", 10);
/// The kind of a release, in signatures and the state feedback.
pub(super) const RELEASE: OpKind = OpKind::new("Release", 2);

/// The kinds of thread operations, under their names in signatures and
/// their feedback classes (those of `handle_table`'s kinds of the same
/// names).
impl Op for ThreadOp {
    fn kind(&self) -> OpKind {
        let (name, class) = match self {
            ThreadOp::Insert { .. } => return INSERT,
            ThreadOp::Release(_) => return RELEASE,
            ThreadOp::ReleasePrefill(_) => ("ReleasePrefill", 20),
            ThreadOp::Increment(_) => ("Increment", 11),
            ThreadOp::InsertMany(_) => ("InsertMany", 17),
            ThreadOp::Reclaim => ("Reclaim", 14),
            ThreadOp::Kill => ("Kill", 15),
            ThreadOp::Lookup(_) => ("Lookup", 13),
            ThreadOp::Corrupt(_) => ("Corrupt", 22),
        };
        OpKind::new(name, class)
    }
}

/// The flavour under test.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    /// The Rust driver's `IdPool`.
    IdPool,
    /// The C driver's `dbitmap`.
    DBitmap,
    /// The fast pool: `IdPool`'s policy with summary levels.
    FastPool,
    /// The augmented tree: no bitmap, never a resize.
    AugmentedTree,
    /// `IdPool` without the shrink on release; shrinks on `reclaim`.
    Shrinker,
}

impl Pool {
    /// The version of this pool's driver among `versions`: the designs
    /// follow the Rust driver (they run the Rust versions only, see
    /// [`idpool::Flavour::supports`]).
    pub fn version_of(self, versions: &crate::history::Versions) -> Version {
        match self {
            Pool::DBitmap => versions.c,
            Pool::IdPool | Pool::FastPool | Pool::AugmentedTree | Pool::Shrinker => versions.rust,
        }
    }

    /// Its name in traces: the flavour's own (`idpool`, `dbitmap`,
    /// `fastpool`, `augmented`, `shrinker`).
    pub fn name(self) -> &'static str {
        use idpool::Flavour;
        match self {
            Pool::IdPool => IdPool::NAME,
            Pool::DBitmap => DBitmap::NAME,
            Pool::FastPool => FastPool::NAME,
            Pool::AugmentedTree => AugmentedTree::NAME,
            Pool::Shrinker => Shrinker::NAME,
        }
    }

    /// The pool named `name` in a trace.
    pub fn from_name(name: &str) -> Option<Pool> {
        [
            Pool::IdPool,
            Pool::DBitmap,
            Pool::FastPool,
            Pool::AugmentedTree,
            Pool::Shrinker,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }
}

/// What the simulated threads run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// The flavour.
    pub pool: Pool,
    /// The upstream version the table follows, one of the pool's driver
    /// (see [`crate::history`]): decoded from the first byte, mainline for
    /// half of its values.
    pub version: Version,
    /// Handles `1..=prefill` are inserted before the threads start, so that
    /// the pool starts near a resize boundary.
    pub prefill: u32,
    /// Then all but the lowest `keep` are released again (highest first),
    /// leaving a large pool with few ids. `keep >= prefill` releases none.
    pub keep: u32,
    /// Each thread's operations, in program order.
    pub threads: Vec<Vec<ThreadOp>>,
}

impl<'a> Arbitrary<'a> for Program {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let versions = crate::history::Versions::arbitrary(u)?;
        let pool = Pool::arbitrary(u)?;
        let version = pool.version_of(&versions);
        let prefill = match u.int_in_range(0u8..=15)? {
            0..=11 => [0, 15, 16, 31, 32, 33, 62, 63, 63, 126, 127, 127, 128, 255]
                [u.int_in_range(0..=13)?],
            _ => u.int_in_range(0..=300)?,
        };
        // Keep the ids at a quarter of the capacity the prefill leads to
        // (a power of two from 64 holding ids 0 to `prefill`, the grow
        // policy for both maps: above 64 ids the release of the highest
        // then shrinks, and one insert in its window makes that shrink
        // stale; a pool of 64 never shrinks), just above it (the release
        // does not shrink), below it (the setup shrank already), or at a
        // few fixed levels; or release none.
        let capacity = (prefill as usize + 1)
            .next_power_of_two()
            .max(crate::oracle::MIN);
        let quarter = (capacity / 4) as u32;
        let keep = match u.int_in_range(0u8..=3)? {
            0 => quarter,
            1 => [quarter + 1, quarter - 1, 1, 16, 32, 64][u.int_in_range(0..=5)?],
            _ => prefill,
        };
        let n = match u.int_in_range(0u8..=3)? {
            0..=1 => 2,
            n => n + 1,
        };
        let threads = (0..n)
            .map(|_| {
                let len = u.int_in_range(1..=6)?;
                (0..len).map(|_| ThreadOp::arbitrary(u)).collect()
            })
            .collect::<arbitrary::Result<_>>()?;
        Ok(Program {
            pool,
            version,
            prefill,
            keep,
            threads,
        })
    }
}

/// Decodes a program and the schedule bytes that follow it.
pub fn decode(data: &[u8]) -> Option<(Program, Unstructured<'_>)> {
    let mut u = Unstructured::new(data);
    let program = Program::arbitrary(&mut u).ok()?;
    Some((program, u))
}
