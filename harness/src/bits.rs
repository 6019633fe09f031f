//! The pool against the model, read one id at a time.
//!
//! A table's own invariant check ([`idpool::NodeRefs::check_invariants`])
//! compares the pool with `by_handle` through the pool's `used_ids`, which
//! walks the words with the same scan that `next_zero_bit` uses: a bug in
//! that scan can hide from both. So the harness also reads the pool itself,
//! through the narrowest public read each allocator has (`is_used`,
//! `test_bit`, `contains`), one id at a time, and compares every bit with
//! the model's idea of it ([`Expected`]): for `handle_table`, the table
//! model's own record of the pool's bits, which knows the version's
//! reserved bit 0 and the corruptions injected
//! (`TableModel::compare_bits` in `handle_table`); for
//! `concurrent_resize`, the live handles and the version's reserved bit 0
//! ([`handles_of`]), or once a corruption changed a bit, the scheduler's
//! record of the bits (`sched::corrupt`).
//!
//! Which ids: every id a step touched, the boundaries (0, 1, the last id of
//! the capacity and the one past it, the highest live handle and the one
//! past it), and every id up to the capacity when the runner does its full
//! check (small tables, commits, the end of a run): see [`Probe`].

use crate::history;
use crate::idset::IdSet;
use idpool::{AugmentedTree, DBitmap, FastPool, IdPool, LinearScan, Shrinker, Version};
use std::ops::{ControlFlow, Range};

/// The narrowest public read of a pool's record of used ids.
pub trait PoolBits {
    /// Whether `id` is marked used; `None` when the allocator keeps no
    /// record (the linear scan, a disabled dbitmap).
    fn bit(&self, id: usize) -> Option<bool>;
}

impl PoolBits for IdPool {
    fn bit(&self, id: usize) -> Option<bool> {
        Some(self.is_used(id))
    }
}

impl PoolBits for DBitmap {
    fn bit(&self, id: usize) -> Option<bool> {
        self.enabled().then(|| self.test_bit(id))
    }
}

/// The legacy scan keeps no record of its own: it searches `by_handle`.
impl PoolBits for LinearScan {
    fn bit(&self, _: usize) -> Option<bool> {
        None
    }
}

impl PoolBits for FastPool {
    fn bit(&self, id: usize) -> Option<bool> {
        Some(self.is_used(id))
    }
}

impl PoolBits for Shrinker {
    fn bit(&self, id: usize) -> Option<bool> {
        Some(self.is_used(id))
    }
}

/// The tree has no bits, but its own record of the ids it holds
/// (`contains`), read one id at a time like a bit: the model expects it to
/// be exactly the live handles (corruption of a pool does not reach it).
impl PoolBits for AugmentedTree {
    fn bit(&self, id: usize) -> Option<bool> {
        Some(u32::try_from(id).is_ok_and(|id| self.contains(id)))
    }
}

/// The ids one comparison reads.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Ids to read besides those below `all_below`, in any order, repeats
    /// allowed: [`Probe::runs`] sorts them once (a set kept sorted cost a
    /// tenth of `handle_table` on the bulk ops' touched ids).
    ids: Vec<usize>,
    all_below: usize,
}

impl Probe {
    /// The boundaries of a pool of `capacity` ids whose live ids are
    /// `live`'s members: 0, 1, the last id and the one past it, the highest
    /// live id and the one past it.
    pub fn boundaries(capacity: usize, live: &impl Record) -> Self {
        let mut probe = Probe::default();
        probe
            .ids
            .extend([0, 1, capacity, capacity.saturating_sub(1)]);
        if let Some(h) = live.last() {
            probe.ids.extend([h, h + 1]);
        }
        probe
    }

    /// Also `id`, one a step touched.
    pub fn touch(&mut self, id: u32) -> &mut Self {
        // An id below `all_below` is read with the range already.
        if id as usize >= self.all_below {
            self.ids.push(id as usize);
        }
        self
    }

    /// Also every id below the capacity and every live id (`live`'s
    /// members): the full comparison.
    pub fn everything(&mut self, capacity: usize, live: &impl Record) -> &mut Self {
        self.all_below = self.all_below.max(capacity + 1);
        // The live ids below `all_below` are read with the range already:
        // only those above it need a place in the set.
        self.ids.extend(live.members_from(self.all_below));
        self
    }

