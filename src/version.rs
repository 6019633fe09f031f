//! Upstream versions of the two drivers' handle allocation, as data.
//!
//! A handle table is built with a [`Version`]; every rule that changed in
//! upstream's history is a method of it, and the code consults the rule,
//! not the version, so versions share every line where their behaviour is
//! the same.
//!
//! The table of versions and their pools is on [`Version`].

use core::fmt;
use core::str::FromStr;

/// Which Binder driver a version belongs to; it decides the protocol of the
/// handle table's operations (see [`Operation`](crate::Operation)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Driver {
    /// `drivers/android/binder.c`.
    C,
    /// `drivers/android/binder/process.rs`.
    Rust,
}

/// One upstream version of the handle allocator.
///
/// | version | short name | what it is | the record |
/// | --- | --- | --- | --- |
/// | [`Version::C2024_06`] | `c-2024-06` | C, as first merged | posted 12 June 2024 (`20240612042535.1556708-1-cmllamas@google.com`), committed 3 July 2024 as 15d9da3f818c; `dbitmap_free` as such until 3ebcd3460cad |
/// | [`Version::CV3`] | `c-v3` | C, the v3 posting | 16 May 2024 (`20240516133952.4072309-1-cmllamas@google.com`); its threshold quoted by the review (`CAH5fLgjP8eozdA3wSari2LHyVUzaOMNTU12JWb2rzGgy9RRpsg@mail.gmail.com`) |
/// | [`Version::CMainline`] | `c-mainline` | C, mainline | the header and `binder.c` as shipped in 6.12.118 and 7.3.4, after 11512c197d38 ("binder: fix descriptor lookup for context manager") and 3ebcd3460cad ("binder: fix double-free in dbitmap") |
/// | [`Version::RustV1`] | `rust-v1` | Rust, before `warn_on!` (the name is historical: see below) | the v5 posting, 12 November 2025 (`20251112-binder-bitmap-v5-6-8b9d7c7eca82@google.com`), v4 reportedly the same; *not* the v1 posting (20 October 2025, `20251020-binder-bitmap-v1-2-879bec9cddc1@google.com`), which used a raw `BitmapVec` |
/// | [`Version::RustMainline`] | `rust-mainline` | Rust, mainline | the v6 posting, 25 November 2025 (`20251125-binder-bitmap-v6-6-dedaf1d05a98@google.com`), committed as 5ba71195a9cb |
///
/// `docs/history-labels.md` checks each name against the record.
///
/// # Which pool goes with which version
///
/// The C versions run the C driver's protocol and need a pool that behaves
/// like a C one: [`DBitmap`](crate::DBitmap) (which takes the version too,
/// for the rules that live in `dbitmap.h`) or
/// [`LinearScan`](crate::LinearScan) (the slow walk alone, as a C dbitmap
/// that is disabled from the start). The Rust versions run the Rust
/// driver's protocol on [`IdPool`](crate::IdPool) or
/// [`LinearScan`](crate::LinearScan) (the Rust driver before the bitmap).
/// [`Flavour::supports`](crate::Flavour::supports) says which, and
/// [`Flavour::DEFAULT_VERSION`](crate::Flavour::DEFAULT_VERSION) is what a
/// table gets when nobody asks: the mainline of the pool's own driver
/// (`rust-mainline` for `LinearScan`).
///
/// # Examples
///
/// ```
/// use idpool::{Driver, Version};
///
/// let v: Version = "c-2024-06".parse().unwrap();
/// assert_eq!(v, Version::C2024_06);
/// assert_eq!(v.to_string(), "c-2024-06");
/// assert_eq!(v.driver(), Driver::C);
/// assert!(v.manager_always_gets_zero());
/// assert!("c-v4".parse::<Version>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// C as first merged (posted 12 June 2024, message id
    /// `20240612042535.1556708-1-cmllamas@google.com`; committed 3 July 2024
    /// as 15d9da3f818c, "binder: use bitmap for faster descriptor lookup";
    /// the name is the posting's month): bit 0 is set when the dbitmap is
    /// created and `dbitmap_clear_bit` never clears it; `get_ref_desc_olocked`
    /// gives the context manager's node descriptor 0 without looking at the
    /// map or the tree; everyone else takes the first zero bit
    /// (`dbitmap_acquire_first_zero_bit`), and the slow path
    /// (`slow_desc_lookup_olocked`) starts at 1. Shrink threshold `<`.
    /// `dbitmap_free` leaves the map pointer dangling (see
    /// [`Version::free_leaves_map_dangling`]).
    ///
    /// Its bug (syzbot, July 2024): the context manager dies, another process
    /// becomes the context manager while refs to the old manager's node still
    /// hold descriptor 0; the new manager's node is given 0 as well and the
    /// insert into `refs_by_desc` hits `BUG()`.
    C2024_06,
    /// C, v3 posting (16 May 2024, message id
    /// `20240516133952.4072309-1-cmllamas@google.com`): as
    /// [`Version::C2024_06`], except that
    /// `dbitmap_shrink_nbits` shrinks when `bit <= nbits / 4` (the off-by-one
    /// caught in review, message id
    /// `CAH5fLgjP8eozdA3wSari2LHyVUzaOMNTU12JWb2rzGgy9RRpsg@mail.gmail.com`,
    /// which quotes v3's `bit <= (dmap->nbits >> 2)`) and its
    /// `dbitmap_clear_bit` has no guard for bit 0 (the review does not quote
    /// it; the bit-0 rules are said to have held in v4 too):
    /// dropping the context manager's ref at descriptor 0 clears the reserved
    /// bit, and the next first-zero-bit search hands 0 to a non-manager.
    CV3,
    /// C mainline, as shipped in Debian's 6.12.118 and 7.3.4 (after
    /// 11512c197d38, "binder: fix descriptor lookup for context manager",
    /// and 3ebcd3460cad, "binder: fix double-free in dbitmap", which 6.12
    /// received in a stable update): no reserved bit; descriptors are searched from
    /// an offset, 0 for the context manager's node and 1 otherwise, in the
    /// map (`dbitmap_acquire_next_zero_bit`) or by the slow scan.
    CMainline,
    /// Rust before `warn_on!`: when the pool offers an id that `by_handle`
    /// holds, log (`pr_err!`), acquire the id and search again.
    ///
    /// The name is historical and kept (it is in traces, docs and results):
    /// this is the behaviour of the v5 posting of "rust_binder: use bitmap
    /// for allocation of handles" (12 November 2025, message id
    /// `20251112-binder-bitmap-v5-6-8b9d7c7eca82@google.com`; v4 reportedly
    /// the same), whose review asked for `warn_on!`. The v1 posting (20
    /// October 2025, `20251020-binder-bitmap-v1-2-879bec9cddc1@google.com`)
    /// used a raw `BitmapVec`, not `IdPool`, and is not modelled. Elsewhere
    /// in the project "the first posting" means this version.
    RustV1,
    /// Rust mainline (the v6 posting, 25 November 2025, message id
    /// `20251125-binder-bitmap-v6-6-dedaf1d05a98@google.com`, committed as
    /// 5ba71195a9cb): on that mismatch, log, `warn_on!`,
    /// acquire the id and fail with `EINVAL`.
    #[default]
    RustMainline,
}

