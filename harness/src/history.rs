//! Upstream history as part of the program: which version of each driver a
//! run follows, what each version does (stated here from `docs/spec.md`'s
//! "Upstream history", not read from [`idpool::Version`]'s rule methods),
//! and which findings are the known upstream bugs.
//!
//! # Versions in the program
//!
//! A `handle_table` program starts with a header byte ([`Versions::decode`])
//! that picks the C version of the `dbitmap` table, the Rust version of the
//! `IdPool` table (the legacy linear scan follows the Rust version: it has
//! no bits, so only the dead-process rule of its driver matters), and
//! whether each is also run beside the version next to it in upstream's
//! history (`versus`): C v3 beside C June 2024, Rust's first posting beside
//! Rust mainline. Mainline is drawn for half of the header values of each
//! driver, so mainline coverage is not diluted; the header byte 0 is
//! mainline for both drivers with no `versus`. A `concurrent_resize`
//! program carries one version, of its pool's driver. A trace names the
//! versions it needs with `version <name>` and `versus <name>` lines; a
//! trace without them is mainline, so every trace written before versions
//! existed keeps its meaning.
//!
//! # What is a finding on a historical version
//!
//! Each version is checked against a model of what that version means to
//! do ([`Rules`]): its reserved bit 0, its shrink threshold, its reaction
//! to a pool/`by_handle` mismatch. The model never predicts a `BUG()` that
//! the version's own rules did not intend: for the context manager the
//! model hands out the smallest descriptor that is free, as every version
//! meant to, so a version that gives a descriptor twice diverges from its
//! own model, and that is the finding ([`Check::KernelCrash`]). Two
//! versions run side by side on the same program that behave differently
//! are the other kind of finding ([`Check::VersionsDiffer`]).
//!
//! Those findings are real, and they are upstream's, found and fixed
//! years ago: a campaign on today's allocator must not stop at them every
//! few seconds. So the findings listed in [`Finding`] are *known*. A
//! `handle_table` run that meets one retires the side it is about (or the
//! comparison of two versions) and goes on with the others to the end of
//! the program ([`Retired`]), so the mainline sides of the same program
//! stay checked; it fails with the known finding only at the end, if
//! nothing else failed. A fuzz target (and the corpus replay of `cargo
//! test`) then passes quietly, unless `IDPOOL_HISTORY` names the finding
//! (`collision`, `v3-threshold`, `rust-mismatch`, `v3-zero`,
//! `double-free`, ..., or `all`), which is what `ci/history.sh` sets. (A
//! `concurrent_resize` program runs one table on one version: there is no
//! other side to go on with; `kernel_dbitmap`'s historical header meets its
//! double free at a release, and the run goes on with the next pool.)
//! Anything else is always a crash: a historical
//! version diverging from its own model in any other way, mainline
//! diverging at all, an unexpected warning. The triage tool and the
//! regression tests see every failure as a value, known or not; a
//! regression that reproduces a known finding says so in its header
//! (`# expect: <signature>`) and must fail exactly that way.

use crate::check::{Check, Checked, Detail, Failure, Flavour};
use crate::events::Events;
use arbitrary::{Arbitrary, Unstructured};
use idpool::{Error, Request, Version};
use std::sync::OnceLock;

/// The versions a `handle_table` program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Versions {
    /// The C version of the `dbitmap` table.
    pub c: Version,
    /// The Rust version of the `IdPool` table and of the linear scan.
    pub rust: Version,
    /// The C version run beside `c` on a second `dbitmap` table, if any.
    pub c_versus: Option<Version>,
    /// The Rust version run beside `rust` on a second `IdPool` table.
    pub rust_versus: Option<Version>,
}

impl Default for Versions {
    fn default() -> Self {
        Versions::MAINLINE
    }
}

impl Versions {
    /// Mainline for both drivers, nothing beside.
    pub const MAINLINE: Versions = Versions {
        c: Version::CMainline,
        rust: Version::RustMainline,
        c_versus: None,
        rust_versus: None,
    };

    /// The versions of header byte `b`: bits 0-1 the C version (0 and 1
    /// mainline, 2 June 2024, 3 v3), bit 2 the Rust version (0 mainline,
    /// 1 first posting), bit 3 "run each beside its neighbour in history"
    /// ([`neighbour`]). The other bits are ignored.
    pub fn decode(b: u8) -> Versions {
        let c = match b & 3 {
            2 => Version::C2024_06,
            3 => Version::CV3,
            _ => Version::CMainline,
        };
        let rust = match b & 4 {
            0 => Version::RustMainline,
            _ => Version::RustV1,
        };
        let versus = b & 8 != 0;
        Versions {
            c,
            rust,
            c_versus: neighbour(c).filter(|_| versus),
            rust_versus: neighbour(rust).filter(|_| versus),
        }
    }

    /// The header byte [`Versions::decode`] reads back as these versions,
    /// if there is one.
    pub fn encode(&self) -> Option<u8> {
        (0..16u8).find(|&b| Versions::decode(b) == *self)
    }

    /// Whether every version is mainline and nothing runs beside.
    pub fn is_mainline(&self) -> bool {
        *self == Versions::MAINLINE
    }
}

impl<'a> Arbitrary<'a> for Versions {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Versions::decode(u8::arbitrary(u)?))
    }
    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(1))
    }
}

