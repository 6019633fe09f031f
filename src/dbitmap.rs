//! The C Binder driver's id allocator, after `drivers/android/dbitmap.h`.

use crate::alloc::Gfp;
use crate::bitmap::Bitmap;
use crate::version::Version;
use core::fmt;

/// The smallest size of an enabled dbitmap (`NBITS_MIN`, one word).
pub const NBITS_MIN: usize = Bitmap::MAX_INLINE_LEN;

/// A dynamic bitmap that can be disabled, after the C driver's `struct dbitmap`.
///
/// It differs from [`IdPool`](crate::IdPool) in four ways:
///
/// - It can be **disabled** (`nbits == 0`): when an allocation for it fails,
///   the driver frees it and falls back to the slow linear scan for the rest
///   of the process's life.
/// - Growth doubles with no upper bound (`nbits << 1` on a 32-bit unsigned);
///   in practice the allocation fails first and disables the map.
/// - A shrink commits only when the recomputed target is **exactly** the size
///   that was prepared.
/// - [`DBitmap::acquire_next_zero_bit`] finds and sets in one call.
///
/// Every allocation is a C `bitmap_zalloc`, which can fail at any size; see
/// [`DBitmap::zalloc`].
///
/// # Invariants
///
/// - Disabled if and only if `map` is `None`, and then `nbits() == 0`.
/// - Enabled: `nbits() >= NBITS_MIN` and no commit ever clears a set bit.
/// - For a version that [reserves bit 0](Version::reserves_bit_zero), bit 0
///   is set from `dbitmap_init` on, and stays set if the version's
///   `dbitmap_clear_bit` [spares it](Version::clear_bit_spares_zero).
///
/// # Versions
///
/// The map is built for one upstream [`Version`] ([`DBitmap::init_with`];
/// [`DBitmap::init`] is mainline). Three rules of `dbitmap.h` changed:
/// the reserved bit 0 (`dbitmap_init`), `dbitmap_clear_bit`'s guard for it,
/// and `dbitmap_shrink_nbits`' threshold. A Rust version is treated as
/// mainline (the Rust driver has no dbitmap).
///
/// # Examples
///
/// ```
/// use idpool::{DBitmap, Gfp};
///
/// let mut dmap = DBitmap::init(Gfp::Kernel);
/// for expected in 0..64 {
///     assert_eq!(dmap.acquire_next_zero_bit(0), Ok(expected));
/// }
/// assert!(dmap.acquire_next_zero_bit(0).is_err()); // -ENOSPC
/// let nbits = dmap.grow_nbits();
/// let new = DBitmap::zalloc(nbits, Gfp::Fail); // the allocation fails...
/// dmap.grow(new, nbits);
/// assert!(!dmap.enabled()); // ...so the driver falls back to the slow scan
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DBitmap {
    map: Option<Bitmap>,
    version: Version,
    /// The C `map` pointer still points at a map `dbitmap_free` freed (a
    /// version whose `dbitmap_free` [leaves it dangling]). Only when `map`
    /// is `None`.
    ///
    /// [leaves it dangling]: Version::free_leaves_map_dangling
    dangling: bool,
    /// How many times `dbitmap_free` freed an already freed map.
    double_frees: u32,
}

/// `-ENOSPC`: every bit at or above the offset is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoSpace;

impl fmt::Display for NoSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no free bit in the dbitmap")
    }
}

impl std::error::Error for NoSpace {}

impl DBitmap {
    /// `dbitmap_init`: an enabled map of [`NBITS_MIN`] bits, or a disabled
    /// one when the allocation fails.
    pub fn init(gfp: Gfp) -> Self {
        Self::init_with(gfp, Version::CMainline)
    }

    /// `dbitmap_init` as `version` had it: the June 2024 and v3 versions set
    /// bit 0, reserved for the context manager.
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::{DBitmap, Gfp, Version};
    ///
    /// let june = DBitmap::init_with(Gfp::Kernel, Version::C2024_06);
    /// assert!(june.test_bit(0));
    /// assert!(!DBitmap::init(Gfp::Kernel).test_bit(0));
    /// ```
    pub fn init_with(gfp: Gfp, version: Version) -> Self {
        let mut map = Self::zalloc(NBITS_MIN, gfp);
        if version.reserves_bit_zero() {
            if let Some(map) = &mut map {
                map.set_bit(0);
            }
        }
        DBitmap {
            map,
            version,
            dangling: false,
            double_frees: 0,
        }
    }

