//! Naive models of what each driver shows userspace, written from the
//! upstream sources independently of `idpool::driver`'s transliterations:
//! processes hold references (handle, node, strong and weak counts), nodes
//! have owners and counts, and each rule is stated as the driver's user
//! sees it. They never call into `idpool::driver`'s drivers.
//!
//! [`c::COracle`] models `drivers/android/binder.c` and [`rust::RustOracle`]
//! `drivers/android/binder/`, both as of Linux 7.3.4. Each file states its
//! driver's rules on its own, with the upstream function (and line) each
//! comes from, and pins the ones that matter most in its tests;
//! `examples` (a test module) runs short programs on both and spells out what each
//! driver returns.
//!
//! # What both models leave out
//!
//! - Where a buffer lies, in one case: both models place buffers in the
//!   1 MiB mapping as their drivers do (C the smallest free buffer that
//!   fits, Rust the end or the first gap while it holds at most 8 ranges,
//!   then the smallest gap), but among C's free buffers of one size the
//!   driver takes whichever its rb-tree walk meets first
//!   (`binder_alloc_new_buf_locked`, binder_alloc.c:536-549) and the model
//!   the lowest; only `ENOSPC` after frees of equal-sized buffers can tell.
//! - The read that finds nothing: each drain ends with a non-blocking read
//!   (or a write of answers followed by one) that fails with `EAGAIN`,
//!   which C logs ("ioctl ... returned -11", binder.c:6000) and Rust too
//!   ("Read failure", thread.rs:1663); which reads come out empty depends
//!   on which no-op work a driver queues, which the models do not follow,
//!   and the harness leaves that line out of every comparison with a model.
//! - Log lines no [`Log`](idpool::driver::Log) kind names (the VM's log
//!   classifier knows them as lines of no kind): C's "send failed reply
//!   for transaction" (binder.c:1714, 1745), "release ... transaction ...
//!   still active" (5391), "cookie mismatch" of a node object
//!   (2254) and of a `BC_*_DONE` (4249), "Unexpected reply error" (1733),
//!   "RLIMIT_NICE not set" (696, euids without `CAP_SYS_NICE`); Rust's
//!   "release transaction ... in, still active" (thread.rs:1161) and
//!   "Could not remove freeze listener" (node.rs:697). C's "got reply
//!   transaction with bad target transaction stack" (binder.c:3189), which
//!   no program reaches (a caller's last transaction is the call being
//!   answered), is counted as [`Log::ReplyBadStack`](idpool::driver::Log);
//!   Rust's "BC_FREEZE_NOTIFICATION_DONE ... not pending" (freeze.rs:298)
//!   as [`Log::FreezeDoneNotFound`](idpool::driver::Log).
//! - The extended error's id: set (non-zero) whenever the command is not
//!   `BR_OK`; Rust's debug ids start at 0 (`next_debug_id`,
//!   rust_binder_main.rs:98), so the module's very first object, were it a
//!   failed transaction, would leave id 0.
//! - Waiting: nothing runs while `freeze` waits, so its timeout changes
//!   nothing; it fails with `EAGAIN` exactly when transactions are pending.
//! - States no program reaches: a transaction at the head of a thread's
//!   work when it sends a call (C's "new transaction not allowed",
//!   binder.c:3289, is modelled but every readable item is drained before
//!   the next command), a reply target thread marked dead while still
//!   linked, Rust's weak zero-to-one increment of a node queued for
//!   another reason (an `assert!`, node.rs:97), descriptor or handle
//!   tables of 64 references (see the files).

use idpool::driver::{Observed, Procs, Snapshot, Step};
use idpool::{AllocSite, Version};
use std::collections::BTreeMap;

pub mod c;
#[cfg(test)]
mod examples;
pub mod rust;

pub use c::COracle;
pub use rust::RustOracle;

/// A naive model of one driver.
pub trait Oracle {
    /// The model after each of `procs.len()` processes opened the device,
    /// for `version` (of the model's driver).
    fn new(procs: &Procs, version: Version) -> Self
    where
        Self: Sized;
    /// Runs one step to completion, then every live process drains its
    /// work (`docs/commands.md`); `fail` makes the command's first
    /// allocation at that site fail.
    fn step(&mut self, step: &Step, fail: Option<AllocSite>) -> Observed;
    /// What each process holds now.
    fn snapshot(&self) -> Snapshot;
    /// Whether the model is checked at all (a driver without a model yet
    /// says no).
    fn enabled() -> bool
    where
        Self: Sized,
    {
        true
    }
}

/// No model: nothing is checked against it.
pub struct Unmodelled;

impl Oracle for Unmodelled {
    fn new(_: &Procs, _: Version) -> Self {
        Unmodelled
    }
    fn step(&mut self, _: &Step, _: Option<AllocSite>) -> Observed {
        Observed::default()
    }
    fn snapshot(&self) -> Snapshot {
        Snapshot::default()
    }
    fn enabled() -> bool {
        false
    }
}

