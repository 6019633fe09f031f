//! A fixed-length bitmap, after the kernel's `BitmapVec`.

use crate::alloc::{AllocError, Gfp};

const BITS_PER_WORD: usize = u64::BITS as usize;

/// A bitmap of fixed length, stored inline when it fits in one word.
///
/// # Invariants
///
/// - `len` never changes after construction and is at most [`Bitmap::MAX_LEN`].
/// - `len <= 64` if and only if the bits are stored inline (no allocation).
/// - Every bit at an index `>= len` of the storage is zero, so word-wise
///   searches never report a bit outside the bitmap.
///
/// # Out-of-range indexes
///
/// The kernel has two behaviours for `set_bit`, `clear_bit` and `test_bit`
/// with an index `>= len`: `CONFIG_RUST_BITMAP_HARDENED` panics, the default
/// build logs and does nothing. We model the default build: the call does
/// nothing (and `test_bit` answers `false`). The oracles agree because an id
/// outside the capacity can never be live.
///
/// # Examples
///
/// ```
/// use idpool::{Bitmap, Gfp};
///
/// let mut map = Bitmap::new(130, Gfp::Kernel)?;
/// map.set_bit(0);
/// map.set_bit(129);
/// assert_eq!(map.next_zero_bit(0), Some(1));
/// assert_eq!(map.last_bit(), Some(129));
/// map.set_bit(500); // out of range: ignored
/// assert_eq!(map.last_bit(), Some(129));
/// # Ok::<(), idpool::AllocError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap {
    words: Words,
    len: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Words {
    Inline(u64),
    Heap(Box<[u64]>),
}

impl Bitmap {
    /// The longest bitmap that can be constructed (`i32::MAX` bits).
    pub const MAX_LEN: usize = i32::MAX as usize;

    /// The longest bitmap stored inline, without allocation.
    pub const MAX_INLINE_LEN: usize = BITS_PER_WORD;

    /// A zeroed bitmap of `len` bits.
    ///
    /// Up to [`Bitmap::MAX_INLINE_LEN`] bits this cannot fail, whatever the
    /// flags. Above, it allocates and fails with [`AllocError`] when `gfp` is
    /// [`Gfp::Fail`] or when `len > MAX_LEN`.
    pub fn new(len: usize, gfp: Gfp) -> Result<Self, AllocError> {
        if len <= Self::MAX_INLINE_LEN {
            return Ok(Bitmap {
                words: Words::Inline(0),
                len,
            });
        }
        if len > Self::MAX_LEN || gfp == Gfp::Fail {
            return Err(AllocError);
        }
        let n = len.div_ceil(BITS_PER_WORD);
        // `vec!` of zeroes asks the allocator for zeroed memory, which the
        // system hands out lazily: a 2^30-bit map costs nothing until used.
        // (Unlike the kernel, a real out-of-memory aborts instead of
        // returning `AllocError`; injected failures are what tests use.)
        let words = vec![0u64; n].into_boxed_slice();
        // INVARIANT: freshly zeroed, so the bits beyond `len` are zero.
        Ok(Bitmap {
            words: Words::Heap(words),
            len,
        })
    }

