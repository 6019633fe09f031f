//! Stand-ins for the kernel's `bitmap` and `id_pool` modules when their
//! source was not found, with the signatures the wrapper calls, so that the
//! crate and its users still build. Nothing can construct them: every
//! constructor panics with the reason, so no other method is ever reached.

fn unavailable() -> ! {
    panic!("{}", crate::provenance())
}

/// Stand-in for `kernel::bitmap`.
pub mod bitmap {
    use super::unavailable;
    use crate::alloc::{AllocError, Flags};

    /// Stand-in for `BitmapVec`.
    pub struct BitmapVec(());

    impl BitmapVec {
        /// As the kernel's.
        pub const MAX_LEN: usize = i32::MAX as usize;
        /// As the kernel's.
        pub const MAX_INLINE_LEN: usize = usize::BITS as usize;

        /// Panics: the source is unavailable.
        pub fn new(_nbits: usize, _flags: Flags) -> Result<Self, AllocError> {
            unavailable()
        }
        /// Unreachable.
        #[allow(clippy::len_without_is_empty)] // as the kernel's
        pub fn len(&self) -> usize {
            unavailable()
        }
        /// Unreachable.
        pub fn set_bit(&mut self, _index: usize) {
            unavailable()
        }
        /// Unreachable.
        pub fn clear_bit(&mut self, _index: usize) {
            unavailable()
        }
        /// Unreachable.
        pub fn next_bit(&self, _start: usize) -> Option<usize> {
            unavailable()
        }
        /// Unreachable.
        pub fn next_zero_bit(&self, _start: usize) -> Option<usize> {
            unavailable()
        }
        /// Unreachable.
        pub fn last_bit(&self) -> Option<usize> {
            unavailable()
        }
        /// Unreachable.
        pub fn copy_and_extend(&mut self, _src: &BitmapVec) {
            unavailable()
        }
    }
}

/// Stand-in for `kernel::id_pool`.
pub mod id_pool {
    use super::unavailable;
    use crate::alloc::{AllocError, Flags};

    /// Stand-in for `IdPool`.
    pub struct IdPool(());
    /// Stand-in for `ReallocRequest`.
    pub struct ReallocRequest(());
    /// Stand-in for `PoolResizer`.
    pub struct PoolResizer(());
    /// Stand-in for `UnusedId`.
    pub struct UnusedId<'pool>(core::marker::PhantomData<&'pool mut IdPool>);

    impl ReallocRequest {
        /// Unreachable.
        pub fn realloc(&self, _flags: Flags) -> Result<PoolResizer, AllocError> {
            unavailable()
        }
    }

    impl IdPool {
        /// Panics: the source is unavailable.
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            unavailable()
        }
        /// Panics: the source is unavailable.
        pub fn with_capacity(_num_ids: usize, _flags: Flags) -> Result<Self, AllocError> {
            unavailable()
        }
        /// Unreachable.
        pub fn capacity(&self) -> usize {
            unavailable()
        }
        /// Unreachable.
        pub fn shrink_request(&self) -> Option<ReallocRequest> {
            unavailable()
        }
        /// Unreachable.
        pub fn shrink(&mut self, _resizer: PoolResizer) {
            unavailable()
        }
        /// Unreachable.
        pub fn grow_request(&self) -> Option<ReallocRequest> {
            unavailable()
        }
        /// Unreachable.
        pub fn grow(&mut self, _resizer: PoolResizer) {
            unavailable()
        }
        /// Unreachable.
        pub fn find_unused_id(&mut self, _offset: usize) -> Option<UnusedId<'_>> {
            unavailable()
        }
        /// Unreachable.
        pub fn release_id(&mut self, _id: usize) {
            unavailable()
        }
    }

    impl UnusedId<'_> {
        /// Unreachable.
        pub fn as_usize(&self) -> usize {
            unavailable()
        }
        /// Unreachable.
        pub fn as_u32(&self) -> u32 {
            unavailable()
        }
        /// Unreachable.
        pub fn acquire(self) -> usize {
            unavailable()
        }
    }
}
