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
//! - the executor reads every live process's debug text after each step,
//!   and reading it is not neutral in the C driver (it may queue node work
//!   that a later read finds empty, failing with `EAGAIN`): the model reads
//!   it too, at the same points (each live process once a step, as the
//!   executor's reads print it once, from its pid's file or, with several
//!   opens by one task, from the global state file);
//! - with several opens by one task, a pid names several processes: the
//!   executor gives each process its own part of the debug text (see
//!   `exec`'s `texts_from_state`), and everything here is per process
//!   (`p0`, `p2`), never per pid. The one pid-level item of the text, the
//!   pids holding refs on a node line (`debugfs::NodeLine::procs`), is not
//!   compared: the holders are compared through each process's ref lines;
//! - the C driver prints most of its lines through two rate limits
//!   (`klog::Limit`, 10 lines per 5 s each, shared by the whole boot): a
//!   line the model prints that the real driver did not is not a difference
//!   only when the kernel dropped it, and says so. That is, its limit's
//!   window had printed its whole burst by the end of the step (from the
//!   boot's timestamps, `StepRun::full_limits`), and the kernel's "N
//!   callbacks suppressed" lines for that limit, in the trace's later steps
//!   and in the executor's flush after the last one, count at least as many
//!   dropped lines as the model printed in excess by then. Every line the
//!   real driver printed must be one the model prints, and the lines no
//!   limit applies to must be the same.

use crate::driver::Driver;
use crate::klog::{self, Class, Limit, LogLine, RateLimits};
use crate::replay::{StepRun, TraceRun};
use idpool::driver::{
    CDriver, FailFirst, Log, NodeState, Observed, Pid, ProcState, Procs, RefState, RustDriver,
    Snapshot, Step,
};
use idpool::{AllocSite, Version};
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
    fn new(driver: Driver, procs: &Procs) -> Model {
        match driver {
            Driver::C => Model::C(Box::new(CDriver::new(procs, Version::CMainline))),
            Driver::Rust => Model::Rust(Box::new(RustDriver::new(procs, Version::RustMainline))),
        }
    }

    /// Runs `step`, the first allocation at `fail` failing.
    fn exec(&mut self, step: &Step, fail: Option<AllocSite>) -> (Observed, Snapshot) {
        self.exec_failing(step, fail).0
    }

    /// [`Model::exec`], and whether the planned allocation failed (the
    /// step reached it).
    fn exec_failing(
        &mut self,
        step: &Step,
        fail: Option<AllocSite>,
    ) -> ((Observed, Snapshot), bool) {
        let mut plan = FailFirst::at(fail);
        let out = match self {
            Model::C(d) => (d.exec(step, &[], &mut plan), d.snapshot()),
            Model::Rust(d) => (d.exec(step, &[], &mut plan), d.snapshot()),
        };
        (out, plan.failed())
    }

    /// What the executor's reading of `pid`'s debug text after the step
    /// does to the driver: the C driver's `print_binder_proc` may queue
    /// node work ([`CDriver::print_binder_proc`]); the Rust driver's
    /// `Process::debug_print` only clones its nodes' `Arc`s
    /// (process.rs:599-640).
    fn read_debug_text(&mut self, pid: Pid) {
        match self {
            Model::C(d) => d.print_binder_proc(pid),
            Model::Rust(_) => {}
        }
    }
}

/// The differences between a real driver's run of a trace and our model of
/// that driver (mainline) on the same program; empty when they agree on
/// every observable of every step that ran.
pub fn against_model(run: &TraceRun, driver: Driver) -> Vec<Mismatch> {
    against_failing_model(run, driver, &[])
}

/// Whether our model of `driver`, running `run`'s program with the
/// allocations `fail` plans (as [`against_failing_model`]), reaches one
/// of them: a planned site the driver does not allocate at for that step
/// (a map that shrinks to one word, stored inline) fails nothing.
pub fn model_fails(run: &TraceRun, driver: Driver, fail: &[Option<AllocSite>]) -> bool {
    let mut model = Model::new(driver, &run.program.procs);
    let mut failed = false;
    for (i, real) in run.steps.iter().enumerate() {
        failed |= model
            .exec_failing(&real.step, fail.get(i).copied().flatten())
            .1;
        for (k, text) in real.procs.iter().enumerate() {
            if text.is_some() {
                model.read_debug_text(Pid(k as u8));
            }
        }
    }
    failed
}

