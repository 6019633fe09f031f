//! **Test-only.** Mainline Linux's own `rust/kernel/id_pool.rs` and
//! `rust/kernel/bitmap.rs`, compiled unchanged as the modules [`id_pool`]
//! and [`bitmap`] of this crate, which plays the kernel's `kernel` crate in
//! user space, behind a safe wrapper ([`KernelIdPool`], [`KernelBitmapVec`])
//! whose API parallels our [`idpool::IdPool`] and [`idpool::Bitmap`]: the
//! real code is an independent side for our reproduction and the model.
//!
//! The kernel files are GPL-2.0 and are compiled into this crate, so the
//! crate is GPL-2.0-only, `publish = false`, and only tests and fuzz
//! targets may depend on it. No kernel code is kept in this repository:
//! `build.rs` finds the files in `$KERNEL_TREE` or in the cache that
//! `ci/kernel-source.sh --release 7.3` fills from Debian's
//! `linux-source-7.3`, and declares the modules with `#[path]`.
//!
//! Without the files the crate still builds: [`available`] is false,
//! [`unavailable_reason`] says why, and constructing a wrapper panics with
//! that reason. Check [`available`] first.
//!
//! # The shim
//!
//! The kernel files import exactly these items, which this crate provides
//! at the paths they use:
//!
//! | import | here |
//! | --- | --- |
//! | `crate::alloc::{AllocError, Flags}`, `kernel::alloc::flags::GFP_KERNEL` | [`alloc`] (and the fault plans, [`alloc::faults`]) |
//! | `crate::bindings`: `bitmap_zalloc`, `bitmap_free`, `__set_bit`, `__clear_bit`, `set_bit`, `clear_bit`, `bitmap_copy_and_extend`, `_find_last_bit`, `_find_next_bit`, `_find_next_zero_bit` | [`bindings`] (ours, in Rust) |
//! | `crate::pr_err` | [`pr_err!`], logged per thread ([`print`](mod@print)) |
//! | `#[macros::kunit_tests(...)]` | the `macros` dependency: an ordinary `#[cfg(test)]` module |
//! | `kernel::prelude::*` of their examples (`GFP_KERNEL`, `ENOSPC`, `Error`, `pr_info!`) | [`prelude`], [`error`], [`pr_info!`] |
//! | `kernel::sync::{SpinLock, new_spinlock}` of a `no_run` example | [`sync`] |
//! | `cfg(CONFIG_64BIT)`, `cfg(CONFIG_RUST_BITMAP_KUNIT_TEST)` | set by `build.rs` |
//! | `cfg(CONFIG_RUST_BITMAP_HARDENED)` | the `hardened` feature ([`HARDENED`]) |
//!
//! `unsafe` code of ours is in [`bindings`] only; every block has a
//! `// SAFETY:` comment (`clippy::undocumented_unsafe_blocks` is denied).
//!
//! # Tests
//!
//! `bitmap.rs`'s KUnit module runs as this crate's unit tests, and the
//! examples of both files, which the kernel runs as KUnit tests too, run as
//! generated `#[test]` functions (see `build.rs`). `cargo test -p
//! kernel-idpool` runs them without `CONFIG_RUST_BITMAP_HARDENED`, and
//! `cargo test -p kernel-idpool --features hardened` with it.

// The kernel files and their examples name this crate `kernel`.
extern crate self as kernel;

pub mod alloc;
pub mod bindings;
pub mod error;
pub mod print;
pub mod sync;

/// What the kernel's examples see through `use kernel::prelude::*`.
pub mod prelude {
    pub use crate::alloc::{flags::*, AllocError, Flags};
    pub use crate::error::{code::*, Error, Result};
    pub use crate::{pr_err, pr_info};
}

// `#[path = "<the kernel file>"] pub mod bitmap;` and `... id_pool;`.
#[cfg(kernel_idpool)]
include!(concat!(env!("OUT_DIR"), "/modules.rs"));

#[cfg(not(kernel_idpool))]
mod unavailable;
#[cfg(not(kernel_idpool))]
pub use unavailable::{bitmap, id_pool};

mod pool;
pub use pool::{
    catch_panic, out_of_range, AllocError, Gfp, KernelBitmapVec, KernelIdPool, KernelPoolResizer,
    KernelReallocRequest, KernelUnusedId, HARDENED,
};

/// Whether mainline's files were found and compiled (`cfg(kernel_idpool)`).
pub fn available() -> bool {
    cfg!(kernel_idpool)
}

/// Why mainline's files are not available, e.g. "no mainline kernel
/// source: run ci/kernel-source.sh --release 7.3 or set KERNEL_TREE (...)";
/// `None` when they are.
pub fn unavailable_reason() -> Option<&'static str> {
    non_empty(env!("KERNEL_IDPOOL_UNAVAILABLE"))
}

/// The directory the files were read from (a kernel tree or the cache).
pub fn source_dir() -> Option<&'static str> {
    non_empty(env!("KERNEL_IDPOOL_DIR"))
}

/// Where the files came from: `linux-source-7.3 <Debian version>`, or
/// `kernel tree <VERSION.PATCHLEVEL.SUBLEVEL>` for `KERNEL_TREE`.
pub fn source_version() -> Option<&'static str> {
    non_empty(env!("KERNEL_IDPOOL_VERSION"))
}

/// The sha256 of the compiled `rust/kernel/id_pool.rs`, in hex.
pub fn id_pool_sha256() -> Option<&'static str> {
    non_empty(env!("KERNEL_IDPOOL_ID_POOL_SHA256"))
}

/// The sha256 of the compiled `rust/kernel/bitmap.rs`, in hex.
pub fn bitmap_sha256() -> Option<&'static str> {
    non_empty(env!("KERNEL_IDPOOL_BITMAP_SHA256"))
}

/// One line for a target's or a test's output: what was compiled, or why not.
pub fn provenance() -> String {
    match unavailable_reason() {
        Some(reason) => format!("kernel IdPool unavailable: {reason}"),
        None => format!(
            "kernel IdPool: {} ({}), id_pool.rs sha256 {}, bitmap.rs sha256 {}{}",
            source_dir().unwrap_or("?"),
            source_version().unwrap_or("version unknown"),
            id_pool_sha256().unwrap_or("unknown"),
            bitmap_sha256().unwrap_or("unknown"),
            if HARDENED {
                ", CONFIG_RUST_BITMAP_HARDENED"
            } else {
                ""
            },
        ),
    }
}

fn non_empty(s: &'static str) -> Option<&'static str> {
    (!s.is_empty()).then_some(s)
}

/// The examples of the kernel files, as KUnit runs them (see `build.rs`).
#[cfg(all(test, kernel_idpool))]
mod kunit_doctests {
    include!(concat!(env!("OUT_DIR"), "/doctests.rs"));
}
