//! A drop-in [`IdPool`](crate::IdPool) whose shrink check is O(1) and whose
//! free-id search does not depend on the map's size in practice.
//!
//! # The idea
//!
//! [`FastPool`] keeps [`IdPool`](crate::IdPool)'s API and policy bit for bit:
//! the same capacities, the same grow and shrink requests, the same commit
//! rules (including the kernel's quirk that a stale shrink can raise the
//! capacity), the same allocation-failure behaviour (a map of at most 64 ids
//! needs no memory). Only the bookkeeping differs:
//!
//! - **Summary levels.** Above the map of used ids sit summary bitmaps:
//!   bit `j` of level 0 says "word `j` of the map has a free id", bit `j` of
//!   level `k + 1` says "word `j` of level `k` is not zero". Levels are added
//!   until one word is left, so a map of 2^30 ids has four of them (2^18,
//!   2^12, 64 and 1 words). `find_unused_id` looks at the word holding the
//!   offset, then climbs the summaries until one has a set bit to the right
//!   and walks back down: at most two words per level, whatever the capacity.
//! - **Counters instead of `last_bit`.** The shrink policy only asks "is any
//!   id `>= capacity / 4` in use?" and "is any id in use?". The pool keeps
//!   `count` (ids in use) and `high` (ids in use at or above
//!   `capacity / 4`), updated by every acquire and release, and recomputed by
//!   the resizes (which copy the whole map anyway). `shrink_request` is O(1).
//!
//! # What it costs
//!
//! The summaries take 1/64 + 1/4096 + ... ≈ 1.6% of the map (one bit per map
//! word), in separate allocations made by [`FastRequest::realloc`] together
//! with the map; two `usize` counters and a `Vec` header (24 bytes) per pool.
//! A pool of at most 64 ids has no summary and allocates nothing, like
//! [`IdPool`](crate::IdPool). An acquire or a release touches one word, and a
//! summary word only when a map word becomes full or stops being full.
//!
//! # Differences from `IdPool`
//!
//! None observable: [`tests`](self) drive both with the same random
//! sequences (acquire, find-and-drop, release, stale and fresh grows and
//! shrinks, failed allocations) and compare every answer, capacity and used
//! id.

use crate::alloc::{AllocError, Corruption, Gfp};
use crate::bitmap::Bitmap;
use crate::id_pool::MIN_CAPACITY;
use crate::table::{Flavour, RefInfo};
use std::collections::BTreeMap;

const BITS: usize = u64::BITS as usize;

/// The words of one bitmap: inline when there is one word (no allocation).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Words {
    Inline(u64),
    Heap(Box<[u64]>),
}

impl Words {
    fn zeroed(n: usize) -> Self {
        if n <= 1 {
            Words::Inline(0)
        } else {
            Words::Heap(vec![0; n].into_boxed_slice())
        }
    }

    fn get(&self) -> &[u64] {
        match self {
            Words::Inline(w) => core::slice::from_ref(w),
            Words::Heap(ws) => ws,
        }
    }

    fn get_mut(&mut self) -> &mut [u64] {
        match self {
            Words::Inline(w) => core::slice::from_mut(w),
            Words::Heap(ws) => ws,
        }
    }
}

/// The zeroed storage of a pool of `len` ids: the map and its summaries.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Storage {
    len: usize,
    used: Words,
    summary: Vec<Box<[u64]>>,
}

impl Storage {
    /// Allocates as [`Bitmap::new`] would: `len <= 64` cannot fail, above it
    /// fails when `gfp` is [`Gfp::Fail`] or `len > Bitmap::MAX_LEN`.
    fn alloc(len: usize, gfp: Gfp) -> Result<Self, AllocError> {
        if len > Bitmap::MAX_INLINE_LEN && (len > Bitmap::MAX_LEN || gfp == Gfp::Fail) {
            return Err(AllocError);
        }
        let mut words = len.div_ceil(BITS);
        let used = Words::zeroed(words);
        let mut summary = Vec::new();
        while words > 1 {
            words = words.div_ceil(BITS);
            summary.push(vec![0; words].into_boxed_slice());
        }
        Ok(Storage { len, used, summary })
    }
}

