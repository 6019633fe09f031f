//! The pool models' record of live ids: a plain set of bits.
//!
//! A `BTreeSet<usize>` was the record until its inserts, removals and
//! range walks were a fifth of `pool_ops`'s time on deep pools. A bit per
//! id is as naive a record and costs a word operation. The searches on it
//! stay per id ([`IdSet::smallest_absent`] tries one id after the other),
//! so the model still states the allocator's rules another way than the
//! allocator's word scans do.

use core::cell::Cell;
use core::fmt;

const BITS: usize = u64::BITS as usize;

/// A set of ids, a bit per id up to the highest ever inserted.
///
/// # Invariants
///
/// - `len` is the number of set bits of `words`.
/// - Every member is below `top`: `last` scans down from there and lowers
///   it to one past the member it finds.
#[derive(Clone, Default)]
pub struct IdSet {
    words: Vec<u64>,
    len: usize,
    top: Cell<usize>,
}

impl IdSet {
    /// An empty set.
    pub fn new() -> Self {
        IdSet::default()
    }

    /// Whether `id` is a member.
    #[inline]
    pub fn contains(&self, id: usize) -> bool {
        self.words
            .get(id / BITS)
            .is_some_and(|w| w >> (id % BITS) & 1 == 1)
    }

    /// Adds `id`; `false` when it was a member already.
    pub fn insert(&mut self, id: usize) -> bool {
        if self.contains(id) {
            return false;
        }
        if self.words.len() <= id / BITS {
            self.words.resize(id / BITS + 1, 0);
        }
        self.words[id / BITS] |= 1 << (id % BITS);
        self.len += 1;
        // INVARIANT: the new member is below the new `top`.
        self.top.set(self.top.get().max(id + 1));
        true
    }

    /// Removes `id`; `false` when it was no member.
    pub fn remove(&mut self, id: usize) -> bool {
        if !self.contains(id) {
            return false;
        }
        self.words[id / BITS] &= !(1 << (id % BITS));
        self.len -= 1;
        true
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        self.words.clear();
        self.len = 0;
        self.top.set(0);
    }

    /// The highest member.
    pub fn last(&self) -> Option<usize> {
        if self.len == 0 {
            self.top.set(0);
            return None;
        }
        let mut id = self.top.get();
        while id > 0 && !self.contains(id - 1) {
            id -= 1;
            // A word without members is passed over whole.
            if id % BITS == 0 {
                while id > 0 && self.words[id / BITS - 1] == 0 {
                    id -= BITS;
                }
            }
        }
        // INVARIANT: `id - 1` is a member, so every member is below `id`.
        self.top.set(id);
        id.checked_sub(1)
    }

    /// The members among `base..base + n` (`n <= 64`) as a word: bit `i`
    /// is id `base + i`.
    pub fn word(&self, base: usize, n: usize) -> u64 {
        debug_assert!(n <= BITS, "a word holds {BITS} ids, not {n}");
        let at = |i: usize| self.words.get(i).copied().unwrap_or(0);
        let (i, shift) = (base / BITS, base % BITS);
        let low = at(i) >> shift;
        let high = if shift == 0 {
            0
        } else {
            at(i + 1) << (BITS - shift)
        };
        let mask = if n == BITS { !0 } else { (1u64 << n) - 1 };
        (low | high) & mask
    }

    /// The members from `from` up, ascending.
    pub fn from(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        let first = from / BITS;
        self.words
            .iter()
            .enumerate()
            .skip(first)
            .flat_map(move |(i, &w)| {
                let mut w = if i == first {
                    w & (!0u64 << (from % BITS))
                } else {
                    w
                };
                core::iter::from_fn(move || {
                    (w != 0).then(|| {
                        let bit = w.trailing_zeros() as usize;
                        w &= w - 1;
                        i * BITS + bit
                    })
                })
            })
    }

    /// Every member, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.from(0)
    }

    /// The smallest id in `from..below` that is no member, trying one id
    /// after the other.
    pub fn smallest_absent(&self, from: usize, below: usize) -> Option<usize> {
        (from..below).find(|&id| !self.contains(id))
    }
}

/// As a set of ids, `{1, 5, 64}`, like a `BTreeSet`.
impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every read answers as a `BTreeSet` given the same inserts and
    /// removals does, over a pseudo-random walk with ids across several
    /// words, repeats, and removals of the highest member; a word, at any
    /// base and of any length, is the reference's members bit by bit.
    #[test]
    fn answers_as_a_btree_set() {
        let mut set = IdSet::new();
        let mut reference = BTreeSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = match x % 4 {
                0 => (x >> 8) as usize % 70,
                1 => (x >> 8) as usize % 700,
                _ => reference.last().copied().unwrap_or(0),
            };
            if x >> 40 & 1 == 0 {
                assert_eq!(set.insert(id), reference.insert(id), "insert {id}");
            } else {
                assert_eq!(set.remove(id), reference.remove(&id), "remove {id}");
            }
            assert_eq!(set.len(), reference.len());
            assert_eq!(set.last(), reference.last().copied(), "step {step}");
            if step % 97 == 0 {
                let from = (x >> 20) as usize % 800;
                assert!(set.from(from).eq(reference.range(from..).copied()));
                let below = from + (x >> 30) as usize % 100;
                let absent = (from..below).find(|id| !reference.contains(id));
                assert_eq!(set.smallest_absent(from, below), absent);
                let n = (x >> 50) as usize % 65;
                let bits = (0..n).filter(|i| reference.contains(&(from + i)));
                let word = bits.fold(0u64, |w, i| w | 1 << i);
                assert_eq!(set.word(from, n), word, "{n} ids from {from}");
            }
            if step % 5_003 == 0 {
                set.clear();
                reference.clear();
            }
        }
        assert!(set.iter().eq(reference.iter().copied()));
    }
}