    /// A disabled map (`nbits == 0`).
    pub fn disabled() -> Self {
        DBitmap {
            map: None,
            version: Version::CMainline,
            dangling: false,
            double_frees: 0,
        }
    }

    /// The version whose `dbitmap.h` rules this map follows.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The bits themselves, to corrupt them behind the driver's back.
    pub(crate) fn map_mut(&mut self) -> Option<&mut Bitmap> {
        self.map.as_mut()
    }

    /// `bitmap_zalloc`: a zeroed bitmap, or `None` (a NULL pointer) when the
    /// allocation fails. Unlike [`Bitmap::new`], even a small map is a heap
    /// allocation in C, so [`Gfp::Fail`] fails at every size.
    pub fn zalloc(nbits: usize, gfp: Gfp) -> Option<Bitmap> {
        match gfp {
            Gfp::Fail => None,
            Gfp::Kernel => Bitmap::new(nbits, gfp).ok(),
        }
    }

    /// Whether the map is in use (`nbits != 0`).
    pub fn enabled(&self) -> bool {
        self.map.is_some()
    }

    /// The number of bits; 0 when disabled.
    pub fn nbits(&self) -> usize {
        self.map.as_ref().map_or(0, Bitmap::len)
    }

    /// Whether `bit` is set; `false` when disabled or out of range.
    #[inline]
    pub fn test_bit(&self, bit: usize) -> bool {
        self.map.as_ref().is_some_and(|m| m.test_bit(bit))
    }