/// A growable pool of ids with [`IdPool`](crate::IdPool)'s API and policy,
/// an O(1) shrink check and a summary-guided free-id search.
///
/// # Invariants
///
/// - `MIN_CAPACITY <= len <= Bitmap::MAX_LEN`, and the map has
///   `ceil(len / 64)` words.
/// - Bit `i < len` of the map is set iff id `i` is acquired; the padding
///   bits (`>= len`) of the last word are **set**, so a word with no free id
///   is exactly `!0`.
/// - `summary[0]` has one bit per map word, set iff that word is not `!0`;
///   `summary[k + 1]` has one bit per word of `summary[k]`, set iff that word
///   is not 0. Summary padding bits are 0. The last level has one word, and
///   there is no level when the map has one word.
/// - `count` is the number of acquired ids; `high` the number of acquired
///   ids in `[len / 4, len)`.
/// - No commit ever clears an acquired id.
///
/// # Examples
///
/// ```
/// use idpool::{FastPool, Gfp};
///
/// let mut pool = FastPool::new();
/// for expected in 0..64 {
///     assert_eq!(pool.find_unused_id(0).unwrap().acquire(), expected);
/// }
/// assert!(pool.find_unused_id(0).is_none());
/// let resizer = pool.grow_request().unwrap().realloc(Gfp::Kernel)?;
/// pool.grow(resizer);
/// assert_eq!(pool.capacity(), 128);
/// assert_eq!(pool.find_unused_id(1).unwrap().acquire(), 64);
/// for id in 0..=64 {
///     pool.release_id(id);
/// }
/// assert_eq!(pool.shrink_request().map(|r| r.num_ids()), Some(64)); // O(1)
/// # Ok::<(), idpool::AllocError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastPool {
    store: Storage,
    count: usize,
    high: usize,
}

/// A request for a pool of `num_ids` ids, made under the lock and served
/// without it by [`FastRequest::realloc`]. The counterpart of
/// [`ReallocRequest`](crate::ReallocRequest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a request does nothing until it is reallocated and committed"]
pub struct FastRequest {
    num_ids: usize,
}

/// Zeroed storage allocated for a resize, waiting for [`FastPool::grow`] or
/// [`FastPool::shrink`]. The counterpart of [`PoolResizer`](crate::PoolResizer).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a resizer does nothing until it is committed"]
pub struct FastResizer {
    new: Storage,
}

/// An unused id found by [`FastPool::find_unused_id`]; it holds the pool
/// mutably until [`FastUnusedId::acquire`] or drop (which changes nothing).
#[must_use = "dropping a FastUnusedId without acquire() leaves the id free"]
pub struct FastUnusedId<'pool> {
    id: usize,
    pool: &'pool mut FastPool,
}

impl FastRequest {
    /// The number of ids the new storage will hold.
    pub fn num_ids(&self) -> usize {
        self.num_ids
    }

    /// Allocates the map and its summaries. Runs without the caller's lock.
    /// Fails exactly when [`ReallocRequest::realloc`](crate::ReallocRequest::realloc)
    /// of the same size would.
    pub fn realloc(&self, gfp: Gfp) -> Result<FastResizer, AllocError> {
        Ok(FastResizer {
            new: Storage::alloc(self.num_ids, gfp)?,
        })
    }
}

impl FastResizer {
    /// The capacity the pool would take from this resizer.
    pub fn len(&self) -> usize {
        self.new.len
    }

    /// Whether the resizer holds no ids (never true for a pool's resizer).
    pub fn is_empty(&self) -> bool {
        self.new.len == 0
    }
}

impl FastUnusedId<'_> {
    /// The id as a 32-bit handle.
    pub fn as_u32(&self) -> u32 {
        // INVARIANT: ids are below `Bitmap::MAX_LEN == i32::MAX`, so they fit.
        self.id as u32
    }

    /// The id as an index.
    pub fn as_usize(&self) -> usize {
        self.id
    }

    /// Marks the id as used and returns it.
    pub fn acquire(self) -> usize {
        self.pool.set(self.id);
        self.id
    }
}

impl Default for FastPool {
    fn default() -> Self {
        Self::new()
    }
}

