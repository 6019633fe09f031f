//! Which of the two Binder drivers a kernel has. Its own module, below
//! both [`crate::wire`] (which names it in the executor's configuration
//! and records) and [`crate::klog`] (which classifies each driver's log
//! lines), so that neither imports the other for it.

use serde::{Deserialize, Serialize};

/// Which driver the kernel has, which decides how devices are made and
/// where the per-process debug text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// `drivers/android/binder.c` as a module: devices from the module's
    /// `devices=` parameter, state in debugfs.
    C,
    /// `drivers/android/binder/` built in: devices made in binderfs with
    /// `BINDER_CTL_ADD`, state in binderfs's `binder_logs/`.
    Rust,
}

impl Driver {
    /// `c` or `rust`.
    pub fn name(self) -> &'static str {
        match self {
            Driver::C => "c",
            Driver::Rust => "rust",
        }
    }
}
