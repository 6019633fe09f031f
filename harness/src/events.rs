//! How often a run took the interesting paths ([`Events`]): what the smoke
//! test asserts random inputs reach, what `seed-corpus` keeps one input per
//! shape of, and what `triage repro` prints after a passing run.

/// Declares [`Events`] and its helpers from one list of counters, so that
/// a new counter cannot be forgotten by `counts` or `merge`.
macro_rules! events {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// How often the interesting paths were taken in a run. The smoke
        /// test asserts that random inputs reach all of them.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Events {
            $($(#[doc = $doc])* pub $name: u32,)*
        }

        impl Events {
            /// Every counter with its name.
            pub fn counts(&self) -> Vec<(&'static str, u32)> {
                vec![$((stringify!($name), self.$name),)*]
            }

            /// Adds `other`'s counts to these.
            pub fn merge(&mut self, other: Events) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

events! {
    /// A grow raised the capacity.
    grow_committed,
    /// A grow commit found the pool already as large (stale resizer).
    stale_grow_ignored,
    /// A grow request was refused at the 2^30 ceiling.
    grow_at_ceiling,
    /// A shrink lowered the capacity.
    shrink_committed,
    /// A shrink commit re-validated and refused.
    shrink_refused,
    /// A stale shrink raised the capacity (the kernel's quirk).
    shrink_raised_capacity,
    /// An injected allocation failure took effect.
    alloc_failed,
    /// An acquire found the pool full.
    pool_full,
    /// A dbitmap was disabled.
    disabled,
    /// A disabled dbitmap's table found an id with the linear scan.
    scan_fallback,
    /// A dead process refused an insert.
    dead_refused,
    /// A step ran with a capacity of 4096 ids or more.
    deep,
    /// A critical section ran while another thread's operation was between
    /// two of its steps (concurrent target only).
    interleaved,
    /// A design driven beside mainline was compared with it at a capacity
    /// of 4096 ids or more (`pool_ops`: the fast pool).
    design_deep,
    /// A reclaim gave ids back (the shrinker).
    reclaimed,
    /// The augmented tree handed out a handle of 64 or more.
    tree_wide,
    /// A context manager's insert found the map full, dropped the lock,
    /// and at its grow commit handle 0 had changed hands (concurrent
    /// target only).
    manager_grow_zero_moved,
    /// A context manager's insert found the map full, dropped the lock,
    /// and another context manager's node was inserted before its grow
    /// commit (concurrent target only).
    manager_grow_other_manager,
    /// The process died while an insert had dropped the lock, and the
    /// insert then finished (refused or not, per version; concurrent
    /// target only).
    killed_in_window,
    /// A dead process's table took a new reference (the C driver, which
    /// does not look).
    dead_inserted,
    /// A lookup of a node (concurrent target only).
    lookups,
    /// A handle table was built from given handles, one of them above
    /// 65,535 (`start-from`).
    started_above_16_bits,
    /// A pool built with an injected allocation failure was refused (the
    /// Rust `with_capacity` above one word; `pool_ops`).
    reset_refused,
    /// A map was disabled at `dbitmap_init` (its allocation failed) and the
    /// run went on with it (`dbitmap_ops`, `kernel_dbitmap`).
    disabled_at_init,
    /// A call at or past the capacity (a release, or a search from there)
    /// reached mainline's `IdPool` too, which answered as ours does
    /// (`None`, nothing changed) and logged each such release
    /// (`kernel_idpool`).
    out_of_range,
    /// A C grow size was asked at a size where the 32-bit shift wraps
    /// (2^31 bits and up; computed, not allocated).
    grow_target_wrapped,
    /// A corruption changed a bit of the pool (concurrent target only).
    corrupted,
    /// A pick met a pool/`by_handle` mismatch and the version warned and
    /// returned `EINVAL`, as its model expected (Rust mainline; concurrent
    /// target only).
    mismatch_einval,
    /// A pick met a mismatch and the version logged it and searched on, as
    /// its model expected (Rust's first posting; concurrent target only).
    mismatch_search_on,
    /// A pick met a mismatch and the kernel's `BUG()` fired, as the
    /// version's model expected after the corruption (C; concurrent target
    /// only).
    mismatch_crash,
    /// The C and the Rust driver differed in a way a known rule explains
    /// (`binder_commands`).
    drivers_differ,
    /// A process became the context manager (`binder_commands`).
    manager_registered,
    /// A process became the context manager after an earlier one died
    /// (`binder_commands`).
    manager_replaced,
    /// A transaction's object was translated for its receiver
    /// (`binder_commands`).
    objects_translated,
    /// A transaction's object reached its receiver as handle 0
    /// (`binder_commands`).
    handle_zero_received,
    /// A death notification was read (`binder_commands`).
    death_delivered,
    /// `BINDER_GET_NODE_INFO_FOR_REF` answered with counts
    /// (`binder_commands`).
    node_info_answered,
    /// A process held more than 64 references, past its handle map's
    /// first grow (`binder_commands`).
    refs_past_one_word,
}