    /// The set bits, in increasing order (none when disabled).
    pub fn used_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.map.iter().flat_map(Bitmap::iter_ones)
    }

    /// `dbitmap_free`: disables the map for good.
    ///
    /// For a version whose `dbitmap_free` [leaves the pointer
    /// dangling](Version::free_leaves_map_dangling), the freed map stays
    /// behind as the C pointer does, and freeing it again (a failed grow's
    /// `dbitmap_free`, then the process's release) is a double free: it is
    /// counted ([`DBitmap::double_frees`]) and otherwise ignored. The C code
    /// would corrupt the heap there; a caller reports it as a memory-safety
    /// finding, not as a difference in behaviour.
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::{DBitmap, Gfp, Version};
    ///
    /// let mut june = DBitmap::init_with(Gfp::Kernel, Version::C2024_06);
    /// june.grow(None, 128); // the grow's allocation failed: dbitmap_free
    /// assert!(!june.enabled());
    /// june.free(); // the process's release
    /// assert_eq!(june.double_frees(), 1);
    ///
    /// let mut mainline = DBitmap::init(Gfp::Kernel);
    /// mainline.grow(None, 128);
    /// mainline.free();
    /// assert_eq!(mainline.double_frees(), 0);
    /// ```
    pub fn free(&mut self) {
        if self.dangling {
            self.double_frees += 1;
        }
        let pointer_set = self.map.is_some() || self.dangling;
        self.map = None;
        // INVARIANT: dangling only with `map == None`.
        self.dangling = pointer_set && self.version.free_leaves_map_dangling();
    }

    /// How many times `dbitmap_free` freed an already freed map (only for a
    /// version whose `dbitmap_free` [leaves the pointer
    /// dangling](Version::free_leaves_map_dangling)).
    pub fn double_frees(&self) -> u32 {
        self.double_frees
    }

    /// Whether the C `map` pointer points at a map already freed: the next
    /// `dbitmap_free` frees it twice.
    pub fn map_dangles(&self) -> bool {
        self.dangling
    }

    /// `dbitmap_grow_nbits`: twice the current size, computed like the C
    /// `unsigned int` shift (a bit shifted out of 32 is lost). 0 when disabled.
    pub fn grow_nbits(&self) -> usize {
        Self::grow_nbits_for(self.nbits() as u32)
    }

    /// The size `dbitmap_grow_nbits` asks for when the map has `nbits`
    /// bits (`nbits` is an `unsigned int` in C), computed without a map:
    /// sizes no map can have (2^31 and up) can be asked about.
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::DBitmap;
    ///
    /// assert_eq!(DBitmap::grow_nbits_for(1 << 30), 1 << 31);
    /// assert_eq!(DBitmap::grow_nbits_for(1 << 31), 0); // the shift wraps
    /// ```
    pub fn grow_nbits_for(nbits: u32) -> usize {
        (nbits << 1) as usize
    }

    /// `dbitmap_shrink_nbits`: the size to shrink to, or 0 for "don't".
    ///
    /// - nbits <= 64 (or disabled): 0;
    /// - no bit set: 64;
    /// - the last set bit is below nbits / 4: nbits / 2 (at or below for
    ///   [`Version::CV3`], the off-by-one caught in review);
    /// - otherwise 0.
    pub fn shrink_nbits(&self) -> usize {
        let Some(map) = &self.map else { return 0 };
        let nbits = map.len();
        if nbits <= NBITS_MIN {
            return 0;
        }
        let below_quarter = |bit: usize| {
            if self.version.shrink_threshold_inclusive() {
                bit <= nbits / 4
            } else {
                bit < nbits / 4
            }
        };
        match map.last_bit() {
            None => NBITS_MIN,
            Some(bit) if below_quarter(bit) => nbits / 2,
            Some(_) => 0,
        }
    }

    /// `dbitmap_grow`: commits a grow prepared without the lock, in
    /// mainline's order:
    ///
    /// 1. A map that is disabled, or not smaller than `nbits` (someone grew
    ///    it meanwhile), drops `new` and keeps its state, *even when the
    ///    allocation failed*: the grow is no longer needed, and upstream
    ///    disables the map only when it must.
    /// 2. Only then does a failed allocation (`new == None`) disable the map.
    ///
    /// # Examples
    ///
    /// ```
    /// use idpool::{DBitmap, Gfp};
    ///
    /// let mut dmap = DBitmap::init(Gfp::Kernel);
    /// let failed = DBitmap::zalloc(128, Gfp::Fail); // prepared at 64 bits, NULL
    /// dmap.grow(DBitmap::zalloc(128, Gfp::Kernel), 128); // someone else grew
    /// dmap.grow(failed, 128); // stale: ignored, NULL or not
    /// assert_eq!(dmap.nbits(), 128);
    /// ```
    pub fn grow(&mut self, new: Option<Bitmap>, nbits: usize) {
        let Some(map) = &self.map else { return };
        if nbits <= map.len() {
            return;
        }
        let Some(mut new) = new else {
            self.free();
            return;
        };
        new.copy_and_extend(map);
        // INVARIANT: the new map is longer than the old one, so no bit is lost.
        self.map = Some(new);
    }

    /// `dbitmap_shrink`: commits a shrink prepared without the lock, only
    /// when the recomputed target is exactly `nbits`. A failed allocation
    /// (`new == None`) changes nothing.
    pub fn shrink(&mut self, new: Option<Bitmap>, nbits: usize) {
        let Some(mut new) = new else { return };
        if self.shrink_nbits() != nbits {
            return;
        }
        let Some(map) = &self.map else { return };
        new.copy_and_extend(map);
        // INVARIANT: `shrink_nbits() == nbits` means the last set bit is below
        // a quarter of the old size, so it fits in the new one.
        self.map = Some(new);
    }

    /// `dbitmap_acquire_next_zero_bit`: finds the smallest zero bit at or
    /// above `offset` and sets it, or fails with [`NoSpace`].
    ///
    /// # Panics
    ///
    /// When the map is disabled: the C code would dereference NULL. Callers
    /// check [`DBitmap::enabled`] first.
    pub fn acquire_next_zero_bit(&mut self, offset: usize) -> Result<usize, NoSpace> {
        let map = self.map.as_mut().expect("acquire on a disabled dbitmap");
        let bit = map.next_zero_bit(offset).ok_or(NoSpace)?;
        map.set_bit(bit);
        Ok(bit)
    }

    /// The smallest zero bit at or above `offset`, without setting it.
    pub fn next_zero_bit(&self, offset: usize) -> Option<usize> {
        self.map.as_ref()?.next_zero_bit(offset)
    }

    /// Sets `bit` (ignored when disabled or out of range).
    pub fn set_bit(&mut self, bit: usize) {
        if let Some(map) = &mut self.map {
            map.set_bit(bit);
        }
    }

    /// `dbitmap_clear_bit` (ignored when disabled or out of range). The June
    /// 2024 version never clears bit 0.
    pub fn clear_bit(&mut self, bit: usize) {
        if bit == 0 && self.version.clear_bit_spares_zero() {
            return;
        }
        if let Some(map) = &mut self.map {
            map.clear_bit(bit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dmap_with(nbits: usize, bits: &[usize]) -> DBitmap {
        let mut map = Bitmap::new(nbits, Gfp::Kernel).unwrap();
        bits.iter().for_each(|&b| map.set_bit(b));
        DBitmap {
            map: Some(map),
            version: Version::CMainline,
            dangling: false,
            double_frees: 0,
        }
    }

    #[test]
    fn init_failure_disables() {
        assert!(DBitmap::init(Gfp::Kernel).enabled());
        let d = DBitmap::init(Gfp::Fail);
        assert!(!d.enabled());
        assert_eq!((d.nbits(), d.grow_nbits(), d.shrink_nbits()), (0, 0, 0));
    }

    #[test]
    fn acquire_sets_at_once_and_reports_enospc() {
        let mut d = dmap_with(64, &[0]);
        assert_eq!(d.acquire_next_zero_bit(0), Ok(1));
        assert!(d.test_bit(1));
        assert_eq!(d.acquire_next_zero_bit(63), Ok(63));
        assert_eq!(d.acquire_next_zero_bit(63), Err(NoSpace));
        assert_eq!(d.acquire_next_zero_bit(64), Err(NoSpace));
    }

    #[test]
    fn grow_is_unbounded_and_wraps_like_unsigned_int() {
        assert_eq!(dmap_with(64, &[]).grow_nbits(), 128);
        // The C shift has no ceiling: 2^31 << 1 is 0 in 32 bits. (No map
        // that large can be allocated: this only shows the arithmetic.)
        assert_eq!(((1u32 << 31) << 1) as usize, 0);
        assert_eq!(
            DBitmap::zalloc(1 << 31, Gfp::Kernel),
            None,
            "beyond MAX_LEN"
        );
    }

    #[test]
    fn grow_commit_rules() {
        let mut d = dmap_with(64, &[0, 63]);
        d.grow(DBitmap::zalloc(128, Gfp::Kernel), 128);
        assert_eq!(d.nbits(), 128);
        assert_eq!(d.used_ids().collect::<Vec<_>>(), [0, 63]);
        let before = d.clone();
        d.grow(DBitmap::zalloc(128, Gfp::Kernel), 128); // stale: not larger
        assert_eq!(d, before);
        d.grow(None, 256); // failed allocation: disabled for good
        assert!(!d.enabled());
        d.grow(DBitmap::zalloc(512, Gfp::Kernel), 512);
        assert!(!d.enabled(), "a disabled map never comes back");
    }

    #[test]
    fn shrink_policy_and_exact_size_commit() {
        assert_eq!(dmap_with(64, &[]).shrink_nbits(), 0);
        assert_eq!(dmap_with(128, &[]).shrink_nbits(), 64);
        assert_eq!(dmap_with(128, &[31]).shrink_nbits(), 64);
        assert_eq!(dmap_with(128, &[32]).shrink_nbits(), 0);
        assert_eq!(dmap_with(1024, &[255]).shrink_nbits(), 512);
        assert_eq!(dmap_with(1024, &[256]).shrink_nbits(), 0);

        // Prepared 512, but meanwhile the map emptied: the target is now 64,
        // not exactly 512, so C refuses (where IdPool would commit).
        let mut d = dmap_with(1024, &[3]);
        let nbits = d.shrink_nbits();
        d.clear_bit(3);
        let before = d.clone();
        d.shrink(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
        assert_eq!(d, before);
        // Recomputed target matches: commit, keeping the bits.
        d.set_bit(7);
        d.shrink(DBitmap::zalloc(512, Gfp::Kernel), 512);
        assert_eq!(d.nbits(), 512);
        assert_eq!(d.used_ids().collect::<Vec<_>>(), [7]);
        // A failed shrink allocation changes nothing.
        let before = d.clone();
        d.shrink(None, 256);
        assert_eq!(d, before);
    }

    /// `dbitmap_shrink_nbits` in the v3 posting tested `bit <= nbits / 4`:
    /// with the last bit exactly at a quarter it shrinks to half, and the
    /// merged versions (`<`) do not.
    #[test]
    fn dbitmap_shrink_nbits_v3_off_by_one() {
        for (version, expected) in [
            (Version::CV3, 64),
            (Version::C2024_06, 0),
            (Version::CMainline, 0),
        ] {
            let mut d = dmap_with(128, &[32]);
            d.version = version;
            assert_eq!(d.shrink_nbits(), expected, "{version}");
            let mut d = dmap_with(128, &[31]);
            d.version = version;
            assert_eq!(d.shrink_nbits(), 64, "{version}: below a quarter");
        }
        // The v3 map commits the shrink to 64 with bit 32 set. Half is still
        // above a quarter, so no bit is lost: the off-by-one shows in the
        // capacity only.
        let mut d = DBitmap::init_with(Gfp::Kernel, Version::CV3);
        d.grow(DBitmap::zalloc(128, Gfp::Kernel), 128);
        d.set_bit(32);
        d.shrink(DBitmap::zalloc(64, Gfp::Kernel), 64);
        assert_eq!(d.nbits(), 64);
        assert_eq!(d.used_ids().collect::<Vec<_>>(), [0, 32]);
    }

    /// `dbitmap_init` and `dbitmap_clear_bit` across versions: June 2024
    /// reserves bit 0 for good, v3 reserves it but clears it like any other,
    /// mainline does not reserve it.
    #[test]
    fn dbitmap_init_and_clear_bit_reserve_zero_by_version() {
        let mut june = DBitmap::init_with(Gfp::Kernel, Version::C2024_06);
        june.clear_bit(0);
        assert!(june.test_bit(0), "June 2024: BIT(0) always set");
        assert_eq!(june.acquire_next_zero_bit(0), Ok(1));
        let mut v3 = DBitmap::init_with(Gfp::Kernel, Version::CV3);
        assert!(v3.test_bit(0));
        v3.clear_bit(0);
        assert!(!v3.test_bit(0), "v3: no guard");
        assert_eq!(v3.acquire_next_zero_bit(0), Ok(0));
        let mainline = DBitmap::init_with(Gfp::Kernel, Version::CMainline);
        assert_eq!(mainline.used_ids().count(), 0);
        assert_eq!(mainline, DBitmap::init(Gfp::Kernel));
    }

    /// The June 2024 `dbitmap_free` (and v3's) leaves the pointer behind:
    /// init, a failed grow and the release free the map twice; mainline
    /// frees it once. Only the failed grow's free leaves it dangling for a
    /// map that was enabled: a stale failed grow or a map disabled from
    /// init never double-frees.
    #[test]
    fn dbitmap_free_double_free_by_version() {
        for (version, expected) in [
            (Version::C2024_06, 1),
            (Version::CV3, 1),
            (Version::CMainline, 0),
        ] {
            let mut d = DBitmap::init_with(Gfp::Kernel, version);
            d.grow(None, 128);
            assert_eq!((d.enabled(), d.map_dangles()), (false, expected == 1));
            assert_eq!(d.double_frees(), 0, "{version}: the first free is fine");
            d.free();
            assert_eq!(d.double_frees(), expected, "{version}");
            d.free();
            assert_eq!(d.double_frees(), 2 * expected, "{version}: still dangling");

            // Init failed: the pointer was NULL, kfree(NULL) is fine.
            let mut d = DBitmap::init_with(Gfp::Fail, version);
            d.free();
            d.free();
            assert_eq!(d.double_frees(), 0, "{version}");
            // A stale failed grow leaves the map alone.
            let mut d = DBitmap::init_with(Gfp::Kernel, version);
            d.grow(DBitmap::zalloc(128, Gfp::Kernel), 128);
            d.grow(None, 128);
            assert!(d.enabled());
            d.free();
            assert_eq!(d.double_frees(), 0, "{version}");
        }
    }

    #[test]
    fn zalloc_fails_at_every_size_when_told() {
        assert_eq!(DBitmap::zalloc(64, Gfp::Fail), None);
        assert_eq!(DBitmap::zalloc(64, Gfp::Kernel).map(|m| m.len()), Some(64));
    }
}
