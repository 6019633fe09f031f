//! The capacity formulas of `docs/spec.md`, written out plainly. The models of both
//! levels compute capacities with these and nothing else; none of them calls
//! the allocator.
//!
//! # Stated another way
//!
//! A rule written the same way here and in the allocator would let a
//! misreading pass twice, so each rule is stated differently where it can
//! be, and pinned to a table of cases worked out by hand from the spec (the
//! tests below):
//!
//! - the Rust grow is refused from the spec's ceiling, 2^30 ids, not from
//!   the allocator's `checked_mul(2)` and `MAX_LEN` comparison;
//! - the C grow wraps modulo 2^32, not by an `unsigned int` shift;
//! - a shrink is allowed when the live ids fit in the capacity four times
//!   over (`4 * (last + 1) <= cap`), not by comparing the last id with
//!   `cap / 4`; the two agree for every capacity, powers of two or not
//!   (`last + 1 <= floor(cap / 4)` exactly when `4 * (last + 1) <= cap`,
//!   `last + 1` being an integer).
//!
//! What cannot be stated another way: "a pool of 64 ids or fewer never
//! shrinks", "an empty pool shrinks to 64" and the targets themselves
//! (half the capacity, at least 64 for Rust) are single constants or
//! one division; the commit rules (`PoolModel::commit` in `pool_ops`:
//! a grow takes a larger resizer, a Rust shrink takes a resizer at least
//! as large as the recomputed target, a C shrink one exactly equal to it)
//! are single comparisons. Those are pinned to the cases below and to the
//! upstream functions they come from (`IdPool::grow`/`shrink` in
//! rust/kernel/id_pool.rs, `dbitmap_grow`/`dbitmap_shrink` in
//! drivers/android/dbitmap.h), and the planted-bug specs
//! (ci/mutants/*.mutant) check that a change to any of them is caught.

/// The smallest capacity of either pool.
pub const MIN: usize = 64;
/// The longest bitmap.
pub const MAX_LEN: usize = i32::MAX as usize;
/// The spec's ceiling: a Rust pool of this many ids or more cannot grow.
pub const CEILING: usize = 1 << 30;

/// Which driver's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The Rust `IdPool`.
    Rust,
    /// The C `dbitmap`.
    C,
}

/// The size a grow asks for, or `None` when the pool cannot grow.
pub fn grow_target(policy: Policy, cap: usize) -> Option<usize> {
    match policy {
        Policy::Rust => (cap < CEILING).then_some(cap * 2),
        // `nbits << 1` on an unsigned int: the top bit falls off.
        Policy::C => Some((cap * 2) % (1 << 32)),
    }
}

/// The size a shrink asks for, given the highest live id, or `None`.
pub fn shrink_target(policy: Policy, cap: usize, last: Option<usize>) -> Option<usize> {
    if cap <= MIN {
        return None;
    }
    match last {
        None => Some(MIN),
        Some(last) if 4 * (last + 1) <= cap => Some(match policy {
            Policy::Rust => (cap / 2).max(MIN),
            Policy::C => cap / 2,
        }),
        Some(_) => None,
    }
}

/// Whether allocating a bitmap of `len` bits succeeds when `fail` is injected.
pub fn alloc_ok(policy: Policy, len: usize, fail: bool) -> bool {
    match policy {
        // An inline bitmap (64 bits or fewer) needs no memory.
        Policy::Rust => len <= MIN || (!fail && len <= MAX_LEN),
        // C's bitmap_zalloc always allocates.
        Policy::C => !fail && len <= MAX_LEN,
    }
}

/// What the C driver's grow commit does to the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CGrow {
    /// The map stays as it is and the new one is freed.
    Keep,
    /// The new, larger map replaces it, with every bit copied.
    Install,
    /// The map is freed for good: the driver scans linearly from now on.
    Disable,
}

