//! SPEC.md's capacity formulas, written out plainly. The models of both
//! levels compute capacities with these and nothing else; none of them calls
//! the allocator.

/// The smallest capacity of either pool.
pub const MIN: usize = 64;
/// The longest bitmap.
pub const MAX_LEN: usize = i32::MAX as usize;

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
        Policy::Rust => Some(cap * 2).filter(|&n| n <= MAX_LEN),
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
        Some(last) if last < cap / 4 => Some(match policy {
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