impl FastPool {
    /// An empty pool of [`MIN_CAPACITY`] ids. Needs no allocation.
    pub fn new() -> Self {
        Self::from_storage(Storage::alloc(MIN_CAPACITY, Gfp::Kernel).expect("one inline word"))
    }

    /// An empty pool of `max(num_ids, MIN_CAPACITY)` ids; fails like
    /// [`IdPool::with_capacity`](crate::IdPool::with_capacity).
    pub fn with_capacity(num_ids: usize, gfp: Gfp) -> Result<Self, AllocError> {
        Ok(Self::from_storage(Storage::alloc(
            num_ids.max(MIN_CAPACITY),
            gfp,
        )?))
    }

    fn from_storage(store: Storage) -> Self {
        let mut pool = FastPool {
            store,
            count: 0,
            high: 0,
        };
        // INVARIANT: fresh storage has no acquired id, so the counters are 0.
        pool.finish_install(false);
        pool
    }

    /// The number of ids the pool can hold without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.store.len
    }

    /// The number of acquired ids. O(1).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether `id` is acquired; `false` outside the capacity.
    #[inline]
    pub fn is_used(&self, id: usize) -> bool {
        id < self.store.len && self.store.used.get()[id / BITS] & (1 << (id % BITS)) != 0
    }

    /// The acquired ids, in increasing order.
    pub fn used_ids(&self) -> impl Iterator<Item = usize> + '_ {
        let len = self.store.len;
        self.store
            .used
            .get()
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| {
                let mut w = w;
                core::iter::from_fn(move || {
                    (w != 0).then(|| {
                        let bit = w.trailing_zeros() as usize;
                        w &= w - 1;
                        i * BITS + bit
                    })
                })
            })
            .take_while(move |&id| id < len)
    }

    /// The smallest unused id in `[offset, capacity)`, or `None`. Changes
    /// nothing until [`FastUnusedId::acquire`]. Reads at most two words per
    /// level: five levels at the 2^30 ceiling.
    pub fn find_unused_id(&mut self, offset: usize) -> Option<FastUnusedId<'_>> {
        let id = self.next_free(offset)?;
        Some(FastUnusedId { id, pool: self })
    }

    /// Releases `id`; an unused id or one outside the capacity is ignored.
    #[inline]
    pub fn release_id(&mut self, id: usize) {
        let len = self.store.len;
        if id >= len {
            return;
        }
        let (w, bit) = (id / BITS, 1u64 << (id % BITS));
        let word = &mut self.store.used.get_mut()[w];
        if *word & bit == 0 {
            return;
        }
        let was_full = *word == !0;
        *word &= !bit;
        self.count -= 1;
        if id >= len / 4 {
            self.high -= 1;
        }
        if was_full {
            // INVARIANT: word `w` now has a free id; mark it in the summaries.
            let mut j = w;
            for level in &mut self.store.summary {
                let word = &mut level[j / BITS];
                let was_empty = *word == 0;
                *word |= 1 << (j % BITS);
                if !was_empty {
                    break;
                }
                j /= BITS;
            }
        }
    }

    fn set(&mut self, id: usize) {
        if id >= self.store.len || self.is_used(id) {
            return;
        }
        let len = self.store.len;
        let (w, bit) = (id / BITS, 1u64 << (id % BITS));
        let word = &mut self.store.used.get_mut()[w];
        *word |= bit;
        let now_full = *word == !0;
        self.count += 1;
        if id >= len / 4 {
            self.high += 1;
        }
        if now_full {
            // INVARIANT: word `w` has no free id left; clear it upwards.
            let mut j = w;
            for level in &mut self.store.summary {
                let word = &mut level[j / BITS];
                *word &= !(1 << (j % BITS));
                if *word != 0 {
                    break;
                }
                j /= BITS;
            }
        }
    }

    fn next_free(&self, start: usize) -> Option<usize> {
        if start >= self.store.len {
            return None;
        }
        let words = self.store.used.get();
        let w = start / BITS;
        let head = !words[w] & (!0u64 << (start % BITS));
        if head != 0 {
            // The padding is set, so a zero bit is below `len`.
            return Some(w * BITS + head.trailing_zeros() as usize);
        }
        let w = self.next_in_summary(0, w + 1)?;
        Some(w * BITS + (!words[w]).trailing_zeros() as usize)
    }

    /// The first set bit at or after `start` in summary `level`.
    fn next_in_summary(&self, level: usize, start: usize) -> Option<usize> {
        let bits = self.store.summary.get(level)?;
        let w = start / BITS;
        let head = *bits.get(w)? & (!0u64 << (start % BITS));
        if head != 0 {
            return Some(w * BITS + head.trailing_zeros() as usize);
        }
        let w = self.next_in_summary(level + 1, w + 1)?;
        Some(w * BITS + bits[w].trailing_zeros() as usize)
    }

    /// A request to double the capacity, or `None` above `Bitmap::MAX_LEN`,
    /// as [`IdPool::grow_request`](crate::IdPool::grow_request).
    pub fn grow_request(&self) -> Option<FastRequest> {
        let num_ids = self.capacity().checked_mul(2)?;
        (num_ids <= Bitmap::MAX_LEN).then_some(FastRequest { num_ids })
    }

    /// Commits a grow; a resizer that is not larger is dropped, as
    /// [`IdPool::grow`](crate::IdPool::grow).
    pub fn grow(&mut self, resizer: FastResizer) {
        if resizer.new.len <= self.capacity() {
            return;
        }
        self.install(resizer.new);
    }

    /// The shrink policy of [`IdPool::shrink_request`](crate::IdPool::shrink_request)
    /// in O(1): `None` at 64 ids or less, 64 when no id is used, `None` when
    /// an id `>= capacity / 4` is used, else `max(64, capacity / 2)`.
    #[inline]
    pub fn shrink_request(&self) -> Option<FastRequest> {
        let cap = self.capacity();
        if cap <= MIN_CAPACITY {
            return None;
        }
        if self.count == 0 {
            return Some(FastRequest {
                num_ids: MIN_CAPACITY,
            });
        }
        if self.high > 0 {
            return None;
        }
        Some(FastRequest {
            num_ids: (cap / 2).max(MIN_CAPACITY),
        })
    }

    /// Commits a shrink after recomputing the request, as
    /// [`IdPool::shrink`](crate::IdPool::shrink), quirk included: a stale
    /// resizer larger than the current capacity raises it.
    pub fn shrink(&mut self, resizer: FastResizer) {
        let Some(target) = self.shrink_request() else {
            return;
        };
        if target.num_ids > resizer.new.len {
            return;
        }
        // INVARIANT: `high == 0`, so every used id is below
        // `capacity / 4 <= target <= resizer.len()`: none is dropped.
        self.install(resizer.new);
    }

    /// Copies the used ids into `new` and takes it. O(new capacity), like the
    /// copy any resize makes.
    fn install(&mut self, mut new: Storage) {
        let keep = self.store.len.min(new.len);
        {
            let src = self.store.used.get();
            let dst = new.used.get_mut();
            let full = keep / BITS;
            dst[..full].copy_from_slice(&src[..full]);
            if keep % BITS != 0 {
                dst[full] = src[full] & ((1u64 << (keep % BITS)) - 1);
            }
        }
        let count = self.count;
        self.store = new;
        self.finish_install(true);
        debug_assert_eq!(self.count, count, "a resize dropped an acquired id");
    }

    /// Sets the padding, rebuilds the summaries and, if `recount`, the
    /// counters from the map.
    fn finish_install(&mut self, recount: bool) {
        let len = self.store.len;
        let words = self.store.used.get_mut();
        if len % BITS != 0 {
            words[len / BITS] |= !0u64 << (len % BITS);
        }
        let used = self.store.used.get();
        let summary = &mut self.store.summary;
        for k in 0..summary.len() {
            let (built, rest) = summary.split_at_mut(k);
            let level = &mut rest[0];
            level.fill(0);
            let below: &[u64] = if k == 0 { used } else { &built[k - 1] };
            // Level 0 marks map words with a free id, the others non-empty words.
            let empty = if k == 0 { !0 } else { 0 };
            for (j, &w) in below.iter().enumerate() {
                if w != empty {
                    level[j / BITS] |= 1 << (j % BITS);
                }
            }
        }
        if recount {
            self.count = self.count_range(0, len);
            self.high = self.count_range(len / 4, len);
        }
    }

    /// The number of acquired ids in `[lo, hi)`, a word at a time.
    fn count_range(&self, lo: usize, hi: usize) -> usize {
        let words = self.store.used.get();
        let ones = |i: usize| {
            let mut w = words[i / BITS];
            if i / BITS == lo / BITS {
                w &= !0u64 << (lo % BITS);
            }
            if i / BITS == (hi - 1) / BITS && hi % BITS != 0 {
                w &= (1u64 << (hi % BITS)) - 1;
            }
            w.count_ones() as usize
        };
        if lo >= hi {
            return 0;
        }
        (lo / BITS..=(hi - 1) / BITS).map(|w| ones(w * BITS)).sum()
    }

    /// Checks every invariant of the type (O(capacity)); for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let len = self.store.len;
        let words = self.store.used.get();
        if !(MIN_CAPACITY..=Bitmap::MAX_LEN).contains(&len) || words.len() != len.div_ceil(BITS) {
            return Err(format!("bad length {len} with {} words", words.len()));
        }
        if len % BITS != 0 && words[len / BITS] | ((1u64 << (len % BITS)) - 1) != !0 {
            return Err("padding bits not set".into());
        }
        let mut below: Vec<bool> = words.iter().map(|&w| w != !0).collect();
        for (k, level) in self.store.summary.iter().enumerate() {
            if level.len() != below.len().div_ceil(BITS) {
                return Err(format!("summary {k} has {} words", level.len()));
            }
            for (j, &free) in below.iter().enumerate() {
                if (level[j / BITS] >> (j % BITS)) & 1 != free as u64 {
                    return Err(format!("summary {k} bit {j} is wrong"));
                }
            }
            if below.len() % BITS != 0 && level[below.len() / BITS] >> (below.len() % BITS) != 0 {
                return Err(format!("summary {k} padding set"));
            }
            below = level.iter().map(|&w| w != 0).collect();
        }
        if below.len() != 1 {
            return Err("the top level is not one word".into());
        }
        let count = self.used_ids().count();
        let high = self.used_ids().filter(|&id| id >= len / 4).count();
        if (count, high) != (self.count, self.high) {
            return Err(format!(
                "counters ({}, {}) but the map says ({count}, {high})",
                self.count, self.high
            ));
        }
        Ok(())
    }
}