/// The version a side-by-side run pairs with `v`: the two C versions that
/// existed before the fix pair with each other (v3 was posted in May 2024,
/// June 2024 is what was merged), Rust's first posting with Rust mainline.
/// C mainline pairs with nothing: June 2024 already crashes against its
/// own model on the programs where the two differ.
pub fn neighbour(v: Version) -> Option<Version> {
    match v.name() {
        "c-2024-06" => Some(Version::CV3),
        "c-v3" => Some(Version::C2024_06),
        "rust-v1" => Some(Version::RustMainline),
        "rust-mainline" => Some(Version::RustV1),
        _ => None,
    }
}

/// What a pool/`by_handle` mismatch does, as the model expects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaction {
    /// C: the descriptor is already in `refs_by_desc`: `BUG()`.
    Crash,
    /// Rust first posting: log, take the id, look again.
    TakeAndSearchOn,
    /// Rust mainline: log, `WARN_ON`, take the id, `EINVAL`.
    TakeWarnEinval,
}

/// What one version does, as the history of `docs/spec.md` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The C driver (else Rust).
    pub c: bool,
    /// The map is created with bit 0 set, for the context manager.
    pub bit_zero_reserved: bool,
    /// Dropping the ref at descriptor 0 leaves bit 0 set.
    pub bit_zero_kept_on_release: bool,
    /// The context manager's node is given descriptor 0 without looking at
    /// the map or the tree. The models do not follow this rule (they hand
    /// the manager the smallest free descriptor, as every version meant
    /// to): where it gives 0 twice, that is the collision ([`Finding`]).
    pub manager_always_zero: bool,
    /// `dbitmap_shrink_nbits` shrinks when the last bit is *at* a quarter
    /// too (`<=`, the off-by-one of the v3 posting).
    pub shrink_at_quarter: bool,
    /// A new ref of a dead process is refused (`ESRCH`).
    pub dead_refused: bool,
    /// What a mismatch between the pool and `by_handle` does.
    pub on_mismatch: Reaction,
}

/// The rules of `version`, one row per version of `docs/spec.md`'s history.
pub fn rules(version: Version) -> Rules {
    // The rows, in the words of the history:
    // - C as first merged: "descriptor 0 was reserved for the context
    //   manager: bit 0 was set when the map was created and never cleared";
    //   "the context manager's node was always given descriptor 0 without
    //   looking at the map or the tree" (until "binder: fix descriptor
    //   lookup for context manager", commit 11512c197d38).
    // - C v3: the same map and the same descriptor 0 for the manager, but
    //   its clear did not spare bit 0 (the guard came with the merged
    //   version), and "`bit <= nbits/4`".
    // - C mainline: no reserved bit; the shrink threshold `<`.
    // - Rust first posting: "on a mismatch ... the id was acquired and the
    //   loop continued"; mainline "returns EINVAL after warn_on!".
    // - Only the Rust insert looks at the process being dead.
    let c = |reserved: bool, kept: bool, manager_zero: bool, at_quarter: bool| Rules {
        c: true,
        bit_zero_reserved: reserved,
        bit_zero_kept_on_release: kept,
        manager_always_zero: manager_zero,
        shrink_at_quarter: at_quarter,
        dead_refused: false,
        on_mismatch: Reaction::Crash,
    };
    let rust = |on_mismatch| Rules {
        c: false,
        bit_zero_reserved: false,
        bit_zero_kept_on_release: false,
        manager_always_zero: false,
        shrink_at_quarter: false,
        dead_refused: true,
        on_mismatch,
    };
    match version.name() {
        "c-2024-06" => c(true, true, true, false),
        "c-v3" => c(true, false, true, true),
        "c-mainline" => c(false, false, false, false),
        "rust-v1" => rust(Reaction::TakeAndSearchOn),
        "rust-mainline" => rust(Reaction::TakeWarnEinval),
        other => unreachable!("a version docs/spec.md does not list: {other}"),
    }
}

