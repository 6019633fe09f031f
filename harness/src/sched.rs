//! A simulated multi-thread scheduler that injects concurrent resizes into
//! the windows where Binder drops its lock.
//!
//! # Why step granularity is enough
//!
//! Every handle-table operation is an [`Operation`] step machine whose steps
//! are either one critical section (run with the table's mutex held) or one
//! allocation (run with the lock dropped, touching no shared state). The
//! mutex serialises critical sections, and an unlocked step neither reads
//! nor writes what other threads can see. So every real execution of the
//! protocol, on any number of cores, is equivalent to some sequence of whole
//! steps of the threads involved: the only thing a real scheduler decides
//! is *which thread's next step runs next*, plus whether each allocation
//! succeeds. That is what this scheduler reads from the fuzz input, and all
//! it decides. It re-implements no part of the protocol: it calls
//! [`Operation::step_locked`] and [`Operation::step_unlocked`], the very
//! functions `SharedHandleTable` runs on real threads.
//!
//! # Input
//!
//! The bytes decode to a [`Program`] (a prefill size and 2 to 4 threads with
//! a few table operations each), then the rest is the schedule. Each
//! schedule byte is one decision: its low two bits, modulo the number of
//! runnable threads, choose the thread; bits 2-3 choose how long it runs
//! (one step; until its current operation is done; until it has no
//! operation left; until it holds an allocated resizer and waits to commit
//! it); a byte of `0xf0` or more fails the allocation, if the step is one. Bursts let a short input say "this thread waits in its
//! window while that one does a lot". When the bytes run out, the lowest
//! runnable thread that is not waiting to commit a resize runs, and nothing
//! fails: a thread that holds an allocated resizer commits only when the
//! others are done, so even a schedule of no byte at all opens the widest
//! window. No RNG is involved: the same
//! input is the same execution, and libFuzzer's minimiser shrinks program
//! and schedule together. The schedule as it ran is recorded step by step
//! ([`Decision`]), and that is what a trace stores and replays.
//!
//! # Oracle
//!
//! An operation takes effect at one critical section (its linearisation
//! point): an insert at the section that finishes it, an increment or a
//! decrement at its first. There the naive model applies it and the result
//! is compared: a new handle must be the smallest free id at or above its
//! start *at that moment*, and an insert of a node already present must
//! return that node's handle. After every critical section (every lock
//! release) the table's invariants are checked and `by_handle` must equal
//! the model's. A thread whose operation takes more than [`STEP_BOUND`]
//! steps is reported as a livelock. Every failure prints the schedule so
//! far, which replays exactly.

use crate::check::{self, Failure};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::{
    DBitmap, Error, Faults, Flavour, Gfp, IdPool, Next, NodeId, NodeRefs, Operation, Request,
};
use std::collections::BTreeMap;

/// Nodes the threads share: few, so that two threads insert the same one.
pub const SHARED_NODES: u64 = 6;
/// Prefilled handles refer to nodes from here on, apart from the threads'.
const PREFILL_NODES: NodeId = 1 << 40;
/// Bulk inserts use private nodes from here on.
const FRESH_NODES: NodeId = 1 << 41;
/// The counts [`ThreadOp::InsertMany`] draws from: enough for another
/// thread to fill, grow past, or refill what a resize is about to cut.
pub const BULK_COUNTS: [u16; 7] = [8, 32, 33, 64, 65, 66, 128];
/// The most steps one operation may take before it counts as a livelock.
pub const STEP_BOUND: usize = 256;
/// A schedule byte at or above this fails the allocation it schedules.
pub const FAIL_BYTE: u8 = 0xf0;

