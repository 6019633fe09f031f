//! A real driver's run against our model of that driver (mainline), step by
//! step and observable by observable; and the two real drivers against
//! each other.
//!
//! What the real side cannot show is left out of the comparison, and said
//! so here:
//! - a node's serial (a node created and freed within one step never
//!   appears in the debug text): nodes and the nodes references point to
//!   are compared by owner and pointer;
//! - the Rust driver's debug text shows no death notifications, and the C
//!   driver's shows only whether one is set: death cookies are compared
//!   only where the real side shows one;
//! - when the executor says log lines may have been lost to the C driver's
//!   rate limit, a line the model prints that the real driver did not is not
//!   a difference (every real line must still be one the model prints).

use crate::replay::{StepRun, TraceRun};
use crate::wire::Driver;
use idpool::driver::{
    CDriver, Log, NodeState, Observed, ProcState, RefState, RustDriver, Sequential, Snapshot, Step,
};
use idpool::Version;
use std::collections::BTreeMap;
use std::fmt;

/// One step where a real driver and the model differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The step (0-based).
    pub step: usize,
    /// The step's text.
    pub command: String,
    /// Which observable, and both values.
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {} `{}`: {}", self.step, self.command, self.what)
    }
}

/// A model of one driver, run step by step.
enum Model {
    C(Box<CDriver>),
    Rust(Box<RustDriver>),
}

impl Model {
    fn new(driver: Driver, euids: &[u32]) -> Model {
        match driver {
            Driver::C => Model::C(Box::new(CDriver::new(euids, Version::CMainline))),
            Driver::Rust => Model::Rust(Box::new(RustDriver::new(euids, Version::RustMainline))),
        }
    }

    fn exec(&mut self, step: &Step) -> (Observed, Snapshot) {
        match self {
            Model::C(d) => (d.exec(step, &[], &mut Sequential), d.snapshot()),
            Model::Rust(d) => (d.exec(step, &[], &mut Sequential), d.snapshot()),
        }
    }
}

/// The differences between a real driver's run of a trace and our model of
/// that driver (mainline) on the same program; empty when they agree on
/// every observable of every step that ran.
pub fn against_model(run: &TraceRun, driver: Driver) -> Vec<Mismatch> {
    let mut model = Model::new(driver, &run.program.euids);
    let mut out = Vec::new();
    for (i, real) in run.steps.iter().enumerate() {
        let (observed, snapshot) = model.exec(&real.step);
        let mut push = |what: String| {
            out.push(Mismatch {
                step: i,
                command: real.step.to_string(),
                what,
            })
        };
        if observed.ret != real.observed.ret {
            push(format!(
                "ret: model {:?}, real {:?}",
                observed.ret, real.observed.ret
            ));
        }
        if observed.reads != real.observed.reads {
            push(format!(
                "reads: model {:?}, real {:?}",
                observed.reads, real.observed.reads
            ));
        }
        if let Some(what) = logs(&observed.log, &real.observed.log, run.log_may_be_incomplete) {
            push(what);
        }
        for what in states(&snapshot, real) {
            push(what);
        }
    }
    if let Some(e) = &run.error {
        out.push(Mismatch {
            step: run.steps.len(),
            command: String::new(),
            what: format!("the executor gave up: {e}"),
        });
    }
    out
}

/// The log lines' difference, if any.
fn logs(model: &[Log], real: &[Log], may_be_incomplete: bool) -> Option<String> {
    if model == real {
        return None;
    }
    if may_be_incomplete {
        let mut left = model.to_vec();
        let all_known = real.iter().all(|l| match left.iter().position(|m| m == l) {
            Some(i) => {
                left.remove(i);
                true
            }
            None => false,
        });
        if all_known {
            return None;
        }
    }
    Some(format!("log: model {model:?}, real {real:?}"))
}

/// A reference as the real side shows it: node by owner and pointer.
type RealRef = (u8, u64, u32, u32);

fn refs(p: &ProcState) -> BTreeMap<u32, RealRef> {
    p.refs
        .iter()
        .map(|(&h, r): (&u32, &RefState)| (h, (r.node.owner.0, r.node.ptr, r.strong, r.weak)))
        .collect()
}

fn nodes(p: &ProcState) -> BTreeMap<u64, (u32, u32, bool, bool)> {
    p.nodes
        .iter()
        .map(|(&ptr, n): (&u64, &NodeState)| (ptr, (n.strong, n.weak, n.has_strong, n.has_weak)))
        .collect()
}

/// Each process's differences in state, in words.
fn states(model: &Snapshot, real: &StepRun) -> Vec<String> {
    let mut out = Vec::new();
    for (pid, (m, r)) in model.procs.iter().zip(&real.snapshot.procs).enumerate() {
        if m.alive != r.alive {
            out.push(format!("p{pid} alive: model {}, real {}", m.alive, r.alive));
            continue;
        }
        if !m.alive {
            continue;
        }
        if refs(m) != refs(r) {
            out.push(format!(
                "p{pid} refs (owner, ptr, strong, weak): model {:?}, real {:?}",
                refs(m),
                refs(r)
            ));
        }
        for (h, rr) in &r.refs {
            let md = m.refs.get(h).and_then(|x| x.death);
            if rr.death.is_some() && rr.death != md {
                out.push(format!(
                    "p{pid} handle {h} death: model {md:?}, real {:?}",
                    rr.death
                ));
            }
        }
        if nodes(m) != nodes(r) {
            out.push(format!(
                "p{pid} nodes (strong, weak, has_strong, has_weak): model {:?}, real {:?}",
                nodes(m),
                nodes(r)
            ));
        }
        if m.buffers != r.buffers {
            out.push(format!(
                "p{pid} buffers: model {}, real {}",
                m.buffers, r.buffers
            ));
        }
    }
    out
}

/// Where the two real drivers differ on the same trace: the steps at which
/// the returns, the reads or the references differ (log lines and node
/// counts, which differ by design, are left out).
pub fn real_against_real(c: &TraceRun, rust: &TraceRun) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for (i, (sc, sr)) in c.steps.iter().zip(&rust.steps).enumerate() {
        let mut push = |what: String| {
            out.push(Mismatch {
                step: i,
                command: sc.step.to_string(),
                what,
            })
        };
        if sc.observed.ret != sr.observed.ret {
            push(format!(
                "ret: C {:?}, Rust {:?}",
                sc.observed.ret, sr.observed.ret
            ));
        }
        if sc.observed.reads != sr.observed.reads {
            push(format!(
                "reads: C {:?}, Rust {:?}",
                sc.observed.reads, sr.observed.reads
            ));
        }
        for (pid, (pc, pr)) in sc.snapshot.procs.iter().zip(&sr.snapshot.procs).enumerate() {
            if refs(pc) != refs(pr) {
                push(format!(
                    "p{pid} refs: C {:?}, Rust {:?}",
                    refs(pc),
                    refs(pr)
                ));
            }
        }
    }
    out
}