    /// The number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the bitmap has no bits at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the bits live inline (no heap allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.words, Words::Inline(_))
    }

    #[inline]
    fn words(&self) -> &[u64] {
        match &self.words {
            Words::Inline(w) => core::slice::from_ref(w),
            Words::Heap(ws) => ws,
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.words {
            Words::Inline(w) => core::slice::from_mut(w),
            Words::Heap(ws) => ws,
        }
    }

    /// Sets bit `index`. Does nothing when `index >= len` (see the type docs).
    pub fn set_bit(&mut self, index: usize) {
        if index < self.len {
            self.words_mut()[index / BITS_PER_WORD] |= 1 << (index % BITS_PER_WORD);
        }
    }

    /// Clears bit `index`. Does nothing when `index >= len` (see the type docs).
    pub fn clear_bit(&mut self, index: usize) {
        if index < self.len {
            self.words_mut()[index / BITS_PER_WORD] &= !(1 << (index % BITS_PER_WORD));
        }
    }

    /// Whether bit `index` is set; `false` when `index >= len`.
    #[inline]
    pub fn test_bit(&self, index: usize) -> bool {
        index < self.len
            && self.words()[index / BITS_PER_WORD] & (1 << (index % BITS_PER_WORD)) != 0
    }

    /// The smallest zero bit in `[start, len)`, or `None` when there is none
    /// (including when `start >= len`).
    pub fn next_zero_bit(&self, start: usize) -> Option<usize> {
        self.find_from(start, |w| !w)
    }

    /// The smallest set bit in `[start, len)`, or `None`.
    pub fn next_bit(&self, start: usize) -> Option<usize> {
        self.find_from(start, |w| w)
    }

    /// Word-at-a-time search for the first 1 of `view(word)` at or after `start`.
    fn find_from(&self, start: usize, view: impl Fn(u64) -> u64) -> Option<usize> {
        if start >= self.len {
            return None;
        }
        let words = self.words();
        let first = start / BITS_PER_WORD;
        let head = view(words[first]) & (!0u64 << (start % BITS_PER_WORD));
        let found = if head != 0 {
            first * BITS_PER_WORD + head.trailing_zeros() as usize
        } else {
            // Skip runs of words with nothing to find eight at a time: the
            // `all` over a fixed-size chunk compiles to vector compares.
            let rest = &words[first + 1..];
            let skipped = rest
                .chunks_exact(8)
                .take_while(|chunk| chunk.iter().all(|&w| view(w) == 0))
                .count()
                * 8;
            let (i, w) = rest[skipped..]
                .iter()
                .map(|&w| view(w))
                .enumerate()
                .find(|&(_, w)| w != 0)?;
            (first + 1 + skipped + i) * BITS_PER_WORD + w.trailing_zeros() as usize
        };
        // A zero found past `len` lies in the padding of the last word.
        (found < self.len).then_some(found)
    }

    /// The highest set bit, or `None` when no bit is set.
    pub fn last_bit(&self) -> Option<usize> {
        let words = self.words();
        let (i, w) = words.iter().enumerate().rev().find(|&(_, &w)| w != 0)?;
        Some(i * BITS_PER_WORD + (BITS_PER_WORD - 1 - w.leading_zeros() as usize))
    }

    /// The indexes of the set bits, in increasing order.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        let mut next = self.next_bit(0);
        core::iter::from_fn(move || {
            let bit = next?;
            next = self.next_bit(bit + 1);
            Some(bit)
        })
    }

    /// Copies the first `min(src.len(), self.len())` bits of `src` and zeroes
    /// the rest of `self`.
    ///
    /// Bits of `src` at or beyond `self.len()` are silently dropped: shrinking
    /// a map that still has a set bit up there loses that bit.
    pub fn copy_and_extend(&mut self, src: &Bitmap) {
        let n = src.len.min(self.len);
        let full = n / BITS_PER_WORD;
        let dst = self.words_mut();
        let srcw = src.words();
        dst[..full].copy_from_slice(&srcw[..full]);
        dst[full..].fill(0);
        let rest = n % BITS_PER_WORD;
        if rest != 0 {
            // INVARIANT: only the `rest` low bits of the last partial word are
            // copied, so the bits beyond `n` (and thus beyond `len`) stay zero.
            dst[full] = srcw[full] & ((1u64 << rest) - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(len: usize) -> Bitmap {
        Bitmap::new(len, Gfp::Kernel).unwrap()
    }

    fn filled(len: usize) -> Bitmap {
        let mut m = map(len);
        (0..len).for_each(|i| m.set_bit(i));
        m
    }

    #[test]
    fn inline_up_to_64_bits_heap_above() {
        for len in [0, 1, 63, 64] {
            assert!(map(len).is_inline(), "len {len}");
            assert_eq!(Bitmap::new(len, Gfp::Fail).map(|m| m.len()), Ok(len));
        }
        for len in [65, 127, 128, 129] {
            assert!(!map(len).is_inline(), "len {len}");
            assert_eq!(Bitmap::new(len, Gfp::Fail), Err(AllocError), "len {len}");
        }
    }

    #[test]
    fn max_len_is_i32_max() {
        assert_eq!(Bitmap::MAX_LEN, i32::MAX as usize);
        assert_eq!(
            Bitmap::new(Bitmap::MAX_LEN + 1, Gfp::Kernel),
            Err(AllocError)
        );
    }

    #[test]
    fn next_zero_bit_at_word_edges() {
        for len in [63, 64, 65, 127, 128, 129] {
            let mut m = filled(len);
            assert_eq!(m.next_zero_bit(0), None, "full map of {len}");
            for hole in [0, 62, 63, 64, 65, 126, 127, 128] {
                if hole >= len {
                    continue;
                }
                m.clear_bit(hole);
                assert_eq!(m.next_zero_bit(0), Some(hole), "len {len} hole {hole}");
                assert_eq!(m.next_zero_bit(hole), Some(hole), "len {len} hole {hole}");
                assert_eq!(m.next_zero_bit(hole + 1), None, "len {len} hole {hole}");
                m.set_bit(hole);
            }
            assert_eq!(m.next_zero_bit(len), None);
            assert_eq!(m.next_zero_bit(usize::MAX), None);
        }
    }

    #[test]
    fn last_bit_and_next_bit() {
        for len in [1, 64, 65, 128, 129, 1000] {
            let mut m = map(len);
            assert_eq!(m.last_bit(), None);
            assert_eq!(m.next_bit(0), None);
            m.set_bit(len - 1);
            assert_eq!(m.last_bit(), Some(len - 1));
            assert_eq!(m.next_bit(0), Some(len - 1));
            m.set_bit(0);
            assert_eq!(m.last_bit(), Some(len - 1));
            assert_eq!(m.next_bit(0), Some(0));
            assert_eq!(m.iter_ones().collect::<Vec<_>>(), {
                let mut v = vec![0, len - 1];
                v.dedup();
                v
            });
        }
    }

    #[test]
    fn out_of_range_access_is_ignored() {
        let mut m = map(65);
        m.set_bit(65);
        m.set_bit(127); // inside the last word's padding
        assert_eq!(m.iter_ones().count(), 0);
        assert!(!m.test_bit(65));
        m.clear_bit(1 << 40);
        assert_eq!(m.next_zero_bit(64), Some(64));
    }

    #[test]
    fn copy_and_extend_grows_and_truncates() {
        let mut small = map(64);
        small.set_bit(0);
        small.set_bit(63);
        let mut big = filled(129);
        big.copy_and_extend(&small);
        assert_eq!(big.iter_ones().collect::<Vec<_>>(), [0, 63]);

        let mut src = map(200);
        for i in [5, 64, 100, 150, 199] {
            src.set_bit(i);
        }
        let mut dst = map(100);
        dst.copy_and_extend(&src);
        // 100, 150 and 199 are lost: exactly how a bad shrink loses ids.
        assert_eq!(dst.iter_ones().collect::<Vec<_>>(), [5, 64]);
        assert_eq!(dst.next_zero_bit(99), Some(99));

        let mut tiny = map(65);
        tiny.copy_and_extend(&src);
        assert_eq!(tiny.iter_ones().collect::<Vec<_>>(), [5, 64]);
        assert_eq!(tiny.last_bit(), Some(64));
    }
}
