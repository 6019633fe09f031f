//! State feedback: rewards the fuzzer for reaching new *abstract states*,
//! not only new lines.
//!
//! Once the corpus covers every edge of the allocator, coverage-guided
//! fuzzers have nothing left to steer by, although most combinations of
//! capacity, fill level, pending resizes and thread phases have never been
//! seen. The runners therefore describe where they are after every step as
//! an [`AbstractState`] (a few small components, each bucketed so that the
//! space stays in the thousands) and call [`observe`]. `observe` hashes the
//! state to one of [`SLOTS`] distinct functions and calls it: every engine
//! that counts edges (libFuzzer's inline 8-bit counters, AFL++'s edge map,
//! honggfuzz's PC guards) then sees a new edge for a new state, and keeps
//! the input that reached it. No engine-specific API is involved.
//!
//! With the `state-feedback` feature off (`--no-default-features`), the
//! call does nothing but record, so the same seeds can be fuzzed with and
//! without the feedback and compared. At run time, `IDPOOL_STATE_FEEDBACK=0`
//! does the same in a binary built with it: `ci/campaign.sh` merges the
//! committed corpus that way, so that it keeps only inputs that add
//! coverage, and the state-rewarded ones stay in a local pool.
//!
//! The count of distinct states is computed offline and exactly:
//! [`record`] runs a closure with a recorder that keeps every state
//! observed, which is how `triage states` replays a corpus.
//!
//! # Determinism
//!
//! Observing changes nothing in the run: the same input is the same
//! execution and the same trace.

use std::cell::RefCell;
use std::collections::BTreeSet;

/// How many distinct feedback functions the states are hashed to.
///
/// More than a minute of most targets reaches, so that a new state mostly
/// gets a new slot and libFuzzer keeps the input that reached it (with
/// 1,024, a few thousand states mostly shared one). 1,024 were kept
/// before, when 16,384 once found a planted bug more slowly
/// (docs/results/2026-12-03-feedback-experiments.md); measured again with
/// the random tail on every target, over every planted bug and finding,
/// 3 seeds, and for the states: the rows of 2026-12-04 among the earlier
/// pages of docs/results/2026-12-04-detection.md and
/// docs/results/2026-12-04-state-feedback.md.
pub const SLOTS: usize = 16384;

/// An abstract state: components packed in mixed radix, each below its
/// declared number of classes, so two states are equal exactly when every
/// component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbstractState {
    packed: u64,
    radix: u64,
}

impl AbstractState {
    /// The state of nothing yet, for the target called `target` (so that
    /// two targets' states never coincide in a shared recording).
    pub fn new(target: &str) -> Self {
        // FNV-1a, folded to a byte: the name only has to tell the few
        // targets apart.
        let hash = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        AbstractState {
            packed: hash % 251,
            radix: 256,
        }
    }

    /// Adds a component that takes one of `classes` values; `value` is
    /// clamped to the last class.
    ///
    /// # Panics
    ///
    /// When `classes` is 0, or when the components no longer fit in 64 bits
    /// (a state is a handful of small components).
    pub fn with(self, value: u64, classes: u64) -> Self {
        assert!(classes > 0, "a component has at least one class");
        let radix = self
            .radix
            .checked_mul(classes)
            .expect("an abstract state's components fit in 64 bits");
        AbstractState {
            packed: self.packed + self.radix * value.min(classes - 1),
            radix,
        }
    }

    /// The packed value: equal for equal states.
    pub fn key(self) -> u64 {
        self.packed
    }
}

/// The number of classes [`capacity_class`] returns.
pub const CAPACITY_CLASSES: u64 = 12;

/// A pool's capacity, bucketed: 0 (no bitmap, or disabled), then one class
/// per power of two from 64 (inline) up to 2^14, then one for everything
/// larger (deep pools, the ceiling).
pub fn capacity_class(capacity: usize) -> u64 {
    match capacity {
        0 => 0,
        1..=64 => 1,
        _ => {
            // 65..=128 -> 2, 129..=256 -> 3, ...
            let log = usize::BITS - (capacity - 1).leading_zeros();
            u64::from(log - 5).min(CAPACITY_CLASSES - 1)
        }
    }
}

/// The number of classes [`fill_class`] returns.
pub const FILL_CLASSES: u64 = 7;

/// How full a pool is, bucketed around the shrink and grow thresholds:
/// empty; below a quarter; at a quarter up to a half; up to three
/// quarters; below full but for one; one free id left; full. A capacity of
/// 0 counts as empty.
pub fn fill_class(used: usize, capacity: usize) -> u64 {
    if used == 0 || capacity == 0 {
        0
    } else if used >= capacity {
        6
    } else if used + 1 == capacity {
        5
    } else if used * 4 < capacity {
        1
    } else if used * 2 < capacity {
        2
    } else if used * 4 < capacity * 3 {
        3
    } else {
        4
    }
}

thread_local! {
    static RECORDER: RefCell<Option<BTreeSet<u64>>> = const { RefCell::new(None) };
}

/// Tells the fuzzer (and the recorder, if one runs) that the run reached
/// `state`.
#[inline]
pub fn observe(state: AbstractState) {
    RECORDER.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.insert(state.key());
        }
    });
    #[cfg(feature = "state-feedback")]
    if enabled() {
        let slot = (mix(state.key()) % SLOTS as u64) as usize;
        slots::TABLE[slot]();
    }
}

/// Whether states reach the engine as edges: unless the environment says
/// `IDPOOL_STATE_FEEDBACK=0` (read once).
#[cfg(feature = "state-feedback")]
fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("IDPOOL_STATE_FEEDBACK").is_none_or(|v| v != "0"))
}