/// A known upstream finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Finding {
    /// C June 2024 (and v3): the new context manager's node is given
    /// descriptor 0 while the old manager's ref holds it: `BUG()` (syzbot,
    /// July 2024; fixed upstream by commit 11512c197d38, "binder: fix
    /// descriptor lookup for context manager", Linux 6.11-rc3).
    Collision,
    /// C v3 beside June 2024: the `<=` shrink threshold. v3 shrinks at a
    /// release that leaves the last bit at a quarter of the map, June 2024
    /// does not: the capacities differ, or, when that shrink's allocation
    /// is a planned failure, v3 has consumed one more planned failure.
    V3Threshold,
    /// Rust first posting beside mainline: they differ on a mismatch.
    RustMismatch,
    /// C v3: its clear did not spare bit 0, so once the manager's ref at 0
    /// is dropped a non-manager is given descriptor 0 (a duplicate, and a
    /// `BUG()`, if a new manager's ref took 0 meanwhile).
    V3Zero,
    /// Mainline's C and Rust drivers: a reference to the context manager's
    /// node made by a transaction gets descriptor 0 from C, 1 or more from
    /// Rust (`docs/findings/0001-manager-node-handle-from-transaction.md`).
    ManagerHandle,
    /// Mainline's C and Rust drivers: `BINDER_GET_NODE_INFO_FOR_REF`
    /// answers differently (`docs/findings/0002-node-info-for-ref.md`).
    NodeInfo,
    /// Mainline's Rust driver: a failed `BINDER_SET_CONTEXT_MGR` leaves
    /// node work behind (`docs/findings/0004-failed-set-context-mgr.md`).
    FailedSetManager,
    /// Mainline's drivers: `BC_INCREFS`/`BC_ACQUIRE` 0 whose new reference
    /// cannot be allocated (`docs/findings/0005-handle-zero-increment-fallback.md`).
    ManagerZeroFallback,
    /// Mainline's drivers: a target that dies during translation
    /// (`docs/findings/0006-dying-target-reply.md`).
    DyingTargetReply,
    /// C as merged in June 2024 (15d9da3f818c) until "binder: fix
    /// double-free in dbitmap" (3ebcd3460cad, September 2025):
    /// `dbitmap_free` left the map pointer dangling, so a failed grow
    /// (which frees the map through `dbitmap_free`) followed by the
    /// process's release frees the map twice. A memory-safety finding of
    /// the kernel's own header with the fix reversed (`kernel_dbitmap`'s
    /// historical side), which AddressSanitizer reports under libFuzzer.
    DoubleFree,
    /// Mainline's drivers: the extended error of a failed transaction
    /// (`docs/findings/0008-extended-error.md`).
    ExtendedError,
    /// Mainline's drivers: process work for a thread that is not a looper
    /// (`docs/findings/0009-non-looper-thread.md`).
    NonLooperWork,
    /// Mainline's drivers: `BINDER_FREEZE` on a pid with no Binder process
    /// (`docs/findings/0010-freeze-without-process.md`).
    FreezeWithoutProcess,
    /// Mainline's drivers: the EXT manager's node with another cookie
    /// (`docs/findings/0011-manager-ext-cookie.md`).
    ManagerExtCookie,
    /// Mainline's drivers: `BC_REGISTER_LOOPER` after `BC_ENTER_LOOPER`
    /// (`docs/findings/0012-register-after-enter.md`).
    RegisterAfterEnter,
    /// Mainline's drivers: a freeze notification on a dead node
    /// (`docs/findings/0013-freeze-notify-dead-node.md`).
    FreezeNotifyDeadNode,
    /// Mainline's drivers: `BINDER_GET_NODE_DEBUG_INFO`
    /// (`docs/findings/0014-node-debug-info.md`).
    NodeDebug,
    /// Mainline's drivers: `BR_ONEWAY_SPAM_SUSPECT` once or every time
    /// (`docs/findings/0015-oneway-spam-suspect.md`).
    OnewaySpam,
    /// Mainline's drivers: a freeze notification repeated for an
    /// unchanged state (`docs/findings/0016-freeze-notification-repeated.md`).
    FreezeNotifyRepeated,
    /// Mainline's drivers: a node's first reference-count update on a
    /// thread that exits (`docs/findings/0017-thread-exit-node-work.md`).
    ThreadExitNodeWork,
    /// A call back into a process whose calling thread left: delivered to
    /// the process by C, `BR_DEAD_REPLY` in Rust
    /// (`docs/findings/0018-call-to-exited-caller.md`).
    CallToExitedCaller,
    /// A call to a dead process's node from a thread whose transaction
    /// stack forbids the call: `BR_DEAD_REPLY` in C, `BR_FAILED_REPLY` in
    /// Rust (`docs/findings/0019-dead-target-bad-stack.md`).
    DeadTargetBadStack,
    /// A freeze of a pid with two Binder processes that fails at one: C
    /// and Rust go through them in opposite orders
    /// (`docs/findings/0020-freeze-pid-order.md`).
    FreezePidOrder,
    /// A transaction to handle 0 from another open by the manager's task:
    /// refused by C, delivered by Rust (`docs/findings/0021-manager-task.md`).
    ManagerTask,
    /// A node's work left queued in Rust on a thread that waits for its
    /// reply, after another thread read the node's first `BR_INCREFS`: its
    /// later `BR_RELEASE`/`BR_DECREFS` wait for that thread
    /// (`docs/findings/0022-stale-node-work.md`).
    StaleNodeWork,
}

impl Finding {
    /// Every known finding.
    pub const ALL: [Finding; 25] = [
        Finding::Collision,
        Finding::V3Threshold,
        Finding::RustMismatch,
        Finding::V3Zero,
        Finding::ManagerHandle,
        Finding::NodeInfo,
        Finding::FailedSetManager,
        Finding::ManagerZeroFallback,
        Finding::DyingTargetReply,
        Finding::DoubleFree,
        Finding::ExtendedError,
        Finding::NonLooperWork,
        Finding::FreezeWithoutProcess,
        Finding::ManagerExtCookie,
        Finding::RegisterAfterEnter,
        Finding::FreezeNotifyDeadNode,
        Finding::NodeDebug,
        Finding::OnewaySpam,
        Finding::FreezeNotifyRepeated,
        Finding::ThreadExitNodeWork,
        Finding::CallToExitedCaller,
        Finding::DeadTargetBadStack,
        Finding::FreezePidOrder,
        Finding::ManagerTask,
        Finding::StaleNodeWork,
    ];