    /// Every id below `capacity` (and one past it) and every live id.
    pub fn everything_of(capacity: usize, live: &impl Record) -> Self {
        let mut probe = Probe::boundaries(capacity, live);
        probe.everything(capacity, live);
        probe
    }

    /// The ids to read, ascending, as runs: every id below `all_below`,
    /// then each other id alone.
    fn runs(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut above: Vec<usize> = self
            .ids
            .iter()
            .copied()
            .filter(|&id| id >= self.all_below)
            .collect();
        above.sort_unstable();
        above.dedup();
        let below = (self.all_below > 0).then_some(0..self.all_below);
        below
            .into_iter()
            .chain(above.into_iter().map(|id| id..id + 1))
    }
}

/// An id whose bit differs from the model's: (id, expected, actual).
pub type BitDiff = (usize, bool, bool);

/// The model's record of the ids it expects set: walked in order beside a
/// range of ids ([`compare_words`]), asked per id for the ids read alone.
/// Both answers must agree.
pub trait Record {
    /// Whether `id` is in the record.
    fn contains(&self, id: usize) -> bool;
    /// The ids in the record, ascending.
    fn members(&self) -> impl Iterator<Item = usize> + '_;
    /// The ids in the record at or above `from`, ascending.
    fn members_from(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        self.members().skip_while(move |&id| id < from)
    }
    /// The highest id in the record.
    fn last(&self) -> Option<usize>;
}

impl Record for IdSet {
    fn contains(&self, id: usize) -> bool {
        IdSet::contains(self, id)
    }
    fn members(&self) -> impl Iterator<Item = usize> + '_ {
        self.iter()
    }
    fn last(&self) -> Option<usize> {
        IdSet::last(self)
    }
}

/// The model's idea of the pool's bits: set exactly at the ids of its
/// record, clear everywhere else, except bit 0 where `zero` says
/// otherwise. An id above `u32::MAX` is never a handle: expected clear.
///
/// [`compare`] walks the record once beside a range of ids, so an id in a
/// gap between two members costs one read of the pool and nothing of the
/// model (asking the model once per id was a quarter of `handle_table`'s
/// time from an empty corpus, where tables started from high handles have
/// long empty stretches); the few ids read alone are asked of it, where
/// walking to them cost a step per member of a table of thousands.
#[derive(Clone, Copy, Debug)]
pub struct Expected<'a, R: Record> {
    record: &'a R,
    zero: Zero,
}

/// What the model expects of bit 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zero {
    /// What the record says, like any other id.
    AsRecorded,
    /// Set, whatever the record says (a reserved bit that stays set).
    Set,
    /// Not compared: the model cannot say.
    Unknown,
}

impl<'a, R: Record> Expected<'a, R> {
    /// Set exactly at `record`'s ids.
    pub fn exactly(record: &'a R) -> Self {
        Expected {
            record,
            zero: Zero::AsRecorded,
        }
    }

    /// The same record, with bit 0 read as `zero` says.
    pub fn with_zero(self, zero: Zero) -> Self {
        Expected { zero, ..self }
    }
}

/// The pool/`by_handle` disagreement a table's invariant check must
/// report when the pool's bits are `bits` and the live handles are
/// `handles`' members: (set in the pool only, in `by_handle` only), bit 0
/// left out where `zero_reserved` (the reserved bit is no handle); `None`
/// when they agree. Shared by `handle_table`'s model and the scheduler's
/// corruption record.
pub fn disagreement(
    bits: &IdSet,
    handles: &impl Record,
    zero_reserved: bool,
) -> Option<(Vec<u32>, Vec<u32>)> {
    let compared = |id: usize| !(zero_reserved && id == 0);
    let only_in_pool: Vec<u32> = (bits.iter())
        .filter(|&id| compared(id) && !handles.contains(id))
        .map(|id| id as u32)
        .collect();
    let only_in_tree: Vec<u32> = (handles.members())
        .filter(|&id| compared(id) && !bits.contains(id))
        .map(|id| id as u32)
        .collect();
    (!only_in_pool.is_empty() || !only_in_tree.is_empty()).then_some((only_in_pool, only_in_tree))
}