/// One operation of a simulated thread.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadOp {
    /// Insert a reference to a shared node.
    Insert {
        /// The node (among [`SHARED_NODES`]).
        #[arbitrary(with = |u: &mut Unstructured| u.int_in_range(0..=SHARED_NODES - 1))]
        node: NodeId,
        /// Whether the caller is the context manager.
        manager: bool,
    },
    /// Drop one reference this thread holds (the k-th, modulo how many).
    Release(u8),
    /// Drop the reference of a prefilled handle, the k-th highest (modulo
    /// how many; 0 is the highest): its last reference, the release that
    /// shrinks.
    ReleasePrefill(#[arbitrary(with = |u: &mut Unstructured| u.int_in_range(0..=3))] u8),
    /// Take one more reference on a handle this thread holds.
    Increment(u8),
    /// Insert this many private nodes, one operation each.
    InsertMany(
        #[arbitrary(with = |u: &mut Unstructured| Ok(BULK_COUNTS[u.int_in_range(0..=BULK_COUNTS.len() - 1)?]))]
         u16,
    ),
}

/// The flavour under test.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    /// The Rust driver's `IdPool`.
    IdPool,
    /// The C driver's `dbitmap`.
    DBitmap,
}

/// What the simulated threads run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// The flavour.
    pub pool: Pool,
    /// Handles `1..=prefill` are inserted before the threads start, so that
    /// the pool starts near a resize boundary.
    pub prefill: u32,
    /// Then all but the lowest `keep` are released again (highest first),
    /// leaving a large pool with few ids. `keep >= prefill` releases none.
    pub keep: u32,
    /// Each thread's operations, in program order.
    pub threads: Vec<Vec<ThreadOp>>,
}

impl<'a> Arbitrary<'a> for Program {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let pool = Pool::arbitrary(u)?;
        let prefill = match u.int_in_range(0u8..=15)? {
            0..=11 => [0, 15, 16, 31, 32, 33, 62, 63, 63, 126, 127, 127, 128, 255]
                [u.int_in_range(0..=13)?],
            _ => u.int_in_range(0..=300)?,
        };
        // Keep the ids below a quarter of the capacity, at it, or above it:
        // the release of the highest then shrinks, or just does not.
        let quarter: u32 = (prefill + 1) / 4;
        let keep = match u.int_in_range(0u8..=3)? {
            0..=1 => [
                quarter,
                quarter + 1,
                quarter.saturating_sub(1),
                1,
                16,
                32,
                64,
            ][u.int_in_range(0..=6)?],
            _ => prefill,
        };
        let n = match u.int_in_range(0u8..=3)? {
            0..=1 => 2,
            n => n + 1,
        };
        let threads = (0..n)
            .map(|_| {
                let len = u.int_in_range(1..=6)?;
                (0..len).map(|_| ThreadOp::arbitrary(u)).collect()
            })
            .collect::<arbitrary::Result<_>>()?;
        Ok(Program {
            pool,
            prefill,
            keep,
            threads,
        })
    }
}

/// One scheduling decision, as it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The thread that ran.
    pub thread: usize,
    /// The phase of its operation that ran (see [`Operation::phase`]).
    pub phase: &'static str,
    /// Whether the step was an allocation that was made to fail.
    pub failed: bool,
}

/// A schedule: the steps in the order they ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Schedule(pub Vec<Step>);

impl fmt::Display for Schedule {
    /// `t0:start t1:start t0:alloc-ref t1:alloc-ref! ...` (`!` marks a
    /// failed allocation); a run of more than four steps of one thread is
    /// shortened to `t0:start…pick (×388)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps = &self.0;
        let mut i = 0;
        let mut first = true;
        while i < steps.len() {
            let run = steps[i..]
                .iter()
                .take_while(|s| s.thread == steps[i].thread)
                .count();
            let shown: Vec<String> = steps[i..i + run]
                .iter()
                .map(|s| {
                    format!(
                        "t{}:{}{}",
                        s.thread,
                        s.phase,
                        if s.failed { "!" } else { "" }
                    )
                })
                .collect();
            let text = if run > 4 {
                format!("{}…{} (×{run})", shown[0], steps[i + run - 1].phase)
            } else {
                shown.join(" ")
            };
            write!(f, "{}{text}", if first { "" } else { " " })?;
            first = false;
            i += run;
        }
        Ok(())
    }
}

/// What a chooser may know of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadView {
    /// Whether it is in the middle of an operation.
    pub mid_op: bool,
    /// The phase of its next step (see [`Operation::phase`]).
    pub next_phase: &'static str,
}