    /// The findings of upstream's past versions of the handle table (the
    /// others are differences between mainline's two drivers, which only
    /// the command-level target runs).
    pub const HISTORICAL: [Finding; 4] = [
        Finding::Collision,
        Finding::V3Threshold,
        Finding::RustMismatch,
        Finding::V3Zero,
    ];

    /// The name `IDPOOL_HISTORY` and `ci/history.sh` use.
    pub fn name(self) -> &'static str {
        match self {
            Finding::Collision => "collision",
            Finding::V3Threshold => "v3-threshold",
            Finding::RustMismatch => "rust-mismatch",
            Finding::V3Zero => "v3-zero",
            Finding::ManagerHandle => "manager-handle",
            Finding::NodeInfo => "node-info",
            Finding::FailedSetManager => "failed-set-manager",
            Finding::ManagerZeroFallback => "manager-zero-fallback",
            Finding::DyingTargetReply => "dying-target-reply",
            Finding::DoubleFree => "double-free",
            Finding::ExtendedError => "extended-error",
            Finding::NonLooperWork => "non-looper-work",
            Finding::FreezeWithoutProcess => "freeze-without-process",
            Finding::ManagerExtCookie => "manager-ext-cookie",
            Finding::RegisterAfterEnter => "register-after-enter",
            Finding::FreezeNotifyDeadNode => "freeze-notify-dead-node",
            Finding::NodeDebug => "node-debug",
            Finding::OnewaySpam => "oneway-spam",
            Finding::FreezeNotifyRepeated => "freeze-notify-repeated",
            Finding::ThreadExitNodeWork => "thread-exit-node-work",
            Finding::CallToExitedCaller => "call-to-exited-caller",
            Finding::DeadTargetBadStack => "dead-target-bad-stack",
            Finding::FreezePidOrder => "freeze-pid-order",
            Finding::ManagerTask => "manager-task",
            Finding::StaleNodeWork => "stale-node-work",
        }
    }

    /// The findings of the allocator's history: a historical version of
    /// one driver's handle table against mainline or against its model.
    pub const ALLOCATOR: [Finding; 4] = [
        Finding::Collision,
        Finding::V3Threshold,
        Finding::RustMismatch,
        Finding::V3Zero,
    ];

    /// Whether it is a finding of mainline itself (a difference between
    /// mainline's C and Rust drivers), rather than of a historical version:
    /// its failures name no historical version.
    pub fn of_mainline(self) -> bool {
        matches!(
            self,
            Finding::ManagerHandle
                | Finding::NodeInfo
                | Finding::FailedSetManager
                | Finding::ManagerZeroFallback
                | Finding::DyingTargetReply
                | Finding::ExtendedError
                | Finding::NonLooperWork
                | Finding::FreezeWithoutProcess
                | Finding::ManagerExtCookie
                | Finding::RegisterAfterEnter
                | Finding::FreezeNotifyDeadNode
                | Finding::NodeDebug
                | Finding::OnewaySpam
                | Finding::FreezeNotifyRepeated
                | Finding::ThreadExitNodeWork
                | Finding::CallToExitedCaller
                | Finding::DeadTargetBadStack
                | Finding::FreezePidOrder
                | Finding::ManagerTask
                | Finding::StaleNodeWork
        )
    }

    /// The known finding `failure` is, if it is one: told by its check and
    /// by what the check saw ([`Detail`]), so that another bug on the same
    /// historical version is not taken for a known one:
    /// - the collision: a kernel crash on June 2024 or v3 at an insert of
    ///   the context manager, over descriptor 0 (the descriptor those
    ///   versions give the manager without looking);
    /// - the v3 threshold: v3 beside June 2024 at a release (only a
    ///   release shrinks), returning the same outcome, where v3 halved the
    ///   map and June 2024 kept it (the `<=` shrinks where `<` does not; no
    ///   descriptor differs), or where both kept it and v3 consumed exactly
    ///   one planned failure more (its extra shrink's allocation failed; a
    ///   release allocates nothing else, and June 2024 attempts every
    ///   shrink v3 does but that one);
    /// - the Rust mismatch: Rust mainline failing with its mismatch `EINVAL`
    ///   where the first posting, beside it, does something else (it takes
    ///   the id and searches on);
    /// - v3's bit 0: a new descriptor 0 to a non-manager on v3; if a new
    ///   context manager's ref took 0 after the clear (without looking, so
    ///   without setting the bit), that non-manager's 0 is a duplicate and
    ///   crashes: a kernel crash on v3 at a non-manager's insert over
    ///   descriptor 0 is that finding too; and so is v3 beside June 2024
    ///   giving a non-manager 0 (or crashing over 0) where June 2024 does
    ///   not: seen after a corruption cleared bit 0 in both, which makes
    ///   the 0 (or the crash) what each side's own model predicts, so
    ///   only the comparison of the two shows June 2024's guard; and v3
    ///   beside June 2024 at a release, returning the same, with v3's map
    ///   at the minimum and June 2024's halved: the release emptied v3's
    ///   map, whose bit 0 the release of descriptor 0 had cleared (an
    ///   empty map shrinks to the minimum), where June 2024's kept bit 0
    ///   (its last bit, so it halves).
    pub fn of(failure: &Failure) -> Option<Finding> {
        let on_v3 = failure.flavour.and_then(Flavour::version) == Some(Version::CV3);
        match (&failure.check, &failure.detail) {
            (
                Check::KernelCrash,
                Some(Detail::Crash {
                    version,
                    id: 0,
                    manager: true,
                }),
            ) if rules(*version).manager_always_zero => Some(Finding::Collision),
            (Check::HandleZero, None) if on_v3 => Some(Finding::V3Zero),
            // The kernel's C freeing a map twice on a version whose
            // dbitmap_free leaves the pointer behind.
            (Check::DoubleFree, _)
                if failure
                    .flavour
                    .and_then(Flavour::version)
                    .is_some_and(Version::free_leaves_map_dangling) =>
            {
                Some(Finding::DoubleFree)
            }
            (Check::DriversDiffer, Some(Detail::Drivers { rule })) => {
                Finding::ALL.into_iter().find(|f| f.name() == *rule)
            }
            // v3's bit 0 cleared while a manager's ref that took 0 without
            // looking holds it: the non-manager given 0 collides.
            (
                Check::KernelCrash,
                Some(Detail::Crash {
                    version: Version::CV3,
                    id: 0,
                    manager: false,
                }),
            ) => Some(Finding::V3Zero),
            (Check::VersionsDiffer, Some(detail @ Detail::Versions { versions, .. })) => {
                let at = |v: Version| versions.iter().position(|&x| x == v);
                match (at(Version::CV3), at(Version::C2024_06)) {
                    (Some(v3), Some(june)) => c_pair_finding(detail, v3, june),
                    _ => match (at(Version::RustV1), at(Version::RustMainline)) {
                        (Some(v1), Some(mainline)) => rust_pair_finding(detail, v1, mainline),
                        _ => None,
                    },
                }
            }
            _ => None,
        }
    }
}