/// Mainline `dbitmap_grow`'s outcome, as a decision table over the three
/// facts it reads: whether the map is disabled (`cap == 0`), whether the
/// grow is stale (`len <= cap`: someone grew it while the lock was
/// dropped), and whether the allocation failed (NULL).
///
/// `docs/spec.md`, "grow commit, in this order": staleness and disablement are
/// looked at before the allocation, so a failed allocation disables the
/// map only for a grow that is still needed ("we only disable the dbitmap
/// when it's necessary", says the upstream comment). Every row is written
/// out; none is derived from another.
pub fn c_grow_commit(cap: usize, len: usize, alloc_failed: bool) -> CGrow {
    let disabled = cap == 0;
    let stale = len <= cap;
    //   disabled, stale, failed  => outcome
    const TABLE: [((bool, bool, bool), CGrow); 8] = [
        ((true, true, true), CGrow::Keep),
        ((true, true, false), CGrow::Keep),
        ((true, false, true), CGrow::Keep),
        ((true, false, false), CGrow::Keep),
        ((false, true, true), CGrow::Keep),
        ((false, true, false), CGrow::Keep),
        ((false, false, true), CGrow::Disable),
        ((false, false, false), CGrow::Install),
    ];
    TABLE
        .iter()
        .find(|(key, _)| *key == (disabled, stale, alloc_failed))
        .map(|&(_, outcome)| outcome)
        .expect("the table has every row")
}

#[cfg(test)]
mod tests {
    use super::*;
    use Policy::{Rust, C};

    /// Upstream `dbitmap_grow` (drivers/android/dbitmap.h, mainline): the
    /// cases `docs/spec.md` spells out, one per row that matters.
    #[test]
    fn upstream_dbitmap_grow_checks_stale_or_disabled_before_null() {
        // A failed allocation for a grow someone else already did: keep.
        assert_eq!(c_grow_commit(256, 128, true), CGrow::Keep);
        assert_eq!(c_grow_commit(128, 128, true), CGrow::Keep);
        // A failed allocation for a grow still needed: disable.
        assert_eq!(c_grow_commit(64, 128, true), CGrow::Disable);
        // A disabled map stays disabled, whatever the allocation did.
        assert_eq!(c_grow_commit(0, 128, true), CGrow::Keep);
        assert_eq!(c_grow_commit(0, 128, false), CGrow::Keep);
        // A grow of a disabled map asks for 0 bits (0 << 1): still nothing.
        assert_eq!(c_grow_commit(0, 0, false), CGrow::Keep);
        // A successful grow: installed when larger, else freed.
        assert_eq!(c_grow_commit(64, 128, false), CGrow::Install);
        assert_eq!(c_grow_commit(256, 128, false), CGrow::Keep);
    }

    /// Grow targets worked out by hand from `docs/spec.md`.
    #[test]
    fn grow_targets_from_a_table_of_cases() {
        let cases = [
            (Rust, 64, Some(128)),
            (Rust, 65, Some(130)),
            (Rust, (1 << 30) - 1, Some((1 << 31) - 2)),
            (Rust, 1 << 30, None),
            (Rust, (1 << 30) + 1, None),
            (C, 64, Some(128)),
            (C, 1 << 30, Some(1 << 31)),
            (C, 1 << 31, Some(0)),
            (C, 0, Some(0)),
        ];
        for (policy, cap, expected) in cases {
            assert_eq!(grow_target(policy, cap), expected, "{policy:?} {cap}");
        }
    }

    /// Shrink targets worked out by hand from `docs/spec.md`: (policy, capacity,
    /// highest live id, target).
    #[test]
    fn shrink_targets_from_a_table_of_cases() {
        let cases = [
            (Rust, 64, None, None),
            (Rust, 65, None, Some(64)),
            (Rust, 128, None, Some(64)),
            (Rust, 128, Some(31), Some(64)),
            (Rust, 128, Some(32), None),
            (Rust, 129, Some(31), Some(64)),
            (Rust, 129, Some(32), None),
            (Rust, 130, Some(31), Some(65)),
            (Rust, 256, Some(63), Some(128)),
            (Rust, 256, Some(64), None),
            (Rust, 1 << 20, Some((1 << 18) - 1), Some(1 << 19)),
            (C, 64, None, None),
            (C, 128, None, Some(64)),
            (C, 128, Some(31), Some(64)),
            (C, 128, Some(32), None),
            (C, 256, Some(0), Some(128)),
            (C, 256, Some(64), None),
        ];
        for (policy, cap, last, expected) in cases {
            assert_eq!(
                shrink_target(policy, cap, last),
                expected,
                "{policy:?} cap {cap} last {last:?}"
            );
        }
    }

    #[test]
    fn allocation_outcomes_from_a_table_of_cases() {
        assert!(alloc_ok(Rust, 64, true), "inline: no memory needed");
        assert!(!alloc_ok(Rust, 65, true));
        assert!(alloc_ok(Rust, MAX_LEN, false));
        assert!(!alloc_ok(Rust, MAX_LEN + 1, false));
        assert!(!alloc_ok(C, 64, true), "bitmap_zalloc always allocates");
        assert!(alloc_ok(C, 1 << 20, false));
    }
}