/// Runs `f` and returns its result with every state observed meanwhile on
/// this thread.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, BTreeSet<u64>) {
    let outer = RECORDER.with(|r| r.borrow_mut().replace(BTreeSet::new()));
    let result = f();
    let seen = RECORDER.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (result, seen.unwrap_or_default())
}

/// A 64-bit finaliser (splitmix64's), so that nearby states land on
/// unrelated slots.
#[cfg(feature = "state-feedback")]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// [`SLOTS`] distinct functions. Each is its own instance of a generic
/// function that cannot be inlined, so each has its own edge in every
/// engine's coverage map.
#[cfg(feature = "state-feedback")]
mod slots {
    #[inline(never)]
    fn slot<const N: usize>() {
        std::hint::black_box(N);
    }

    /// The 16 slots from `16 * $row`.
    macro_rules! row {
        ($row:expr) => {
            [
                slot::<{ $row * 16 }>,
                slot::<{ $row * 16 + 1 }>,
                slot::<{ $row * 16 + 2 }>,
                slot::<{ $row * 16 + 3 }>,
                slot::<{ $row * 16 + 4 }>,
                slot::<{ $row * 16 + 5 }>,
                slot::<{ $row * 16 + 6 }>,
                slot::<{ $row * 16 + 7 }>,
                slot::<{ $row * 16 + 8 }>,
                slot::<{ $row * 16 + 9 }>,
                slot::<{ $row * 16 + 10 }>,
                slot::<{ $row * 16 + 11 }>,
                slot::<{ $row * 16 + 12 }>,
                slot::<{ $row * 16 + 13 }>,
                slot::<{ $row * 16 + 14 }>,
                slot::<{ $row * 16 + 15 }>,
            ]
        };
    }

    /// The 256 slots from `256 * $block`: 16 rows.
    macro_rules! block {
        ($block:literal) => {
            [
                row!($block * 16),
                row!($block * 16 + 1),
                row!($block * 16 + 2),
                row!($block * 16 + 3),
                row!($block * 16 + 4),
                row!($block * 16 + 5),
                row!($block * 16 + 6),
                row!($block * 16 + 7),
                row!($block * 16 + 8),
                row!($block * 16 + 9),
                row!($block * 16 + 10),
                row!($block * 16 + 11),
                row!($block * 16 + 12),
                row!($block * 16 + 13),
                row!($block * 16 + 14),
                row!($block * 16 + 15),
            ]
        };
    }

    macro_rules! table {
        ($($block:literal)*) => {
            /// One function per slot.
            pub static TABLE: [fn(); super::SLOTS] = {
                let blocks: [[[fn(); 16]; 16]; super::SLOTS / 256] = [$(block!($block)),*];
                let mut table: [fn(); super::SLOTS] = [slot::<0>; super::SLOTS];
                let mut i = 0;
                while i < super::SLOTS {
                    table[i] = blocks[i / 256][i / 16 % 16][i % 16];
                    i += 1;
                }
                table
            };
        };
    }

    table!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
        16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
        48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_pack_without_collisions() {
        let mut keys = BTreeSet::new();
        for a in 0..5 {
            for b in 0..7 {
                for c in 0..3 {
                    keys.insert(
                        AbstractState::new("a")
                            .with(a, 5)
                            .with(b, 7)
                            .with(c, 3)
                            .key(),
                    );
                }
            }
        }
        assert_eq!(keys.len(), 5 * 7 * 3);
        // Out of range values are clamped to the last class.
        assert_eq!(
            AbstractState::new("a").with(99, 5).key(),
            AbstractState::new("a").with(4, 5).key()
        );
        assert_ne!(AbstractState::new("a").key(), AbstractState::new("b").key());
    }

    #[test]
    fn capacity_classes_follow_powers_of_two() {
        let cases = [
            (0, 0),
            (64, 1),
            (65, 2),
            (128, 2),
            (129, 3),
            (256, 3),
            (4096, 7),
            (1 << 14, 9),
            ((1 << 14) + 1, 10),
            (1 << 15, 10),
            (1 << 16, 11),
            (1 << 30, 11),
        ];
        for (capacity, class) in cases {
            assert_eq!(capacity_class(capacity), class, "capacity {capacity}");
        }
    }

    #[test]
    fn fill_classes_split_at_the_thresholds() {
        let cases = [
            (0, 128, 0),
            (31, 128, 1),
            (32, 128, 2),
            (63, 128, 2),
            (64, 128, 3),
            (95, 128, 3),
            (96, 128, 4),
            (126, 128, 4),
            (127, 128, 5),
            (128, 128, 6),
            (3, 0, 0),
        ];
        for (used, capacity, class) in cases {
            assert_eq!(fill_class(used, capacity), class, "{used} of {capacity}");
        }
    }

    /// Every slot is its own function: the table's flattening of blocks and
    /// rows reaches each of them once.
    #[cfg(feature = "state-feedback")]
    #[test]
    fn every_slot_is_a_distinct_function() {
        let distinct: BTreeSet<usize> = slots::TABLE.iter().map(|&f| f as usize).collect();
        assert_eq!(distinct.len(), SLOTS, "slots sharing a function");
    }

    #[test]
    fn record_sees_what_was_observed_and_nests() {
        let s1 = AbstractState::new("a").with(1, 2);
        let s2 = AbstractState::new("a").with(0, 2);
        let ((), outer) = record(|| {
            observe(s1);
            let ((), inner) = record(|| observe(s2));
            assert_eq!(inner.into_iter().collect::<Vec<_>>(), vec![s2.key()]);
            observe(s1);
        });
        assert_eq!(outer.into_iter().collect::<Vec<_>>(), vec![s1.key()]);
        // No recorder: observing is harmless.
        observe(s1);
    }
}