/// Where the scheduling decisions come from.
pub trait Chooser {
    /// Which of the `runnable` threads (given in increasing order) runs
    /// next, and whether its step, if an allocation, fails. `threads[i]`
    /// describes thread `i`.
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool);
}

/// How long a thread chosen by a schedule byte keeps running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    /// Until its current operation is done.
    Operation,
    /// Until it has nothing left to run.
    Thread,
    /// Until it holds an allocated resizer and waits to commit it: parked
    /// in the lock-drop window that matters most.
    ToCommit,
}

/// Decisions read from fuzz bytes, as the module docs describe.
pub struct ByteChooser<'a> {
    bytes: Unstructured<'a>,
    burst: Option<(usize, Burst)>,
}

impl<'a> ByteChooser<'a> {
    /// Decisions from the bytes left in `bytes`.
    pub fn new(bytes: Unstructured<'a>) -> Self {
        ByteChooser { bytes, burst: None }
    }
}

fn at_commit(view: &ThreadView) -> bool {
    matches!(view.next_phase, "grow-commit" | "shrink-commit")
}

impl Chooser for ByteChooser<'_> {
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool) {
        if let Some((t, burst)) = self.burst {
            let going = runnable.contains(&t)
                && match burst {
                    Burst::Thread => true,
                    Burst::Operation => threads[t].mid_op,
                    Burst::ToCommit => threads[t].mid_op && !at_commit(&threads[t]),
                };
            if going {
                return (t, false);
            }
            self.burst = None;
        }
        if self.bytes.is_empty() {
            // Out of bytes: threads parked at a commit go last, so every
            // program exposes its widest window by default.
            let free = runnable.iter().find(|&&t| !at_commit(&threads[t]));
            return (*free.unwrap_or(&runnable[0]), false);
        }
        let b = u8::arbitrary(&mut self.bytes).unwrap_or(0);
        let t = runnable[(b & 3) as usize % runnable.len()];
        self.burst = match (b >> 2) & 3 {
            1 => Some((t, Burst::Operation)),
            2 => Some((t, Burst::Thread)),
            3 => Some((t, Burst::ToCommit)),
            _ => None,
        };
        (t, b >= FAIL_BYTE)
    }
}

/// One scheduling decision: which thread runs, and whether its step, if
/// an allocation, fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The thread.
    pub thread: usize,
    /// Whether its allocation fails.
    pub fail: bool,
}

/// Decisions replayed from a list; a decision naming a thread that cannot
/// run, and every decision past the end, runs the lowest runnable thread
/// with no failure. So any list replays deterministically, which is what
/// the minimiser needs.
pub struct Replay<'a>(pub std::slice::Iter<'a, Decision>);

impl Chooser for Replay<'_> {
    fn choose(&mut self, runnable: &[usize], _: &[ThreadView]) -> (usize, bool) {
        match self.0.next() {
            Some(d) if runnable.contains(&d.thread) => (d.thread, d.fail),
            _ => (runnable[0], false),
        }
    }
}

/// Records the decisions another chooser makes, so that a run that panics
/// still leaves its schedule behind.
pub struct Recorder<C: Chooser> {
    inner: C,
    /// The decisions so far.
    pub decisions: Vec<Decision>,
}

impl<C: Chooser> Recorder<C> {
    /// Records what `inner` decides.
    pub fn new(inner: C) -> Self {
        Recorder {
            inner,
            decisions: Vec::new(),
        }
    }
}

impl<C: Chooser> Chooser for Recorder<C> {
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool) {
        let (thread, fail) = self.inner.choose(runnable, threads);
        self.decisions.push(Decision { thread, fail });
        (thread, fail)
    }
}

/// The naive model: the handle map and nothing else.
#[derive(Default)]
struct Model {
    handles: BTreeMap<u32, (NodeId, u32)>,
    nodes: BTreeMap<NodeId, u32>,
}

impl Model {
    fn smallest_free(&self, start: u32) -> u32 {
        (start..).find(|id| !self.handles.contains_key(id)).unwrap()
    }
}