/// [`against_model`] for a run with allocations failed on purpose: the
/// model fails, at step `i`, the first allocation at the site `fail[i]`
/// names (a step past the end of `fail` fails none).
pub fn against_failing_model(
    run: &TraceRun,
    driver: Driver,
    fail: &[Option<AllocSite>],
) -> Vec<Mismatch> {
    let mut model = Model::new(driver, &run.program.procs);
    let mut out = Vec::new();
    let mut dropped = Dropped::default();
    for (i, real) in run.steps.iter().enumerate() {
        let (observed, snapshot) = model.exec(&real.step, fail.get(i).copied().flatten());
        let mut push = |what: String| {
            out.push(Mismatch {
                step: i,
                command: real.step.to_string(),
                what,
            })
        };
        if observed.ret != real.observed.ret {
            push(format!(
                "ret: model {}, real {}",
                show_ret(observed.ret),
                show_ret(real.observed.ret)
            ));
        }
        // Compared where the run recorded it (fixtures of older executors
        // did not read the extended error).
        if real.observed.ee.is_some() && observed.ee != real.observed.ee {
            let show = |e: Option<idpool::driver::ExtendedError>| {
                e.map_or("none".into(), |e| e.to_string())
            };
            push(format!(
                "extended error: model {}, real {}",
                show(observed.ee),
                show(real.observed.ee)
            ));
        }
        for what in reads(("model", &observed), ("real", &real.observed)) {
            push(what);
        }
        let what = match driver {
            Driver::C => dropped.step(&observed.log, real),
            Driver::Rust => (observed.log != real.observed.log)
                .then(|| log_diff(&observed.log, &real.observed.log)),
        };
        if let Some(what) = what {
            push(what);
        }
        for what in states(&snapshot, real) {
            push(what);
        }
        for (k, text) in real.procs.iter().enumerate() {
            if text.is_some() {
                model.read_debug_text(Pid(k as u8));
            }
        }
    }
    if run.error.is_none() {
        if let Some(what) = dropped.end(&run.flush_log) {
            out.push(Mismatch {
                step: run.steps.len(),
                command: "(after the last step)".into(),
                what,
            });
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

/// The C driver's lines the real run lacks, per rate limit, against what
/// the kernel reported it dropped.
#[derive(Debug, Default)]
struct Dropped {
    /// Lines the model printed that the real driver did not, so far.
    missing: [u32; 2],
    /// Lines the kernel said it dropped ("callbacks suppressed"), so far.
    reported: [u32; 2],
}

impl Dropped {
    fn index(limit: Limit) -> usize {
        Limit::ALL
            .iter()
            .position(|&l| l == limit)
            .expect("a limit")
    }

    /// Counts the kernel's reports among `lines`; a difference when the
    /// lines found missing before them outnumber what the kernel reported
    /// (each report counts the drops of the window before it, and every
    /// earlier step's lines are in that window or an earlier one).
    fn reports(&mut self, lines: &[LogLine]) -> Option<String> {
        let mut out = None;
        for l in lines {
            if let Class::Suppressed { site, count } = &l.class {
                if let Some(limit) = Limit::from_function(site) {
                    let i = Self::index(limit);
                    self.reported[i] += count;
                    if self.missing[i] > self.reported[i] {
                        out = Some(self.shortfall(limit));
                    }
                }
            }
        }
        out
    }

    fn shortfall(&self, limit: Limit) -> String {
        let i = Self::index(limit);
        format!(
            "log: the model printed {} {} line(s) the real driver did not, the kernel reported {} suppressed",
            self.missing[i],
            limit.function(),
            self.reported[i]
        )
    }

    /// One step's log lines: the difference, if any.
    fn step(&mut self, model: &[Log], real: &StepRun) -> Option<String> {
        let mut why = self.reports(&real.log);
        let mut left: Vec<Log> = model.to_vec();
        let mut extra = Vec::new();
        for l in &real.observed.log {
            match left.iter().position(|m| m == l) {
                Some(i) => {
                    left.remove(i);
                }
                None => extra.push(*l),
            }
        }
        let plain = log_diff(model, &real.observed.log);
        if !extra.is_empty() {
            return Some(plain);
        }
        for l in &left {
            let Some(limit) = klog::c_limit(l) else {
                return Some(plain);
            };
            if !real.full_limits.contains(&limit) {
                return Some(format!(
                    "{plain} ({} had not printed its {} lines in its window)",
                    limit.function(),
                    RateLimits::BURST
                ));
            }
            self.missing[Self::index(limit)] += 1;
        }
        why.take().map(|w| format!("{plain}; {w}"))
    }

    /// After the last step: the executor's flush holds the kernel's last
    /// reports; every missing line must be counted by then.
    fn end(&mut self, flush: &[LogLine]) -> Option<String> {
        let why = self.reports(flush);
        for limit in Limit::ALL {
            let i = Self::index(limit);
            if self.missing[i] > self.reported[i] {
                return Some(self.shortfall(limit));
            }
        }
        why
    }
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

fn show_ret(r: Option<idpool::driver::Ret>) -> String {
    r.map_or_else(|| "?".to_string(), |r| r.to_string())
}

/// Items in words, a run of equal ones as `item ×N`.
pub fn show_items<T: fmt::Display>(items: &[T]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for i in items {
        let t = i.to_string();
        match out.last_mut() {
            Some((last, n)) if *last == t => *n += 1,
            _ => out.push((t, 1)),
        }
    }
    let parts: Vec<String> = out
        .into_iter()
        .map(|(t, n)| if n == 1 { t } else { format!("{t} ×{n}") })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// What only `a` and only `b` hold, as multisets, each sorted.
fn only<T: Ord + Clone>(a: &[T], b: &[T]) -> (Vec<T>, Vec<T>) {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    let mut left = Vec::new();
    for x in a {
        match b.iter().position(|y| *y == x) {
            Some(i) => {
                b.remove(i);
            }
            None => left.push(x),
        }
    }
    (left, b)
}

/// Two logs' difference in words: the lines only one of them printed.
fn log_diff(model: &[Log], real: &[Log]) -> String {
    let (m, r) = only(model, real);
    format!(
        "log: model only {}, real only {}",
        show_items(&m),
        show_items(&r)
    )
}

/// Each process whose reads differ, with what only one side read.
fn reads((name_a, a): (&str, &Observed), (name_b, b): (&str, &Observed)) -> Vec<String> {
    let mut out = Vec::new();
    for (pid, (ra, rb)) in a.reads.iter().zip(&b.reads).enumerate() {
        if ra != rb {
            let (x, y) = only(ra, rb);
            out.push(format!(
                "p{pid} reads: {}",
                show_only((name_a, &x), (name_b, &y))
            ));
        }
    }
    out
}

/// How many words of a long item [`show_only`] shows around where the two
/// sides differ.
const WORDS: usize = 6;

/// What only each side holds, `A only [..], B only [..]`. When each holds
/// one long item (a transaction with many objects), only the words where
/// they differ are shown, the rest as `…`.
pub fn show_only<T: fmt::Display>((name_a, a): (&str, &[T]), (name_b, b): (&str, &[T])) -> String {
    if let ([x], [y]) = (a, b) {
        let (x, y) = (x.to_string(), y.to_string());
        if x.len() + y.len() > 120 {
            let (x, y) = around_difference(&x, &y);
            return format!("{name_a} only [{x}], {name_b} only [{y}]");
        }
    }
    format!(
        "{name_a} only {}, {name_b} only {}",
        show_items(a),
        show_items(b)
    )
}

/// Two texts cut to where they differ: their first word, then from the
/// word before the first that differs (an object's kind before its
/// handle), at most [`WORDS`] words each, `…` for what is left out, and
/// `(N words)` for each text's length when cut.
pub fn around_difference(a: &str, b: &str) -> (String, String) {
    let (wa, wb): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
    let first = wa.iter().zip(&wb).take_while(|(x, y)| x == y).count();
    let start = first.saturating_sub(1).max(usize::from(first > 0));
    let cut = |w: &[&str]| -> String {
        let start = start.min(w.len());
        let end = (start + WORDS).min(w.len());
        let mut out = Vec::new();
        if start > 0 {
            out.push(w[0].to_string());
        }
        if start > 1 {
            out.push("…".into());
        }
        out.extend(w[start..end].iter().map(|s| s.to_string()));
        if end < w.len() {
            out.push("…".into());
        }
        if start > 1 || end < w.len() {
            out.push(format!("({} words)", w.len()));
        }
        out.join(" ")
    };
    (cut(&wa), cut(&wb))
}

/// How many differing entries [`changes`] names before it only counts.
const SHOWN: usize = 3;

/// The entries of two maps that differ, in words: `what K: A x, B y`
/// (`none` where a map has no entry), the first few only and how many
/// more.
pub fn changes<K: Ord + Copy + fmt::Display, V: PartialEq>(
    what: &str,
    (name_a, a): (&str, &BTreeMap<K, V>),
    (name_b, b): (&str, &BTreeMap<K, V>),
    show: impl Fn(&V) -> String,
) -> Option<String> {
    let keys: std::collections::BTreeSet<K> = a.keys().chain(b.keys()).copied().collect();
    let differing: Vec<K> = keys.into_iter().filter(|k| a.get(k) != b.get(k)).collect();
    if differing.is_empty() {
        return None;
    }
    let show = |v: Option<&V>| v.map_or_else(|| "none".to_string(), &show);
    let mut parts: Vec<String> = differing
        .iter()
        .take(SHOWN)
        .map(|k| {
            format!(
                "{what} {k}: {name_a} {}, {name_b} {}",
                show(a.get(k)),
                show(b.get(k))
            )
        })
        .collect();
    if differing.len() > SHOWN {
        parts.push(format!("{} more", differing.len() - SHOWN));
    }
    Some(parts.join("; "))
}

/// A reference in words: `p1:0 s1 w0` (and `d<cookie>` with a death
/// notification).
pub fn show_ref(r: &RefState) -> String {
    let death = r.death.map(|c| format!(" d{c}")).unwrap_or_default();
    format!("{} s{} w{}{death}", r.node, r.strong, r.weak)
}

fn show_real_ref(r: &RealRef) -> String {
    format!("p{}:{} s{} w{}", r.0, r.1, r.2, r.3)
}

fn show_node(n: &(u32, u32, bool, bool)) -> String {
    format!(
        "s{} w{}{}{}",
        n.0,
        n.1,
        if n.2 { " hs" } else { "" },
        if n.3 { " hw" } else { "" }
    )
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
        if let Some(c) = changes(
            "handle",
            ("model", &refs(m)),
            ("real", &refs(r)),
            show_real_ref,
        ) {
            out.push(format!("p{pid} refs: {c}"));
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
        if let Some(c) = changes("ptr", ("model", &nodes(m)), ("real", &nodes(r)), show_node) {
            out.push(format!("p{pid} nodes: {c}"));
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
                "ret: C {}, Rust {}",
                show_ret(sc.observed.ret),
                show_ret(sr.observed.ret)
            ));
        }
        for what in reads(("C", &sc.observed), ("Rust", &sr.observed)) {
            push(what);
        }
        for (pid, (pc, pr)) in sc.snapshot.procs.iter().zip(&sr.snapshot.procs).enumerate() {
            if let Some(c) = changes(
                "handle",
                ("C", &refs(pc)),
                ("Rust", &refs(pr)),
                show_real_ref,
            ) {
                push(format!("p{pid} refs: {c}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_is_one_short_line() {
        assert_eq!(show_items(&["a", "a", "b"]), "[a ×2, b]");
        // A transaction with many objects: only where the two differ.
        let many = |second: &str| {
            let mut t = format!("transaction handle 1 {second}");
            for h in 2..40 {
                t.push_str(&format!(" handle {h}"));
            }
            t
        };
        let line = show_only(
            ("C", &[many("weak-handle 0")]),
            ("Rust", &[many("weak-handle 2")]),
        );
        assert_eq!(
            line,
            "C only [transaction … weak-handle 0 handle 2 handle 3 … (81 words)], \
             Rust only [transaction … weak-handle 2 handle 2 handle 3 … (81 words)]"
        );
        assert_eq!(
            show_only(("C", &["br-noop"]), ("Rust", &[] as &[&str])),
            "C only [br-noop], Rust only []"
        );
        // Maps: the first few differing entries, then a count.
        let a: BTreeMap<u32, u32> = (0..10).map(|k| (k, k)).collect();
        let b: BTreeMap<u32, u32> = (0..10).map(|k| (k, k + 1)).collect();
        let c = changes("handle", ("C", &a), ("Rust", &b), |v| v.to_string()).unwrap();
        assert!(
            c.starts_with("handle 0: C 0, Rust 1; handle 1: C 1, Rust 2;"),
            "{c}"
        );
        assert!(c.ends_with("; 7 more"), "{c}");
        assert_eq!(
            changes("handle", ("C", &a), ("Rust", &a), |v| v.to_string()),
            None
        );
    }
}