/// What `concurrent_resize`'s model expects of the bits of a table of
/// `version`: the live handles, and bit 0 where the version reserves it
/// for the context manager. A version that reserves it and clears it when
/// descriptor 0 is released (the C v3 posting, [`history::rules`]) has a
/// bit 0 that depends on the history of descriptor 0, which this model
/// does not keep: bit 0 is not compared there.
pub fn handles_of<R: Record>(handles: &R, version: Version) -> Expected<'_, R> {
    let rules = history::rules(version);
    let zero = match (rules.bit_zero_reserved, rules.bit_zero_kept_on_release) {
        (true, true) => Zero::Set,
        (true, false) => Zero::Unknown,
        (false, _) => Zero::AsRecorded,
    };
    Expected::exactly(handles).with_zero(zero)
}

/// Compares the bits `probe` names with the model's expectation: up to
/// six differences, or `Ok` (also when the pool keeps no record).
///
/// The probe's ids are read ascending: bit 0 alone (its expectation
/// follows [`Zero`]), the rest of the range below `all_below` a word of
/// ids at a time beside the record's members ([`compare_words`]), then
/// each other id alone, its expectation asked of the record.
pub fn compare<P: PoolBits + ?Sized, R: Record>(
    pool: &P,
    expected: Expected<'_, R>,
    probe: &Probe,
) -> Result<(), Vec<BitDiff>> {
    let Expected { record, zero } = expected;
    let mut diff = Vec::new();
    // Reads `id` alone; `Break` when the pool keeps no record or six
    // differences are in. The pool is asked before the expectation, also
    // for a bit 0 whose value is unknown: its `None` is what says there is
    // no record.
    let read = |diff: &mut Vec<BitDiff>, id: usize| -> ControlFlow<()> {
        let Some(actual) = pool.bit(id) else {
            diff.clear();
            return ControlFlow::Break(());
        };
        let want = match (id, zero) {
            (0, Zero::Set) => true,
            (0, Zero::Unknown) => return ControlFlow::Continue(()),
            _ => record.contains(id),
        };
        if actual != want {
            diff.push((id, want, actual));
            if diff.len() == 6 {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    };
    let mut runs = probe.runs().peekable();
    if let Some(all) = runs.next_if(|run| run.start == 0 && run.len() > 1) {
        // A pool without a record answers `None` for every id: bit 0 says.
        if read(&mut diff, 0).is_break() {
            return diff_or_ok(diff);
        }
        let bit = |id| pool.bit(id) == Some(true);
        compare_words(
            1..all.end,
            member_words(record.members()),
            |base, n| word(base, n, bit),
            &mut diff,
            6,
        );
    }
    if diff.len() < 6 {
        let _ = runs.flatten().try_for_each(|id| read(&mut diff, id));
    }
    diff_or_ok(diff)
}

/// `Ok` when `diff` is empty.
fn diff_or_ok(diff: Vec<BitDiff>) -> Result<(), Vec<BitDiff>> {
    if diff.is_empty() {
        Ok(())
    } else {
        Err(diff)
    }
}

/// The ids `base..base + n` (`n <= 64`), each read alone with `is_used`,
/// as a word: bit `i` is id `base + i`.
#[inline]
pub fn word(base: usize, n: usize, is_used: impl Fn(usize) -> bool) -> u64 {
    debug_assert!(n <= 64, "a word holds 64 ids, not {n}");
    (0..n).fold(0, |word, i| word | u64::from(is_used(base + i)) << i)
}

/// Where two words of the same ids (bit `i` for id `base + i`) first
/// differ: the id, and its bit in `a` and in `b`; `None` when they agree.
/// How a flavour that runs two implementations reports the first id they
/// read differently (`PoolApi::bits`).
pub fn first_difference(base: usize, a: u64, b: u64) -> Option<(usize, bool, bool)> {
    let differ = a ^ b;
    (differ != 0).then(|| {
        let i = differ.trailing_zeros();
        (base + i as usize, a >> i & 1 == 1, b >> i & 1 == 1)
    })
}

/// Reads the ids of `ids` a word at a time, `read(base, n)` answering the
/// bits of ids `base..base + n` (`n <= 64`, bit `i` for id `base + i`),
/// and compares each word with `want(base, n)`, the expected bits of the
/// same ids (a model's [`IdSet::word`], or [`member_words`] of a record).
/// Pushes the differing `(id, expected, actual)` onto `diff`, ascending,
/// and reads no further word once `diff` holds `limit`. The words are asked
/// for in ascending order.
///
/// The word at a time is the comparison's, not the pool's: a pool's
/// `read` may still ask each id alone (see `PoolApi::bits`).
pub fn compare_words(
    ids: Range<usize>,
    mut want: impl FnMut(usize, usize) -> u64,
    mut read: impl FnMut(usize, usize) -> u64,
    diff: &mut Vec<BitDiff>,
    limit: usize,
) {
    let mut base = ids.start;
    while base < ids.end && diff.len() < limit {
        let n = (ids.end - base).min(64);
        let want = want(base, n);
        let got = read(base, n);
        let mut differ = want ^ got;
        while differ != 0 && diff.len() < limit {
            let i = differ.trailing_zeros() as usize;
            diff.push((base + i, want >> i & 1 == 1, got >> i & 1 == 1));
            differ &= differ - 1;
        }
        base += n;
    }
}

/// The expected words of [`compare_words`] made from `members` (strictly
/// ascending): asked for ascending, non-overlapping ranges, each answers
/// the members in `base..base + n` as bits; members below `base` are
/// passed over.
pub fn member_words(members: impl Iterator<Item = usize>) -> impl FnMut(usize, usize) -> u64 {
    let mut members = members.peekable();
    move |base, n| {
        let mut want = 0u64;
        while let Some(member) = members.next_if(|&m| m < base + n) {
            if member >= base {
                want |= 1 << (member - base);
            }
        }
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A record held as a set of handles, as a test writes it.
    impl Record for BTreeSet<u32> {
        fn contains(&self, id: usize) -> bool {
            u32::try_from(id).is_ok_and(|id| BTreeSet::contains(self, &id))
        }
        fn members(&self) -> impl Iterator<Item = usize> + '_ {
            self.iter().map(|&id| id as usize)
        }
        fn last(&self) -> Option<usize> {
            self.iter().next_back().map(|&id| id as usize)
        }
    }

    /// A pool that is a set of ids, for reading [`compare`] against.
    struct SetPool(BTreeSet<usize>);

    impl PoolBits for SetPool {
        fn bit(&self, id: usize) -> Option<bool> {
            Some(self.0.contains(&id))
        }
    }

    /// What [`compare`] must answer, stated per id: every id of the probe
    /// in ascending order, its expected bit looked up in the record.
    fn naive(pool: &SetPool, record: &BTreeSet<u32>, zero: Zero, ids: &[usize]) -> Vec<BitDiff> {
        let mut diff = Vec::new();
        for &id in ids {
            let want = match (id, zero) {
                (0, Zero::Set) => true,
                (0, Zero::Unknown) => continue,
                _ => u32::try_from(id).is_ok_and(|id| record.contains(&id)),
            };
            let actual = pool.0.contains(&id);
            if actual != want {
                diff.push((id, want, actual));
            }
        }
        diff.truncate(6);
        diff
    }

    /// The walk beside the record's members finds exactly the differences
    /// a per-id lookup finds, over the ids a probe names (stated here
    /// apart from [`Probe::runs`]: every id below the range's end, then the
    /// others once each, ascending): members at the edges of the range,
    /// beyond it, ids touched out of order and twice, bit 0 forced or
    /// skipped, an id above `u32::MAX`.
    #[test]
    fn compare_agrees_with_a_lookup_per_id() {
        let record: BTreeSet<u32> = [0, 1, 5, 63, 64, 100, 1000].into();
        let pools: [&[usize]; 4] = [
            &[0, 1, 5, 63, 64, 100, 1000],
            &[1, 5, 6, 63, 101, 1000, 1 << 33],
            &[],
            &[0, 2, 3, 4, 7, 8, 9, 10, 11, 12, 64],
        ];
        let touched = [1000, 3, 1 << 33, 64, 1001, 100, 3, 1000];
        for ids in pools {
            let pool = SetPool(ids.iter().copied().collect());
            for below in [0, 1, 5, 6, 64, 65, 101] {
                for zero in [Zero::AsRecorded, Zero::Set, Zero::Unknown] {
                    let mut probe = Probe::default();
                    if below > 0 {
                        probe.everything(below - 1, &IdSet::new());
                    }
                    probe.ids.extend(touched);
                    let above: BTreeSet<usize> =
                        touched.into_iter().filter(|&id| id >= below).collect();
                    let read: Vec<usize> = (0..below).chain(above).collect();
                    let expected = Expected::exactly(&record).with_zero(zero);
                    let got = compare(&pool, expected, &probe).err().unwrap_or_default();
                    assert_eq!(
                        got,
                        naive(&pool, &record, zero, &read),
                        "pool {ids:?}, ids below {below}, bit 0 {zero:?}"
                    );
                }
            }
        }
    }

    /// A word at a time finds exactly the differences a read per id finds,
    /// in order and up to the limit, over ranges that end inside a word,
    /// members below, inside and past the range, and with every id read
    /// once through the reader.
    #[test]
    fn compare_words_agrees_with_a_read_per_id() {
        let members: BTreeSet<usize> = [0, 1, 63, 64, 100, 127, 128, 200, 1000].into();
        let pools: [&[usize]; 4] = [
            &[0, 1, 63, 64, 100, 127, 128, 200, 1000],
            &[1, 2, 63, 65, 100, 129, 199, 200],
            &[],
            &[0, 3, 4, 5, 6, 7, 8, 9, 10, 64, 128],
        ];
        for ids in pools {
            let pool: BTreeSet<usize> = ids.iter().copied().collect();
            for end in [0, 1, 63, 64, 65, 129, 201, 1001] {
                for limit in [1, 6, 100] {
                    let naive: Vec<BitDiff> = (0..end)
                        .filter_map(|id| {
                            let (want, got) = (members.contains(&id), pool.contains(&id));
                            (want != got).then_some((id, want, got))
                        })
                        .take(limit)
                        .collect();
                    let mut diff = Vec::new();
                    let mut read = Vec::new();
                    compare_words(
                        0..end,
                        member_words(members.iter().copied()),
                        |base, n| {
                            read.extend(base..base + n);
                            word(base, n, |id| pool.contains(&id))
                        },
                        &mut diff,
                        limit,
                    );
                    assert_eq!(diff, naive, "pool {ids:?}, ids below {end}, limit {limit}");
                    if diff.len() < limit {
                        assert_eq!(read, (0..end).collect::<Vec<_>>(), "every id read once");
                    }
                }
            }
        }
    }

    /// The first differing id of two words, with each side's bit, at the
    /// lowest and highest bit; nothing for equal words.
    #[test]
    fn first_difference_names_the_lowest_differing_id() {
        assert_eq!(first_difference(100, 0b1010, 0b1010), None);
        assert_eq!(
            first_difference(100, 0b1000, 0b1110),
            Some((101, false, true))
        );
        assert_eq!(first_difference(0, 1 << 63, 0), Some((63, true, false)));
        assert_eq!(first_difference(64, u64::MAX, 0), Some((64, true, false)));
    }

    /// A pool that keeps no record is not compared, whatever the model
    /// expects and whatever bit 0's rule (with an unknown bit 0 the pool
    /// is still asked for it: its `None` is what says so).
    #[test]
    fn a_pool_without_a_record_is_not_compared() {
        struct NoRecord;
        impl PoolBits for NoRecord {
            fn bit(&self, _: usize) -> Option<bool> {
                None
            }
        }
        let mut probe = Probe::default();
        probe.everything(64, &IdSet::new());
        let record: BTreeSet<u32> = [1, 2, 3].into();
        for zero in [Zero::AsRecorded, Zero::Set, Zero::Unknown] {
            let expected = Expected::exactly(&record).with_zero(zero);
            assert_eq!(
                compare(&NoRecord, expected, &probe),
                Ok(()),
                "bit 0 {zero:?}"
            );
        }
    }
}