/// The fast pool in the handle table: exactly [`IdPool`](crate::IdPool)'s
/// flavour, with the fast bookkeeping.
impl Flavour for FastPool {
    const NAME: &'static str = "fastpool";
    type Request = FastRequest;
    type Resizer = FastResizer;

    fn new_pool() -> Self {
        FastPool::new()
    }
    /// As [`IdPool`](crate::IdPool)'s: the bit changes, and the summaries
    /// and counters follow it (an id outside the capacity is ignored).
    fn corrupt(&mut self, corruption: Corruption) {
        match corruption {
            Corruption::ClearBit(id) => self.release_id(id as usize),
            Corruption::SetBit(id) => self.set(id as usize),
        }
    }
    fn find_unused(&mut self, start: u32, _: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        self.find_unused_id(start as usize).map(|id| id.as_u32())
    }
    fn acquire(&mut self, id: u32) {
        debug_assert!(!self.is_used(id as usize), "acquire of a used id");
        self.set(id as usize);
    }
    fn release(&mut self, id: u32) {
        self.release_id(id as usize);
    }
    fn grow_request(&self) -> Option<FastRequest> {
        FastPool::grow_request(self)
    }
    fn realloc(request: &FastRequest, gfp: Gfp) -> Result<FastResizer, AllocError> {
        request.realloc(gfp)
    }
    fn grow(&mut self, resizer: FastResizer) {
        FastPool::grow(self, resizer);
    }
    fn shrink_request(&self) -> Option<FastRequest> {
        FastPool::shrink_request(self)
    }
    fn shrink(&mut self, resizer: FastResizer) {
        FastPool::shrink(self, resizer);
    }
    fn capacity(&self) -> usize {
        FastPool::capacity(self)
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        Some(FastPool::used_ids(self).map(|id| id as u32).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id_pool::{IdPool, PoolResizer};

    /// xorshift64*: a small deterministic generator for the random tests.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        /// An id near a boundary of the capacity, or anywhere.
        fn point(&mut self, cap: usize) -> usize {
            let base = [0, 1, 63, 64, cap / 4, cap / 2, cap, self.below(cap + 1)][self.below(8)];
            (base + self.below(3)).saturating_sub(1)
        }
    }

    fn assert_same(fast: &FastPool, slow: &IdPool, what: &str) {
        assert_eq!(fast.capacity(), slow.capacity(), "{what}: capacity");
        assert!(
            fast.used_ids().eq(slow.used_ids()),
            "{what}: used ids {:?} vs {:?}",
            fast.used_ids().collect::<Vec<_>>(),
            slow.used_ids().collect::<Vec<_>>()
        );
        assert_eq!(
            fast.shrink_request().map(|r| r.num_ids()),
            slow.shrink_request().map(|r| r.num_ids()),
            "{what}: shrink request"
        );
        assert_eq!(
            fast.grow_request().map(|r| r.num_ids()),
            slow.grow_request().map(|r| r.num_ids()),
            "{what}: grow request"
        );
        assert_eq!(fast.count(), slow.used_ids().count(), "{what}: count");
        if let Err(e) = fast.check_invariants() {
            panic!("{what}: {e}");
        }
    }

    #[test]
    fn corruption_changes_the_bits_as_idpools_does() {
        use crate::alloc::Corruption;
        let mut fast = FastPool::with_capacity(128, Gfp::Kernel).unwrap();
        let mut slow = IdPool::with_capacity(128, Gfp::Kernel).unwrap();
        for id in 0..70 {
            fast.set(id);
            slow.find_unused_id(id).unwrap().acquire();
        }
        let cases = [
            Corruption::ClearBit(3),
            Corruption::ClearBit(3),
            Corruption::SetBit(100),
            Corruption::SetBit(5),
            Corruption::SetBit(500),
            Corruption::ClearBit(500),
            Corruption::ClearBit(63),
        ];
        for c in cases {
            <FastPool as Flavour>::corrupt(&mut fast, c);
            <IdPool as Flavour>::corrupt(&mut slow, c);
            assert_same(&fast, &slow, &format!("{c:?}"));
        }
        assert!(!fast.is_used(3) && fast.is_used(100) && !fast.is_used(63));
    }

    #[test]
    fn agrees_with_idpool_on_random_sequences() {
        for seed in 1..=60u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let start_cap = [64, 65, 100, 128, 1000, 4096][rng.below(6)];
            let mut fast = FastPool::with_capacity(start_cap, Gfp::Kernel).unwrap();
            let mut slow = IdPool::with_capacity(start_cap, Gfp::Kernel).unwrap();
            let mut pending: Vec<(bool, FastResizer, PoolResizer)> = Vec::new();
            for step in 0..600 {
                let cap = slow.capacity();
                let what = format!("seed {seed} step {step}");
                match rng.below(10) {
                    0..=2 => {
                        let offset = rng.point(cap);
                        let (f, s) = (fast.find_unused_id(offset), slow.find_unused_id(offset));
                        assert_eq!(
                            f.as_ref().map(|u| u.as_usize()),
                            s.as_ref().map(|u| u.as_usize()),
                            "{what}: find {offset}"
                        );
                        if rng.below(4) != 0 {
                            if let (Some(f), Some(s)) = (f, s) {
                                assert_eq!(f.acquire(), s.acquire());
                            }
                        }
                    }
                    3 => {
                        // Bulk acquire: deep pools.
                        for _ in 0..rng.below(300) {
                            let (Some(f), Some(s)) =
                                (fast.find_unused_id(1), slow.find_unused_id(1))
                            else {
                                break;
                            };
                            assert_eq!(f.acquire(), s.acquire());
                        }
                    }
                    4..=5 => {
                        let id = if rng.below(3) == 0 {
                            rng.point(cap)
                        } else {
                            let used: Vec<usize> = slow.used_ids().collect();
                            if used.is_empty() {
                                0
                            } else {
                                used[rng.below(used.len())]
                            }
                        };
                        fast.release_id(id);
                        slow.release_id(id);
                    }
                    6 => {
                        let gfp = if rng.below(5) == 0 {
                            Gfp::Fail
                        } else {
                            Gfp::Kernel
                        };
                        let grow = rng.below(2) == 0;
                        let (f, s) = if grow {
                            (fast.grow_request(), slow.grow_request())
                        } else {
                            (fast.shrink_request(), slow.shrink_request())
                        };
                        assert_eq!(f.map(|r| r.num_ids()), s.map(|r| r.num_ids()), "{what}");
                        if let (Some(f), Some(s)) = (f, s) {
                            match (f.realloc(gfp), s.realloc(gfp)) {
                                (Ok(f), Ok(s)) => pending.push((grow, f, s)),
                                (Err(_), Err(_)) => {}
                                other => panic!("{what}: realloc {:?}", other.0.is_ok()),
                            }
                        }
                    }
                    7..=8 if !pending.is_empty() => {
                        let (grow, f, s) = pending.swap_remove(rng.below(pending.len()));
                        if grow {
                            fast.grow(f);
                            slow.grow(s);
                        } else {
                            fast.shrink(f);
                            slow.shrink(s);
                        }
                    }
                    _ => {
                        // What Binder does after a release.
                        if let (Some(f), Some(s)) = (fast.shrink_request(), slow.shrink_request()) {
                            fast.shrink(f.realloc(Gfp::Kernel).unwrap());
                            slow.shrink(s.realloc(Gfp::Kernel).unwrap());
                        }
                    }
                }
                assert_same(&fast, &slow, &what);
            }
        }
    }