/// The known finding a difference between C v3 (at index `v3` of the
/// detail's arrays) and C June 2024 (at `june`) is, if it is one (the
/// rules of [`Finding::of`]).
fn c_pair_finding(detail: &Detail, v3: usize, june: usize) -> Option<Finding> {
    let Detail::Versions {
        request,
        outcomes,
        before,
        capacities,
        pending,
        ..
    } = detail
    else {
        return None;
    };
    let before = *before;
    match request {
        // v3 gave 0 to a non-manager where June 2024, whose clear spares
        // bit 0, did not.
        Request::Insert {
            is_manager: false, ..
        } => {
            let zero = |o: Result<u32, Error>| matches!(o, Ok(0) | Err(Error::KernelBug { id: 0 }));
            (zero(outcomes[v3]) && !zero(outcomes[june])).then_some(Finding::V3Zero)
        }
        Request::Decrement(_) if outcomes[v3] == outcomes[june] => {
            // v3's extra shrink: committed, or its allocation failed.
            let shrank = capacities[v3] * 2 == before && capacities[june] == before;
            let failed_shrink =
                *capacities == [before; 2] && pending[june].checked_sub(pending[v3]) == Some(1);
            // The release emptied v3's map, whose bit 0 an earlier release
            // cleared: an empty map shrinks to the minimum; June 2024's,
            // which kept bit 0, halves.
            let emptied = capacities[v3] == crate::oracle::MIN
                && capacities[june] * 2 == before
                && capacities[june] > crate::oracle::MIN;
            if shrank || failed_shrink {
                Some(Finding::V3Threshold)
            } else {
                emptied.then_some(Finding::V3Zero)
            }
        }
        _ => None,
    }
}

/// The known finding a difference between Rust's first posting (at index
/// `v1`) and Rust mainline (at `mainline`) is, if it is one: mainline's
/// mismatch `EINVAL` where the first posting does something else.
fn rust_pair_finding(detail: &Detail, v1: usize, mainline: usize) -> Option<Finding> {
    let Detail::Versions { outcomes, .. } = detail else {
        return None;
    };
    let mismatch = |o: &Result<u32, Error>| matches!(o, Err(Error::Mismatch { .. }));
    (mismatch(&outcomes[mainline]) && !mismatch(&outcomes[v1])).then_some(Finding::RustMismatch)
}

/// What a run with several sides does with the known findings it meets: a
/// known finding retires the side it is about (a `BUG()` leaves nothing
/// meaningful behind), or only the comparison of two versions for a
/// difference between them, and the run goes on with every other side, so
/// that the mainline sides of the program stay checked to its end. The
/// first known finding is kept and becomes the run's failure at the end
/// if nothing else failed (and [`quiet`] then decides whether a fuzz
/// target reports it); any other failure ends the run at once.
#[derive(Debug)]
pub struct Retired {
    sides: Vec<bool>,
    pairs: Vec<bool>,
    kept: Option<Box<Failure>>,
}

impl Retired {
    /// Nothing retired, among `sides` sides and `pairs` comparisons.
    pub fn new(sides: usize, pairs: usize) -> Self {
        Retired {
            sides: vec![false; sides],
            pairs: vec![false; pairs],
            kept: None,
        }
    }

    /// Whether side `i` is retired.
    pub fn side(&self, i: usize) -> bool {
        self.sides[i]
    }

    /// Whether comparison `p` is retired.
    pub fn pair(&self, p: usize) -> bool {
        self.pairs[p]
    }

