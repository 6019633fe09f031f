//! `kernel::sync::{SpinLock, new_spinlock}`, which the `IdPool` example of
//! dropping the lock to grow imports. The example is `no_run`: it is only
//! compiled. The lock is a `std::sync::Mutex`.

use std::sync::{Mutex, MutexGuard};

/// A lock around `T`.
#[derive(Debug, Default)]
pub struct SpinLock<T>(Mutex<T>);

/// The guard of a [`SpinLock`]: the lock is held until it is dropped.
#[derive(Debug)]
pub struct Guard<'a, T>(MutexGuard<'a, T>);

impl<T> SpinLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        SpinLock(Mutex::new(value))
    }

    /// Takes the lock.
    ///
    /// # Panics
    ///
    /// When a thread panicked while holding it.
    pub fn lock(&self) -> Guard<'_, T> {
        Guard(self.0.lock().expect("a thread panicked holding the lock"))
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// `new_spinlock!(value)`: a [`SpinLock`] around `value` (the kernel's
/// returns an initialiser; nothing here needs one).
#[macro_export]
macro_rules! new_spinlock {
    ($value:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::SpinLock::new($value)
    };
}

pub use crate::new_spinlock;
