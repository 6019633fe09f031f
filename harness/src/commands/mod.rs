//! The `binder_commands` target: both Binder drivers at the level of the
//! commands userspace sends (`idpool::driver`), each against its naive
//! model ([`oracle`]), and against each other.

pub mod oracle;