    /// `result` of a check of side `i`: a known finding retires the side
    /// and the comparisons `involving` names (the indices of those that
    /// compare it), and gives `None`; any other failure is returned.
    pub fn of_side<T>(
        &mut self,
        i: usize,
        involving: impl Iterator<Item = usize>,
        result: Checked<T>,
    ) -> Checked<Option<T>> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(failure) if Finding::of(&failure).is_some() => {
                self.sides[i] = true;
                for p in involving {
                    self.pairs[p] = true;
                }
                self.keep(failure);
                Ok(None)
            }
            Err(failure) => Err(failure),
        }
    }

    /// `failure` of comparison `p`: a known finding retires the
    /// comparison (both sides go on, each against its own model); any
    /// other failure is returned.
    pub fn of_pair(&mut self, p: usize, failure: Box<Failure>) -> Checked {
        if Finding::of(&failure).is_none() {
            return Err(failure);
        }
        self.pairs[p] = true;
        self.keep(failure);
        Ok(())
    }

    fn keep(&mut self, failure: Box<Failure>) {
        keep_known(&mut self.kept, failure);
    }

    /// The run's result once every step passed: the known finding kept
    /// ([`keep_known`]) if it met any, `value` otherwise.
    pub fn finish<T>(self, value: T) -> Checked<T> {
        match self.kept {
            Some(failure) => Err(failure),
            None => Ok(value),
        }
    }
}

/// The known findings `IDPOOL_HISTORY` asks to report (read once).
fn reported() -> &'static [Finding] {
    static REPORTED: OnceLock<Vec<Finding>> = OnceLock::new();
    REPORTED.get_or_init(|| {
        let var = std::env::var("IDPOOL_HISTORY").unwrap_or_default();
        Finding::ALL
            .into_iter()
            .filter(|f| var.split(',').any(|w| w == "all" || w == f.name()))
            .collect()
    })
}

/// Whether `IDPOOL_HISTORY` asks for `finding` to be reported.
pub fn asked(finding: Finding) -> bool {
    reported().contains(&finding)
}

/// Keeps `failure`, a known finding a run met and went on past, as the
/// run's failure in `kept`: the first one met, unless a later one is a
/// finding `IDPOOL_HISTORY` asks for and the kept one is not.
///
/// A hunt must see its finding wherever it comes in a run: a known
/// difference that does not end the run (`node-info`, in about one random
/// `binder_commands` program of six; a collision on one side of
/// `handle_table`) must not hide a later hunted one behind its own quiet
/// failure. Without `IDPOOL_HISTORY`, or with `all`, the first is kept.
pub fn keep_known(kept: &mut Option<Box<Failure>>, failure: Box<Failure>) {
    keep_known_preferring(kept, failure, asked);
}

/// [`keep_known`], with `wanted` telling the findings asked for.
pub fn keep_known_preferring(
    kept: &mut Option<Box<Failure>>,
    failure: Box<Failure>,
    wanted: impl Fn(Finding) -> bool,
) {
    let wanted = |f: &Failure| Finding::of(f).is_some_and(&wanted);
    match kept {
        Some(first) if wanted(first) || !wanted(&failure) => {}
        _ => *kept = Some(failure),
    }
}

/// Whether a fuzz target ends the run quietly on `failure`: it is a known
/// upstream finding that `IDPOOL_HISTORY` does not ask for.
pub fn quiet(failure: &Failure) -> bool {
    Finding::of(failure).is_some_and(|f| !asked(f))
}

