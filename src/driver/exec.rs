//! What both driver models share: how a command runs its handle-table
//! operations, and what the caller of a command decides for it (the lock-drop
//! windows other commands run in, and which allocations fail).

use super::command::Pid;
use crate::alloc::{AllocSite, Gfp};
use crate::table::{Error, Flavour, Next, NodeRefs, Operation};

/// A driver whose processes each have a handle table of flavour `F`.
pub(crate) trait Tables<F: Flavour> {
    /// The handle table of `pid`.
    fn table(&mut self, pid: Pid) -> &mut NodeRefs<F>;
    /// The locks the command running now keeps across its allocations.
    fn held(&self) -> Held {
        Held::default()
    }
}

/// What the caller of a command decides while it runs.
///
/// A command's handle-table operations drop the process lock to allocate
/// (the new reference's memory, a bigger or a smaller bitmap). At each
/// such point the driver asks [`Windows::gfp`] whether the allocation
/// succeeds, and before it re-takes the lock, offers the window to
/// [`Windows::window`], which may run whole commands of other processes
/// on the same driver: they see the state as the paused command left it.
pub trait Windows<D: ?Sized> {
    /// The flags of the next allocation at `site`.
    fn gfp(&mut self, site: AllocSite) -> Gfp;
    /// The lock is dropped for an allocation at `site`; `driver` may be
    /// driven (by other processes) before it is taken again, by commands
    /// that need none of the locks in `held`, which the paused command
    /// keeps across the allocation.
    fn window(&mut self, driver: &mut D, site: AllocSite, held: Held);
}

/// A step's fault plan: the first allocation at one site fails, every
/// other succeeds (`fail-ref`, `fail-grow`, `fail-shrink` in a trace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailFirst {
    site: Option<AllocSite>,
    failed: bool,
}

impl FailFirst {
    /// The plan that fails the first allocation at `site`, if any.
    pub fn at(site: Option<AllocSite>) -> Self {
        FailFirst {
            site,
            failed: false,
        }
    }

    /// Whether the planned allocation was reached (and failed).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The flags of the next allocation at `site`: [`Gfp::Fail`] once.
    pub fn gfp(&mut self, site: AllocSite) -> Gfp {
        if self.site == Some(site) && !self.failed {
            self.failed = true;
            Gfp::Fail
        } else {
            Gfp::Kernel
        }
    }
}

/// A command run to completion, as [`Sequential`], with its fault plan.
impl<D: ?Sized> Windows<D> for FailFirst {
    fn gfp(&mut self, site: AllocSite) -> Gfp {
        FailFirst::gfp(self, site)
    }
    fn window(&mut self, _: &mut D, _: AllocSite, _: Held) {}
}

/// Locks other than the process's that a command keeps while it allocates
/// with the process lock dropped: a command that needs one of them waits
/// until the paused command is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The C driver's `context->context_mgr_node_lock`, which
    /// `BC_INCREFS`/`BC_ACQUIRE` on handle 0 keep across
    /// `binder_inc_ref_for_node` (and with it its allocations), and which
    /// `BINDER_SET_CONTEXT_MGR`, a transaction to handle 0,
    /// `BINDER_GET_NODE_INFO_FOR_REF`, `BC_INCREFS`/`BC_ACQUIRE` on handle 0
    /// and the release of a dying process take.
    pub context_manager: bool,
}

impl Held {
    /// Whether a command that needs `needs` must wait.
    pub fn blocks(self, needs: Held) -> bool {
        self.context_manager && needs.context_manager
    }
}

/// No window is used and every allocation succeeds: commands run one
/// after another.
pub struct Sequential;

impl<D: ?Sized> Windows<D> for Sequential {
    fn gfp(&mut self, _: AllocSite) -> Gfp {
        Gfp::Kernel
    }
    fn window(&mut self, _: &mut D, _: AllocSite, _: Held) {}
}

/// Runs `op` on `pid`'s table in `driver` to completion: each critical
/// section on the table as it is then, each allocation with the flags
/// `windows` gives, after `windows` had the window.
pub(crate) fn drive<D: Tables<F>, F: Flavour>(
    driver: &mut D,
    pid: Pid,
    mut op: Operation<F>,
    windows: &mut dyn Windows<D>,
) -> Result<u32, Error> {
    loop {
        match op.next() {
            Next::Locked => op.step_locked(driver.table(pid)),
            Next::Unlocked => {
                let site = op.alloc_site().expect("an unlocked step allocates");
                let gfp = windows.gfp(site);
                op.step_unlocked(gfp);
                let held = driver.held();
                windows.window(driver, site, held);
            }
            Next::Done(outcome) => return outcome,
        }
    }
}