/// What the insert does when the pool offers an id that `by_handle` already
/// holds (the two structures disagree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MismatchReaction {
    /// Rust first posting: `pr_err!`, acquire the id, search again.
    AcquireAndContinue,
    /// Rust mainline: `pr_err!`, `warn_on!`, acquire the id, `EINVAL`.
    WarnEinval,
    /// C: the walk of `refs_by_desc` in `binder_get_ref_for_node_olocked`
    /// finds the descriptor and calls `BUG()`.
    Bug,
}

impl Version {
    /// Every version, oldest C first, then Rust.
    pub const ALL: [Version; 5] = [
        Version::C2024_06,
        Version::CV3,
        Version::CMainline,
        Version::RustV1,
        Version::RustMainline,
    ];

    /// The short name: `c-2024-06`, `c-v3`, `c-mainline`, `rust-v1`,
    /// `rust-mainline`. [`FromStr`] parses it back.
    pub fn name(self) -> &'static str {
        match self {
            Version::C2024_06 => "c-2024-06",
            Version::CV3 => "c-v3",
            Version::CMainline => "c-mainline",
            Version::RustV1 => "rust-v1",
            Version::RustMainline => "rust-mainline",
        }
    }

    /// The driver, hence the protocol.
    pub fn driver(self) -> Driver {
        match self {
            Version::C2024_06 | Version::CV3 | Version::CMainline => Driver::C,
            Version::RustV1 | Version::RustMainline => Driver::Rust,
        }
    }

    /// `dbitmap_init` sets bit 0 (descriptor 0 is reserved for the context
    /// manager) and the descriptor search needs no offset.
    pub fn reserves_bit_zero(self) -> bool {
        matches!(self, Version::C2024_06 | Version::CV3)
    }

    /// `dbitmap_clear_bit` leaves bit 0 alone (the June 2024 guard "BIT(0)
    /// should always set for the context manager"). v3 had no guard.
    pub fn clear_bit_spares_zero(self) -> bool {
        matches!(self, Version::C2024_06)
    }

    /// `get_ref_desc_olocked` returns descriptor 0 for the context manager's
    /// node without looking at the map or the tree.
    pub fn manager_always_gets_zero(self) -> bool {
        matches!(self, Version::C2024_06 | Version::CV3)
    }

    /// `dbitmap_shrink_nbits` shrinks when the last bit is `<= nbits / 4`
    /// (v3) rather than `< nbits / 4`.
    pub fn shrink_threshold_inclusive(self) -> bool {
        matches!(self, Version::CV3)
    }

    /// `dbitmap_free` frees the map but leaves `dmap->map` pointing at it,
    /// as merged in June 2024 (commit 15d9da3f818c) until upstream's
    /// "binder: fix double-free in dbitmap" (commit 3ebcd3460cad,
    /// September 2025) cleared it. A failed grow frees the map through
    /// `dbitmap_free`; the process's release (`binder_deferred_release`)
    /// calls `dbitmap_free` again and frees it twice. [`DBitmap`] counts
    /// such frees ([`DBitmap::double_frees`]) instead of doing the right
    /// thing silently.
    ///
    /// The v3 posting is taken to have June 2024's `dbitmap_free` (no
    /// version of it before the fix cleared the pointer). C mainline is the
    /// header as shipped today, with the fix.
    ///
    /// [`DBitmap`]: crate::DBitmap
    /// [`DBitmap::double_frees`]: crate::DBitmap::double_frees
    pub fn free_leaves_map_dangling(self) -> bool {
        matches!(self, Version::C2024_06 | Version::CV3)
    }

    /// What an insert does on a pool/`by_handle` mismatch.
    pub fn on_mismatch(self) -> MismatchReaction {
        match self {
            Version::C2024_06 | Version::CV3 | Version::CMainline => MismatchReaction::Bug,
            Version::RustV1 => MismatchReaction::AcquireAndContinue,
            Version::RustMainline => MismatchReaction::WarnEinval,
        }
    }

    /// The insert refuses a dead process with `ESRCH`. Only the Rust driver
    /// checks: the C insert path (`binder_inc_ref_for_node`,
    /// `binder_get_ref_for_node_olocked`, `get_ref_desc_olocked`) never reads
    /// `proc->is_dead`.
    pub fn insert_checks_dead(self) -> bool {
        self.driver() == Driver::Rust
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no [`Version`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseVersionError(pub String);

impl fmt::Display for ParseVersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown version {:?}; expected one of", self.0)?;
        for v in Version::ALL {
            write!(f, " {v}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseVersionError {}

impl FromStr for Version {
    type Err = ParseVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| ParseVersionError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in Version::ALL {
            assert_eq!(v.to_string().parse::<Version>(), Ok(v));
        }
        assert_eq!(Version::default(), Version::RustMainline);
    }
}