/// A thread's operations with every [`ThreadOp::InsertMany`] spelled out
/// as inserts of nodes private to the thread.
fn expand(thread: usize, ops: &[ThreadOp]) -> Vec<ThreadOp> {
    let mut fresh = FRESH_NODES + ((thread as NodeId) << 20);
    let mut out = Vec::new();
    for &op in ops {
        match op {
            ThreadOp::InsertMany(n) => out.extend((0..n).map(|_| {
                fresh += 1;
                ThreadOp::Insert {
                    node: fresh,
                    manager: false,
                }
            })),
            op => out.push(op),
        }
    }
    out
}

struct Thread<F: Flavour> {
    ops: std::vec::IntoIter<ThreadOp>,
    current: Option<Running<F>>,
    held: Vec<u32>,
    finished: bool,
}

struct Running<F: Flavour> {
    op: Operation<F>,
    what: ThreadOp,
    steps: usize,
    /// Set at the linearisation point of an increment or decrement.
    expected: Option<Result<u32, Error>>,
    /// Whether an allocation of this operation was made to fail.
    alloc_failed: bool,
}

/// How a run went, for the smoke test and the triage tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The steps that ran.
    pub schedule: Schedule,
    /// Grows that raised the capacity.
    pub grows: u32,
    /// Shrinks that lowered it.
    pub shrinks: u32,
    /// Times a thread's lock was dropped while another thread's operation
    /// was between two of its steps: the windows this scheduler is for.
    pub interleaved: u32,
    /// Operations that ended with an injected allocation failure.
    pub failed_allocs: u32,
}

/// Runs `program` under the decisions of `chooser`. Panics at the first
/// divergence, broken invariant or livelock, printing the schedule so far.
pub fn run(program: &Program, chooser: &mut dyn Chooser) -> Outcome {
    match program.pool {
        Pool::IdPool => run_flavour::<IdPool>(program, chooser),
        Pool::DBitmap => run_flavour::<DBitmap>(program, chooser),
    }
}