    #[test]
    fn summaries_find_free_ids_across_levels() {
        // Four levels of summary above 2^20 ids: fill everything but a few
        // far-apart holes and find each from 0.
        let mut pool = FastPool::with_capacity(1 << 20, Gfp::Kernel).unwrap();
        assert_eq!(pool.store.summary.len(), 3);
        for _ in 0..(1 << 20) {
            pool.find_unused_id(0).unwrap().acquire();
        }
        assert!(pool.find_unused_id(0).is_none());
        pool.check_invariants().unwrap();
        for hole in [(1 << 20) - 1, 777_777, 262_144, 4095, 64, 0] {
            pool.release_id(hole);
            assert_eq!(pool.find_unused_id(0).map(|u| u.as_usize()), Some(hole));
            pool.check_invariants().unwrap();
        }
        assert_eq!(
            pool.find_unused_id(4096).map(|u| u.as_usize()),
            Some(262_144)
        );
        assert_eq!(
            pool.find_unused_id(777_778).map(|u| u.as_usize()),
            Some((1 << 20) - 1)
        );
        assert_eq!(pool.count(), (1 << 20) - 6);
    }

    #[test]
    fn odd_capacities_keep_the_padding_out_of_reach() {
        for cap in [65, 127, 129, 4097, 4159] {
            let mut pool = FastPool::with_capacity(cap, Gfp::Kernel).unwrap();
            for expected in 0..cap {
                assert_eq!(pool.find_unused_id(0).unwrap().acquire(), expected);
            }
            assert!(pool.find_unused_id(0).is_none(), "cap {cap}");
            pool.release_id(cap); // outside: ignored
            pool.release_id(cap - 1);
            assert_eq!(
                pool.find_unused_id(cap - 1).map(|u| u.as_usize()),
                Some(cap - 1)
            );
            pool.check_invariants().unwrap();
        }
    }

    #[test]
    fn allocation_rules_match_idpool() {
        assert_eq!(
            FastPool::with_capacity(64, Gfp::Fail).unwrap().capacity(),
            64
        );
        assert_eq!(FastPool::with_capacity(65, Gfp::Fail), Err(AllocError));
        assert_eq!(
            FastPool::with_capacity(Bitmap::MAX_LEN + 1, Gfp::Kernel),
            Err(AllocError)
        );
        let pool = FastPool::with_capacity(1 << 30, Gfp::Kernel).unwrap();
        assert_eq!(pool.grow_request(), None);
        let small = FastPool::with_capacity(128, Gfp::Kernel).unwrap();
        let shrink = small.shrink_request().unwrap();
        assert_eq!(shrink.num_ids(), 64);
        assert!(shrink.realloc(Gfp::Fail).is_ok(), "64 ids need no memory");
        assert!(matches!(FastPool::new().store.used, Words::Inline(_)));
    }
}
