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
    /// driven (by other processes) before it is taken again.
    fn window(&mut self, driver: &mut D, site: AllocSite);
}

/// No window is used and every allocation succeeds: commands run one
/// after another.
pub struct Sequential;

impl<D: ?Sized> Windows<D> for Sequential {
    fn gfp(&mut self, _: AllocSite) -> Gfp {
        Gfp::Kernel
    }
    fn window(&mut self, _: &mut D, _: AllocSite) {}
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
                windows.window(driver, site);
            }
            Next::Done(outcome) => return outcome,
        }
    }
}
