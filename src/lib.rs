//! A faithful model of the Android Binder handle allocator, for fuzzing and
//! differential testing.
//!
//! Every process that talks Binder holds references ("handles", 32-bit ids)
//! to remote objects. A new reference gets the **smallest unused id at or
//! above a start**: 0 for the context manager, 1 for everyone else, because
//! userspace indexes vectors with handles. Both Binder drivers used to find
//! that id by walking the ordered tree of handles until a gap appeared, which
//! costs O(n) per new reference under the process lock. They now keep a
//! growable bitmap of used ids beside the tree: [`IdPool`] in the Rust
//! driver, [`DBitmap`] in the C driver.
//!
//! A bitmap must sometimes grow (the pool is full) or shrink (it is mostly
//! empty), and growing needs an allocation that may sleep. So a resize is
//! *requested* under the lock, *allocated* with the lock dropped, and
//! *committed* under the lock again; in between, other threads may insert,
//! release, grow or shrink. Every commit must re-check the current state, and
//! the bitmap and the tree of handles must never disagree.
//!
//! This crate reproduces those pieces with the kernel's names and semantics:
//!
//! - [`Bitmap`]: fixed length, inline up to 64 bits, word-at-a-time search;
//! - [`IdPool`]: the Rust driver's pool and its resize protocol;
//! - [`DBitmap`]: the C driver's pool, which disables itself when an
//!   allocation fails and falls back to the linear scan;
//! - [`HandleTable`] and [`SharedHandleTable`]: Binder's `ProcessNodeRefs`
//!   (`by_handle`, `by_node` and the pool), generic over the [`Flavour`] of id
//!   allocation: [`IdPool`], [`DBitmap`] or the legacy [`LinearScan`];
//! - [`Operation`]: `insert_or_update_handle` and the last reference drop as
//!   explicit step machines, each step one critical section or one
//!   allocation, so that a test can interleave the steps of several threads
//!   in any order it chooses.
//!
//! Each table is built for one upstream [`Version`] (C as first merged, the
//! C v3 posting, C mainline, the first Rust posting, Rust mainline): the
//! version picks the driver's protocol and the rules that changed in
//! upstream's history.
//!
//! Allocation failure is injectable everywhere through [`Gfp::Fail`] and the
//! per-instance [`Faults`] plan (any allocation, or one [`AllocSite`]), and
//! so is a [`Corruption`] of the pool; there is no global state. The
//! kernel's `WARN_ON` is a [`Warning`] the caller drains, not a panic.
//!
//! The crate knows nothing about fuzzing. Deliberate differences from the
//! kernel are stated where they occur: out-of-range bit indexes are ignored
//! (the kernel's non-hardened mode), and a bitmap can be at most
//! [`Bitmap::MAX_LEN`] bits in both flavours.

#![forbid(unsafe_code)]

mod alloc;
mod bitmap;
mod dbitmap;
pub mod driver;
mod fast_pool;
mod id_pool;
mod shrinker;
mod table;
mod version;

pub use alloc::{AllocError, AllocSite, Corruption, Faults, Gfp};
pub use bitmap::Bitmap;
pub use dbitmap::{DBitmap, NoSpace, NBITS_MIN};
pub use fast_pool::{FastPool, FastRequest, FastResizer, FastUnusedId};
pub use id_pool::{IdPool, PoolResizer, ReallocRequest, UnusedId, MIN_CAPACITY};
pub use shrinker::Shrinker;
pub use table::{
    slow_desc_lookup, AugmentedTree, BuildError, Error, Flavour, HandleTable, InvariantViolation,
    LinearScan, Manager, Next, NodeId, NodeRefs, Operation, RefInfo, Request, SharedHandleTable,
    Warning, ID_LIMIT,
};
pub use version::{Driver, MismatchReaction, ParseVersionError, Version};