/// The failure planned for one command: its first allocation at the site
/// fails, every other one succeeds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FailOnce(Option<AllocSite>);

impl FailOnce {
    pub(crate) fn new(site: Option<AllocSite>) -> Self {
        FailOnce(site)
    }

    /// An allocation at `site` is made: whether it succeeds.
    pub(crate) fn alloc(&mut self, site: AllocSite) -> bool {
        if self.0 == Some(site) {
            self.0 = None;
            false
        } else {
            true
        }
    }
}

/// The smallest number at or above `from` that is not a key of `used`,
/// found by trying `from`, `from + 1`, ... in turn.
pub(crate) fn lowest_free<V>(used: &BTreeMap<u32, V>, from: u32) -> u32 {
    (from..=u32::MAX)
        .find(|n| !used.contains_key(n))
        .expect("a process holds fewer than 2^32 references")
}

/// Running programs on a model, for the tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::Oracle;
    use idpool::driver::{ExtendedError, Observed, Procs, Snapshot, Step};
    use idpool::{AllocSite, Version};

    /// Runs `text` on a new model of `version`: a `procs` line, then one
    /// step per line, which may end with `!ref`, `!grow` or `!shrink` (that
    /// site's first allocation in the command fails). Returns the model and
    /// one line per step ([`describe`]).
    pub(crate) fn run<O: Oracle>(version: Version, text: &str) -> (O, Vec<String>) {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let procs: Vec<&str> = lines.next().expect("a procs line").split(' ').collect();
        assert_eq!(procs[0], "procs");
        let procs = Procs::parse(&procs[1..]).expect("a procs line");
        let mut model = O::new(&procs, version);
        let observed = lines
            .map(|line| {
                let (line, fail) = match line.rsplit_once(" !") {
                    Some((step, "ref")) => (step, Some(AllocSite::Ref)),
                    Some((step, "grow")) => (step, Some(AllocSite::Grow)),
                    Some((step, "shrink")) => (step, Some(AllocSite::Shrink)),
                    Some((_, site)) => panic!("unknown site {site}"),
                    None => (line, None),
                };
                let words: Vec<&str> = line.split(' ').collect();
                let step = Step::parse_words(&words).expect("a step");
                describe(&model.step(&step, fail))
            })
            .collect();
        (model, observed)
    }

    /// One step's observation on one line: the return value, the extended
    /// error when it is not `BR_OK` (`ee BR_FAILED_REPLY -22`), then what
    /// each process read (`p1[...]`, `t1:` before a read of thread `t1`),
    /// then the log (`log[...]`).
    pub(crate) fn describe(obs: &Observed) -> String {
        let mut line = obs.ret.map_or("-".to_string(), |r| r.to_string());
        if let Some(ee) = obs.ee.filter(|ee| *ee != ExtendedError::NONE) {
            line += &format!(" {ee}");
        }
        for (p, reads) in obs.reads.iter().enumerate() {
            if !reads.is_empty() {
                let reads: Vec<String> = reads.iter().map(ToString::to_string).collect();
                line += &format!(" p{p}[{}]", reads.join(", "));
            }
        }
        if !obs.log.is_empty() {
            let log: Vec<String> = obs.log.iter().map(ToString::to_string).collect();
            line += &format!(" log[{}]", log.join(", "));
        }
        line
    }

    /// What process `p` holds, on one line: `refs{handle: node strong/weak
    /// [death cookie]} nodes{ptr: #serial strong/weak told} buffers n`,
    /// `told` being `s` and `w` for what the owner was told, `-` for
    /// nothing. A dead process is `dead`.
    pub(crate) fn holds(snapshot: &Snapshot, p: usize) -> String {
        let proc = &snapshot.procs[p];
        if !proc.alive {
            return "dead".to_string();
        }
        let refs: Vec<String> = proc
            .refs
            .iter()
            .map(|(h, r)| {
                let death = r.death.map_or(String::new(), |c| format!(" death {c}"));
                format!("{h}: {} {}/{}{death}", r.node, r.strong, r.weak)
            })
            .collect();
        let nodes: Vec<String> = proc
            .nodes
            .iter()
            .map(|(ptr, n)| {
                let told = match (n.has_strong, n.has_weak) {
                    (true, true) => "sw",
                    (true, false) => "s",
                    (false, true) => "w",
                    (false, false) => "-",
                };
                format!("{ptr}: #{} {}/{} {told}", n.serial, n.strong, n.weak)
            })
            .collect();
        format!(
            "refs{{{}}} nodes{{{}}} buffers {}",
            refs.join(", "),
            nodes.join(", "),
            proc.buffers
        )
    }
}