fn run_flavour<F: Flavour>(program: &Program, chooser: &mut dyn Chooser) -> Outcome {
    let mut refs = NodeRefs::<F>::new();
    let mut model = Model::default();
    let mut prefilled = Vec::new();
    // Setup runs alone, with no failure injected.
    let no_faults = Faults::default();
    for i in 0..program.prefill {
        let node = PREFILL_NODES + i as u64;
        let insert = Request::Insert {
            node,
            is_manager: false,
        };
        let handle = refs.run(insert, &no_faults).expect("prefill succeeds");
        model.handles.insert(handle, (node, 1));
        model.nodes.insert(node, handle);
        prefilled.push(handle);
    }
    // Then release the highest prefilled handles down to `keep`: a large
    // pool with few ids, one release away from a shrink.
    while prefilled.len() > program.keep as usize {
        let handle = prefilled.pop().unwrap();
        refs.run(Request::Decrement(handle), &no_faults)
            .expect("a prefilled handle");
        model.handles.remove(&handle);
        model.nodes.retain(|_, h| *h != handle);
    }
    let mut threads: Vec<Thread<F>> = program
        .threads
        .iter()
        .enumerate()
        .map(|(i, ops)| Thread {
            ops: expand(i, ops).into_iter(),
            current: None,
            held: Vec::new(),
            finished: false,
        })
        .collect();
    let mut out = Outcome::default();
    let fail = |out: &Outcome,
                check: &str,
                op: &dyn fmt::Debug,
                capacity: usize,
                what: fmt::Arguments<'_>|
     -> ! {
        check::fail(Failure {
            target: "concurrent_resize",
            step: out.schedule.0.len(),
            op_kind: check::kind_of(&op),
            check: check.to_string(),
            capacity,
            message: format!(
                "concurrent_resize: step {} of {program:?}: {what}\nschedule: {}",
                out.schedule.0.len(),
                out.schedule
            ),
        })
    };

    loop {
        // Start the next operation of every idle thread; an operation with
        // nothing to act on (no handle held yet) is skipped.
        for t in threads.iter_mut() {
            while t.current.is_none() && !t.finished {
                let Some(what) = t.ops.next() else {
                    t.finished = true;
                    break;
                };
                let request = match what {
                    ThreadOp::Insert { node, manager } => Request::Insert {
                        node,
                        is_manager: manager,
                    },
                    ThreadOp::InsertMany(_) => unreachable!("expanded when the thread was made"),
                    ThreadOp::Release(_) | ThreadOp::Increment(_) if t.held.is_empty() => continue,
                    ThreadOp::Release(k) => {
                        Request::Decrement(t.held.swap_remove(k as usize % t.held.len()))
                    }
                    ThreadOp::Increment(k) => Request::Increment(t.held[k as usize % t.held.len()]),
                    ThreadOp::ReleasePrefill(_) if prefilled.is_empty() => continue,
                    ThreadOp::ReleasePrefill(k) => {
                        let i = prefilled.len() - 1 - k as usize % prefilled.len();
                        Request::Decrement(prefilled.remove(i))
                    }
                };
                t.current = Some(Running {
                    op: Operation::new(request),
                    what,
                    steps: 0,
                    expected: None,
                    alloc_failed: false,
                });
            }
        }
        let runnable: Vec<usize> = (0..threads.len())
            .filter(|&i| threads[i].current.is_some())
            .collect();
        if runnable.is_empty() {
            break;
        }
        let views: Vec<ThreadView> = threads
            .iter()
            .map(|t| ThreadView {
                mid_op: t.current.as_ref().is_some_and(|r| r.steps > 0),
                next_phase: t.current.as_ref().map_or("done", |r| r.op.phase()),
            })
            .collect();
        let (t, fail_alloc) = chooser.choose(&runnable, &views);
        let others_in_flight = runnable
            .iter()
            .any(|&i| i != t && threads[i].current.as_ref().is_some_and(|r| r.steps > 0));
        let thread = &mut threads[t];
        let running = thread.current.as_mut().expect("runnable");
        running.steps += 1;
        if running.steps > STEP_BOUND {
            fail(
                &out,
                "livelock",
                &running.what,
                refs.pool().capacity(),
                format_args!(
                    "livelock: thread {t}'s {:?} did not finish in {STEP_BOUND} steps",
                    running.what
                ),
            );
        }
        let phase = running.op.phase();
        let capacity = refs.pool().capacity();
        let locked = matches!(running.op.next(), Next::Locked);
        check::begin_step(
            "concurrent_resize",
            out.schedule.0.len(),
            &running.what,
            capacity,
        );
        check::narrate(|| {
            let bang = if fail_alloc && !locked { "!" } else { "" };
            format!("t{t}:{phase}{bang}")
        });
        out.schedule.0.push(Step {
            thread: t,
            phase,
            failed: fail_alloc && !locked,
        });
        if locked {
            running.op.step_locked(&mut refs);
            if others_in_flight {
                out.interleaved += 1;
            }
            let after = refs.pool().capacity();
            if after > capacity {
                out.grows += 1;
            } else if after < capacity {
                out.shrinks += 1;
            }
            // Increments and decrements take effect at their first section.
            let request = running.op.request();
            if phase == "start" && !matches!(request, Request::Insert { .. }) {
                running.expected = Some(match request {
                    Request::Increment(h) => match model.handles.get_mut(&h) {
                        Some(entry) => {
                            entry.1 += 1;
                            Ok(h)
                        }
                        None => Err(Error::UnknownHandle(h)),
                    },
                    Request::Decrement(h) => match model.handles.get_mut(&h) {
                        Some(entry) => {
                            entry.1 -= 1;
                            if entry.1 == 0 {
                                let node = entry.0;
                                model.handles.remove(&h);
                                model.nodes.remove(&node);
                            }
                            Ok(h)
                        }
                        None => Err(Error::UnknownHandle(h)),
                    },
                    Request::Insert { .. } => unreachable!(),
                });
            }
            if let (Next::Done(actual), Request::Insert { node, is_manager }) =
                (running.op.next(), request)
            {
                // An insert takes effect at the section that finishes it.
                let expected = match model.nodes.get(&node) {
                    Some(&h) => {
                        model.handles.get_mut(&h).unwrap().1 += 1;
                        Some(Ok(h))
                    }
                    None => match actual {
                        Err(Error::NoMemory) if running.alloc_failed => None,
                        _ => {
                            let id = model.smallest_free(if is_manager { 0 } else { 1 });
                            model.handles.insert(id, (node, 1));
                            model.nodes.insert(node, id);
                            Some(Ok(id))
                        }
                    },
                };
                running.expected = expected;
            }
            // Every lock release is checked in full while the table is
            // small. A check costs O(handles), and bulk programs hold
            // thousands: above FULL_CHECK_LIMIT handles, the full check runs
            // after every commit, every 32nd step and at the end, and the
            // other releases compare the number of handles.
            let full = refs.by_handle().len() <= FULL_CHECK_LIMIT
                || phase.ends_with("commit")
                || out.schedule.0.len() % 32 == 0;
            if full {
                check_against_model(&refs, &model, &|check, what| {
                    fail(
                        &out,
                        check,
                        &running.what,
                        after,
                        format_args!("thread {t}'s {:?}, phase {phase}: {what}", running.what),
                    )
                });
            } else if refs.by_handle().len() != model.handles.len() {
                fail(
                    &out,
                    "by_handle",
                    &running.what,
                    after,
                    format_args!(
                        "thread {t}'s {:?}, phase {phase}: {} handles, model {}",
                        running.what,
                        refs.by_handle().len(),
                        model.handles.len()
                    ),
                );
            }
        } else {
            running.alloc_failed |= fail_alloc;
            running
                .op
                .step_unlocked(if fail_alloc { Gfp::Fail } else { Gfp::Kernel });
        }
        if let Next::Done(actual) = running.op.next() {
            let running = thread.current.take().unwrap();
            check::narrate(|| format!("t{t} done: {actual:?} (model {:?})", running.expected));
            // An insert whose allocation failed ends where it failed, often
            // outside any critical section, having changed nothing.
            let failed_insert = running.expected.is_none()
                && running.alloc_failed
                && actual == Err(Error::NoMemory)
                && matches!(running.what, ThreadOp::Insert { .. });
            if running.expected != Some(actual) && !failed_insert {
                fail(
                    &out,
                    "outcome",
                    &running.what,
                    refs.pool().capacity(),
                    format_args!(
                        "thread {t}'s {:?}: expected {:?}, got {actual:?}",
                        running.what, running.expected
                    ),
                );
            }
            if running.alloc_failed && actual.is_err() {
                out.failed_allocs += 1;
            }
            if let (ThreadOp::Insert { .. } | ThreadOp::Increment(_), Ok(h)) =
                (running.what, actual)
            {
                thread.held.push(h);
            }
        }
    }
    check_against_model(&refs, &model, &|check, what| {
        fail(
            &out,
            check,
            &"end of run",
            refs.pool().capacity(),
            format_args!("at the end: {what}"),
        )
    });
    out
}