/// A fuzz target's verdict on a run: its events, or a panic with the
/// failure's message, unless the failure is a known upstream finding not
/// asked for ([`quiet`]).
///
/// # Panics
///
/// At any failure but a quiet one.
pub fn settle(result: Checked<Events>) -> Events {
    match result {
        Ok(events) => events,
        Err(f) if quiet(&f) => Events::default(),
        Err(f) => f.raise(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::FlavourName;

    #[test]
    fn mainline_is_half_of_the_header_values_of_each_driver() {
        let all: Vec<Versions> = (0..=255u8).map(Versions::decode).collect();
        let c = all.iter().filter(|v| v.c == Version::CMainline).count();
        let rust = all
            .iter()
            .filter(|v| v.rust == Version::RustMainline)
            .count();
        assert_eq!((c, rust), (128, 128));
        assert!(Versions::decode(0).is_mainline());
    }

    #[test]
    fn every_header_encodes_back() {
        for b in 0..16u8 {
            let v = Versions::decode(b);
            assert_eq!(v.encode().map(Versions::decode), Some(v));
        }
    }

    #[test]
    fn the_manager_gets_0_without_looking_in_the_versions_before_the_fix_only() {
        // The history of docs/spec.md: June 2024 as first merged always gave the
        // context manager's node 0; v3 is June 2024 but for the threshold
        // (and its clear); "binder: fix descriptor lookup for context
        // manager" made C search from offset 0 for the manager, and the
        // Rust driver always searched.
        let always: Vec<&str> = Version::ALL
            .into_iter()
            .filter(|&v| rules(v).manager_always_zero)
            .map(Version::name)
            .collect();
        assert_eq!(always, ["c-2024-06", "c-v3"]);
    }

    #[test]
    fn the_rows_follow_spec_history() {
        // Pinned to the history of docs/spec.md, and checked against the
        // allocator's own reading so a misreading on either side shows.
        for v in Version::ALL {
            let r = rules(v);
            assert_eq!(r.c, v.driver() == idpool::Driver::C, "{v}");
            assert_eq!(r.bit_zero_reserved, v.reserves_bit_zero(), "{v}");
            assert_eq!(
                r.bit_zero_reserved && r.bit_zero_kept_on_release,
                v.clear_bit_spares_zero(),
                "{v}"
            );
            assert_eq!(r.shrink_at_quarter, v.shrink_threshold_inclusive(), "{v}");
            assert_eq!(r.manager_always_zero, v.manager_always_gets_zero(), "{v}");
            assert_eq!(r.dead_refused, v.insert_checks_dead(), "{v}");
            let allocator = match v.on_mismatch() {
                idpool::MismatchReaction::Bug => Reaction::Crash,
                idpool::MismatchReaction::AcquireAndContinue => Reaction::TakeAndSearchOn,
                idpool::MismatchReaction::WarnEinval => Reaction::TakeWarnEinval,
            };
            assert_eq!(r.on_mismatch, allocator, "{v}");
        }
    }

    /// A failure of `check` about `flavour` with `detail`, as a runner
    /// builds it.
    fn failure(check: Check, flavour: Flavour, detail: Option<Detail>) -> Failure {
        Failure {
            target: "handle_table",
            step: 1,
            op: crate::check::OpKind::new("Insert", 10),
            check,
            flavour: Some(flavour),
            phase: None,
            capacity: 64,
            detail,
            message: String::new(),
        }
    }

    fn crash(version: Version, id: u32, manager: bool) -> Failure {
        let flavour = Flavour::on(FlavourName::DBitmap, version);
        let detail = Detail::Crash {
            version,
            id,
            manager,
        };
        failure(Check::KernelCrash, flavour, Some(detail))
    }

    fn versus(
        versions: [Version; 2],
        outcomes: [Result<u32, Error>; 2],
        capacities: [usize; 2],
    ) -> Failure {
        let insert = Request::Insert {
            node: 7,
            is_manager: false,
        };
        let before = capacities[0].max(capacities[1]);
        versus_at(insert, versions, outcomes, before, capacities, [0, 0])
    }

    fn versus_at(
        request: Request,
        versions: [Version; 2],
        outcomes: [Result<u32, Error>; 2],
        before: usize,
        capacities: [usize; 2],
        pending: [u32; 2],
    ) -> Failure {
        let detail = Detail::Versions {
            request,
            versions,
            outcomes,
            before,
            capacities,
            pending,
        };
        let name = match versions[0].driver() {
            idpool::Driver::C => FlavourName::DBitmap,
            idpool::Driver::Rust => FlavourName::IdPool,
        };
        let flavour = Flavour::Versus { name, versions };
        failure(Check::VersionsDiffer, flavour, Some(detail))
    }

    #[test]
    fn the_collision_is_a_managers_crash_over_descriptor_0_only() {
        for v in [Version::C2024_06, Version::CV3] {
            assert_eq!(Finding::of(&crash(v, 0, true)), Some(Finding::Collision));
            // Look-alikes on the same version: another bug.
            assert_eq!(Finding::of(&crash(v, 3, true)), None, "{v}: descriptor 3");
            assert_eq!(Finding::of(&crash(v, 3, false)), None, "{v}");
            let mut bare = crash(v, 0, true);
            bare.detail = None;
            assert_eq!(Finding::of(&bare), None, "{v}: nothing seen");
        }
        // A non-manager's crash over 0: June 2024 never clears bit 0, so it
        // is another bug there; on v3 it is v3's cleared bit 0 (below).
        let june_non_manager = crash(Version::C2024_06, 0, false);
        assert_eq!(Finding::of(&june_non_manager), None);
        assert_eq!(
            Finding::of(&crash(Version::CV3, 0, false)),
            Some(Finding::V3Zero)
        );
        // Mainline gives no descriptor without looking: never the finding.
        assert_eq!(Finding::of(&crash(Version::CMainline, 0, true)), None);
    }

    #[test]
    fn the_v3_threshold_is_v3_alone_halving_the_map_at_a_release() {
        let (v3, june) = (Version::CV3, Version::C2024_06);
        let threshold = Some(Finding::V3Threshold);
        let release = Request::Decrement(33);
        let of = |r, versions, outcomes, capacities| {
            Finding::of(&versus_at(r, versions, outcomes, 128, capacities, [0, 0]))
        };
        assert_eq!(
            of(release, [v3, june], [Ok(33), Ok(33)], [64, 128]),
            threshold
        );
        assert_eq!(
            of(release, [june, v3], [Ok(33), Ok(33)], [128, 64]),
            threshold
        );
        // June 2024 halving alone, or v3 going further: another bug.
        assert_eq!(of(release, [v3, june], [Ok(33), Ok(33)], [128, 64]), None);
        let (before, caps) = (512, [64, 512]);
        let failure = versus_at(release, [v3, june], [Ok(33), Ok(33)], before, caps, [0, 0]);
        assert_eq!(Finding::of(&failure), None);
        // Not at a release: an insert's rules are the same on both.
        let insert = Request::Insert {
            node: 7,
            is_manager: false,
        };
        assert_eq!(of(insert, [v3, june], [Ok(33), Ok(33)], [64, 128]), None);
        // The versions differing on an outcome is another bug.
        assert_eq!(of(release, [v3, june], [Ok(1), Ok(2)], [64, 128]), None);
        let enomem = Err(Error::NoMemory);
        assert_eq!(of(insert, [v3, june], [Ok(1), enomem], [128, 128]), None);
        // A capacity difference between the Rust versions is not it either.
        let (v1, mainline) = (Version::RustV1, Version::RustMainline);
        assert_eq!(of(release, [v1, mainline], [Ok(3), Ok(3)], [64, 128]), None);
    }

    #[test]
    fn v3s_map_emptied_without_bit_0_is_its_bit_0_not_the_threshold() {
        // The last release empties v3's map (its bit 0 cleared when
        // descriptor 0 was released), which shrinks to the minimum; June
        // 2024 keeps bit 0 and halves.
        let (v3, june) = (Version::CV3, Version::C2024_06);
        let of =
            |r, caps| Finding::of(&versus_at(r, [v3, june], [Ok(9), Ok(9)], 512, caps, [0, 0]));
        for release in [Request::Decrement(0), Request::Decrement(855)] {
            assert_eq!(of(release, [64, 256]), Some(Finding::V3Zero));
            // v3's map larger, or June 2024's not halved: another bug.
            assert_eq!(of(release, [256, 64]), None);
            assert_eq!(of(release, [64, 128]), None);
        }
        // As run: `harness/tests/findings.rs`.
    }

    #[test]
    fn the_v3_threshold_under_a_planned_failure_is_v3s_one_extra_attempt_at_a_release() {
        let (v3, june) = (Version::CV3, Version::C2024_06);
        let release = Request::Decrement(128);
        let of = |r, versions, pending| {
            Finding::of(&versus_at(
                r,
                versions,
                [Ok(128), Ok(128)],
                512,
                [512, 512],
                pending,
            ))
        };
        // v3 tried the shrink June 2024 did not, and its allocation failed.
        assert_eq!(of(release, [v3, june], [0, 1]), Some(Finding::V3Threshold));
        assert_eq!(of(release, [june, v3], [3, 2]), Some(Finding::V3Threshold));
        // June 2024 attempting more, or v3 two more, is another bug.
        assert_eq!(of(release, [v3, june], [1, 0]), None);
        assert_eq!(of(release, [v3, june], [0, 2]), None);
        // An insert's allocations are the same rule on both versions.
        let insert = Request::Insert {
            node: 7,
            is_manager: false,
        };
        assert_eq!(of(insert, [v3, june], [0, 1]), None);
        // Nor on the Rust pair.
        let (v1, mainline) = (Version::RustV1, Version::RustMainline);
        assert_eq!(of(release, [v1, mainline], [0, 1]), None);
        // Different outcomes as well: another bug.
        let outcomes = [Ok(128), Err(Error::NoMemory)];
        let failure = versus_at(release, [v3, june], outcomes, 512, [512, 512], [0, 1]);
        assert_eq!(Finding::of(&failure), None);
    }

    /// The double free is the kernel's C freeing a map twice on a side whose
    /// `dbitmap_free` leaves the pointer behind (June 2024's), and only
    /// there: the shipped header doing it is a finding of its own.
    #[test]
    fn the_double_free_is_a_double_free_on_june_2024s_free_only() {
        let mut f = failure(
            Check::DoubleFree,
            Flavour::on(FlavourName::Kernel, Version::C2024_06),
            None,
        );
        f.target = "kernel_dbitmap";
        assert_eq!(Finding::of(&f), Some(Finding::DoubleFree));
        assert!(f.check.is_memory_safety());
        for flavour in [
            Flavour::plain(FlavourName::Kernel),
            Flavour::on(FlavourName::Kernel, Version::CMainline),
        ] {
            f.flavour = Some(flavour);
            assert_eq!(Finding::of(&f), None, "{flavour}");
        }
        // The same version failing another check is not it either.
        let crash = failure(
            Check::Kernel,
            Flavour::on(FlavourName::Kernel, Version::C2024_06),
            None,
        );
        assert_eq!(Finding::of(&crash), None);
    }

    #[test]
    fn the_rust_mismatch_is_mainlines_einval_beside_the_first_posting_only() {
        let (v1, mainline) = (Version::RustV1, Version::RustMainline);
        let einval = Err(Error::Mismatch { id: 32 });
        let found = Some(Finding::RustMismatch);
        assert_eq!(
            Finding::of(&versus([v1, mainline], [Ok(65), einval], [128, 128])),
            found
        );
        assert_eq!(
            Finding::of(&versus([mainline, v1], [einval, Ok(65)], [128, 64])),
            found
        );
        // Differing on anything else is another bug.
        assert_eq!(
            Finding::of(&versus([v1, mainline], [Ok(3), Ok(4)], [64, 64])),
            None
        );
        let enomem = Err(Error::NoMemory);
        assert_eq!(
            Finding::of(&versus([v1, mainline], [Ok(3), enomem], [64, 64])),
            None
        );
        // The first posting never fails with the mismatch's EINVAL.
        assert_eq!(
            Finding::of(&versus([v1, mainline], [einval, Ok(3)], [64, 64])),
            None
        );
        // The same outcome on the C pair is not it.
        let (v3, june) = (Version::CV3, Version::C2024_06);
        assert_eq!(
            Finding::of(&versus([v3, june], [einval, Ok(3)], [64, 64])),
            None
        );
    }
}