/// Above this many handles, not every lock release gets the full check.
const FULL_CHECK_LIMIT: usize = 128;

/// The table's invariants, and `by_handle` against the model's; `fail`
/// hears the check's name and what is wrong.
fn check_against_model<F: Flavour>(refs: &NodeRefs<F>, model: &Model, fail: &dyn Fn(&str, String)) {
    if let Err(violation) = refs.check_invariants() {
        fail(
            "invariant",
            format!("invariant broken at lock release: {violation}"),
        );
    }
    let table = || {
        refs.by_handle()
            .iter()
            .map(|(&h, info)| (h, (info.node, info.count)))
    };
    if !table().eq(model.handles.iter().map(|(&h, &v)| (h, v))) {
        let actual: BTreeMap<u32, (NodeId, u32)> = table().collect();
        fail(
            "by_handle",
            format!("by_handle {actual:?}, model {:?}", model.handles),
        );
    }
}

/// Decodes a program and the schedule bytes that follow it.
pub fn decode(data: &[u8]) -> Option<(Program, Unstructured<'_>)> {
    let mut u = Unstructured::new(data);
    let program = Program::arbitrary(&mut u).ok()?;
    Some((program, u))
}

/// Runs a program and its schedule decoded from the bytes.
pub fn concurrent_resize(data: &[u8]) -> Outcome {
    match decode(data) {
        Some((program, u)) => run(&program, &mut ByteChooser::new(u)),
        None => Outcome::default(),
    }
}
