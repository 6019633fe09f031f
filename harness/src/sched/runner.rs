//! Choosing and running steps: the simulated threads, each step's
//! linearisation in the model, and the checks at every lock release.

use super::capacity::CapacityModel;
use super::corrupt::{CorruptBits, Pick};
use super::schedule::{Chooser, Schedule, Step, ThreadView};
use super::{Program, ThreadOp, FRESH_NODES, PREFILL_NODES, STEP_BOUND};
use crate::bits::{self, Probe};
use crate::check::{self, Check, Checked, Failure, Op, OpKind, Phase};
use crate::designs::{self, Design};
use crate::feedback;
use crate::model::{self, HandleModel, Mismatch};
use core::fmt;
use idpool::{
    Error, Faults, Flavour, Gfp, InvariantViolation, Next, NodeId, NodeRefs, Operation, Request,
};
use std::cell::Cell;

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
    /// Reclaims that lowered the capacity.
    pub reclaims: u32,
    /// Grow commits of a context manager's insert (one that found the map
    /// full and dropped the lock) at which handle 0 had changed hands
    /// since the lock drop: released, or taken by another node.
    pub manager_grow_zero_moved: u32,
    /// Grow commits of a context manager's insert at which another
    /// context manager's node had been inserted since the lock drop.
    pub manager_grow_other_manager: u32,
    /// Kills while another thread's insert had dropped the lock (between
    /// its unlock and its relock).
    pub killed_in_window: u32,
    /// Inserts of a new node refused because the process was dead.
    pub dead_refused: u32,
    /// New references inserted into a dead process (the C driver).
    pub dead_inserted: u32,
    /// Lookups run.
    pub lookups: u32,
    /// Corruptions that changed a bit of the pool.
    pub corruptions: u32,
    /// Pool/`by_handle` mismatches met by a pick, as the model expected:
    /// Rust mainline's warning and `EINVAL`.
    pub mismatch_einval: u32,
    /// The same, Rust's first posting: the warning, and the search goes on.
    pub mismatch_search_on: u32,
    /// The same, C: the kernel's `BUG()`.
    pub mismatch_crash: u32,
}

struct Thread<F: Flavour> {
    ops: std::vec::IntoIter<ThreadOp>,
    current: Option<Running<F>>,
    held: Vec<u32>,
    finished: bool,
    /// The thread's next step is this operation of one critical section
    /// and no allocation ([`ThreadOp::Reclaim`], [`ThreadOp::Kill`],
    /// [`ThreadOp::Lookup`]; no `current`).
    single: Option<ThreadOp>,
}

/// The phase name of a reclaim step.
const RECLAIM: &str = "reclaim";

/// The phase name of an operation of one critical section.
fn single_phase(op: ThreadOp) -> &'static str {
    match op {
        ThreadOp::Kill => "kill",
        ThreadOp::Lookup(_) => "lookup",
        ThreadOp::Corrupt(_) => "corrupt",
        _ => RECLAIM,
    }
}

struct Running<F: Flavour> {
    op: Operation<F>,
    what: ThreadOp,
    steps: usize,
    /// Set at the linearisation point of the operation.
    expected: Option<Result<u32, Error>>,
    /// Whether an allocation of this operation was made to fail.
    alloc_failed: bool,
    /// At its last lock drop before a grow allocation: the node holding
    /// handle 0 and [`Sim::manager_inserts`] then.
    grow_drop: Option<(Option<NodeId>, u32)>,
    /// The process was killed while this insert was between two steps.
    killed_mid_op: bool,
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

/// The simulated process: the table, its model and the threads.
pub(super) struct Sim<'p, F: Flavour> {
    program: &'p Program,
    refs: NodeRefs<F>,
    model: HandleModel,
    prefilled: Vec<u32>,
    threads: Vec<Thread<F>>,
    /// The capacity the pool must have, from the model's state.
    capacity: CapacityModel,
    /// New handles given to a context manager's node so far.
    manager_inserts: u32,
    /// Whether a [`ThreadOp::Kill`] ran.
    dead: bool,
    /// Whether the version refuses a dead process's new references, as
    /// SPEC.md's history tells it ([`crate::history::Rules`]).
    dead_refused: bool,
    /// Lock releases since the last full check ([`FULL_CHECK_EVERY`]).
    since_full: Cell<u32>,
    /// The pool's bits once a corruption changed one, and the warnings
    /// the model expects.
    corrupt: CorruptBits,
    /// The allocator's fault plan, which carries the corruptions.
    faults: Faults,
    out: Outcome,
    /// A change to the table's bits right after one step's critical
    /// section, behind the model's back: a table whose section left a bit
    /// wrong (for the tests that such a table is caught at that section).
    #[cfg(test)]
    wrong_after: Option<(usize, idpool::Corruption)>,
}

/// A lock release compares the whole table at least this often, besides
/// after every commit and at the end.
const FULL_CHECK_EVERY: u32 = 32;

impl<'p, F: Design> Sim<'p, F> {
    /// The table after the program's setup (prefill, then release down to
    /// `keep`), which runs alone with no failure injected. The setup is
    /// checked like any other step: prefill `i` must get handle `i + 1`
    /// (the smallest free id at or above 1), and the table must match the
    /// model once the setup is done.
    pub(super) fn new(program: &'p Program) -> Checked<Self> {
        let mut sim = Sim {
            program,
            refs: NodeRefs::<F>::with_version(program.version),
            model: HandleModel::default(),
            prefilled: Vec::new(),
            threads: Vec::new(),
            capacity: CapacityModel::new(program.pool, program.version, program.threads.len()),
            manager_inserts: 0,
            dead: false,
            dead_refused: crate::history::rules(program.version).dead_refused,
            since_full: Cell::new(0),
            corrupt: CorruptBits::new(
                crate::history::rules(program.version),
                program.pool != super::Pool::AugmentedTree,
            ),
            faults: Faults::default(),
            out: Outcome::default(),
            #[cfg(test)]
            wrong_after: None,
        };
        let no_faults = Faults::default();
        // The prefill only adds handles: every id below the one it gave
        // last is held, so each search starts past it.
        let mut from = 1;
        for i in 0..program.prefill {
            let node = PREFILL_NODES + i as u64;
            let insert = Request::Insert {
                node,
                is_manager: false,
            };
            let expected = sim.model.smallest_free(from);
            from = expected + 1;
            let actual = sim.refs.run(insert, &no_faults);
            if actual != Ok(expected) {
                let what = format_args!("prefill #{i}: expected Ok({expected}), got {actual:?}");
                let capacity = sim.refs.pool().capacity();
                return Err(sim.failure(Check::Outcome, OpKind::Insert, None, capacity, what));
            }
            sim.model.add(node, expected);
            sim.capacity.setup_insert(expected);
            sim.prefilled.push(expected);
        }
        // Then release the highest prefilled handles down to `keep`: a
        // large pool with few ids, one release away from a shrink.
        while sim.prefilled.len() > program.keep as usize {
            let handle = sim.prefilled.pop().unwrap();
            let actual = sim.refs.run(Request::Decrement(handle), &no_faults);
            let removed = sim.model.decrement(handle);
            if removed == Ok(true) {
                sim.capacity.released(handle);
                sim.capacity.setup_release(&sim.model);
            }
            let expected = removed.map(|_| handle);
            if actual != expected {
                let what = format_args!(
                    "release of prefilled handle {handle}: expected {expected:?}, got {actual:?}"
                );
                let capacity = sim.refs.pool().capacity();
                return Err(sim.failure(Check::Outcome, OpKind::Release, None, capacity, what));
            }
        }
        let capacity = sim.refs.pool().capacity();
        if capacity != sim.capacity.cap {
            let what = format_args!(
                "after the prefill of {} and the release down to {}: expected capacity {}, \
                 got {capacity}",
                program.prefill, program.keep, sim.capacity.cap
            );
            return Err(sim.failure(Check::Capacity, OpKind::Insert, None, capacity, what));
        }
        if let Err(m) = sim.compare(Some(&Probe::everything_of(capacity, &sim.model))) {
            let what = format_args!("after the prefill: {}", mismatch_text(&m));
            return Err(sim.failure(check_of(&m), OpKind::Insert, None, capacity, what));
        }
        sim.threads = (program.threads.iter().enumerate())
            .map(|(i, ops)| Thread {
                ops: expand(i, ops).into_iter(),
                current: None,
                held: Vec::new(),
                finished: false,
                single: None,
            })
            .collect();
        Ok(sim)
    }

    /// Plants `c` in the table without telling the model (for the test
    /// that an untracked corruption is found).
    #[cfg(test)]
    pub(super) fn corrupt_behind_the_models_back(&mut self, c: idpool::Corruption) {
        self.faults.corrupt(c);
        self.refs.apply_corruptions(&self.faults);
    }

    /// Changes the table's bits by `c` right after the critical section
    /// of step `step`, without telling the model: the table then looks as
    /// if that section had left the bit wrong.
    #[cfg(test)]
    pub(super) fn wrong_bit_after_step(&mut self, step: usize, c: idpool::Corruption) {
        self.wrong_after = Some((step, c));
    }

    /// Marks the table's process dead without telling the model (for the
    /// test that the end of a run reads the table's death).
    #[cfg(test)]
    pub(super) fn kill_behind_the_models_back(&mut self) {
        self.refs.mark_dead();
    }

    /// Makes the model follow `rules` for corruption (for the test that
    /// a reaction the model does not expect is found).
    #[cfg(test)]
    pub(super) fn corruption_rules(&mut self, rules: crate::history::Rules) {
        self.corrupt = CorruptBits::new(rules, true);
    }

    /// Runs every thread to its end under `chooser`'s decisions.
    pub(super) fn run(mut self, chooser: &mut dyn Chooser) -> Checked<Outcome> {
        loop {
            self.start_idle_ops();
            let runnable: Vec<usize> = (0..self.threads.len())
                .filter(|&i| self.threads[i].current.is_some() || self.threads[i].single.is_some())
                .collect();
            if runnable.is_empty() {
                break;
            }
            let views: Vec<ThreadView> = (self.threads.iter())
                .map(|t| ThreadView {
                    mid_op: t.current.as_ref().is_some_and(|r| r.steps > 0),
                    next_phase: Phase::of(match &t.current {
                        _ if t.single.is_some() => single_phase(t.single.unwrap()),
                        Some(r) => r.op.phase(),
                        None => "done",
                    }),
                })
                .collect();
            let (t, fail_alloc) = chooser.choose(&runnable, &views);
            let others_in_flight = runnable.iter().any(|&i| i != t && views[i].mid_op);
            match self.threads[t].single {
                Some(ThreadOp::Reclaim) => self.reclaim(t, fail_alloc, others_in_flight)?,
                Some(op) => self.single(t, op, others_in_flight)?,
                None => self.step(t, fail_alloc, others_in_flight)?,
            }
        }
        let capacity = self.refs.pool().capacity();
        if self.refs.is_dead() != self.dead {
            let what = format_args!(
                "at the end: the table says the process is {}, the model {}",
                crate::table::life(self.refs.is_dead()),
                crate::table::life(self.dead)
            );
            return Err(self.failure(Check::Death, OpKind::EndOfRun, None, capacity, what));
        }
        if let Some(mismatch) = crate::designs::version_mismatch(&self.refs, self.program.version) {
            let what = format_args!("at the end: {mismatch}");
            return Err(self.failure(Check::Version, OpKind::EndOfRun, None, capacity, what));
        }
        if let Err(e) = self.refs.pool().check_design() {
            let what = format_args!("at the end: {e}");
            return Err(self.failure(
                Check::DesignInvariant,
                OpKind::EndOfRun,
                None,
                capacity,
                what,
            ));
        }
        if let Err(m) = self.compare(Some(&Probe::everything_of(capacity, &self.model))) {
            let what = format_args!("at the end: {}", mismatch_text(&m));
            return Err(self.failure(check_of(&m), OpKind::EndOfRun, None, capacity, what));
        }
        Ok(self.out)
    }

    /// Starts the next operation of every idle thread; an operation with
    /// nothing to act on (no handle held yet) is skipped.
    fn start_idle_ops(&mut self) {
        for t in self.threads.iter_mut() {
            while t.current.is_none() && t.single.is_none() && !t.finished {
                let Some(what) = t.ops.next() else {
                    t.finished = true;
                    break;
                };
                if matches!(
                    what,
                    ThreadOp::Reclaim | ThreadOp::Kill | ThreadOp::Lookup(_) | ThreadOp::Corrupt(_)
                ) {
                    t.single = Some(what);
                    break;
                }
                let Some(request) = request(what, &mut t.held, &mut self.prefilled) else {
                    continue;
                };
                t.current = Some(Running {
                    op: Operation::new(request),
                    what,
                    steps: 0,
                    expected: None,
                    alloc_failed: false,
                    grow_drop: None,
                    killed_mid_op: false,
                });
            }
        }
    }

    /// Runs thread `t`'s next step.
    fn step(&mut self, t: usize, fail_alloc: bool, others_in_flight: bool) -> Checked {
        let capacity = self.refs.pool().capacity();
        let step = self.out.schedule.0.len();
        let running = self.threads[t].current.as_mut().expect("runnable");
        running.steps += 1;
        let (what, phase) = (running.what, Phase::of(running.op.phase()));
        let locked = matches!(running.op.next(), Next::Locked);
        if running.steps > STEP_BOUND {
            let text = format_args!(
                "livelock: thread {t}'s {what:?} did not finish in {STEP_BOUND} steps"
            );
            return Err(self.failure(Check::Livelock, what.kind(), None, capacity, text));
        }
        check::begin_step("concurrent_resize", step, &what, capacity);
        let failed = fail_alloc && !locked;
        check::narrate(|| format!("t{t}:{phase}{}", if failed { "!" } else { "" }));
        self.out.schedule.0.push(Step {
            thread: t,
            phase,
            failed,
        });
        if locked {
            self.critical_section(t, phase, capacity, others_in_flight)?;
        } else {
            running.alloc_failed |= fail_alloc;
            self.capacity.allocating(t, fail_alloc);
            let gfp = if fail_alloc { Gfp::Fail } else { Gfp::Kernel };
            running.op.step_unlocked(gfp);
        }
        self.finish_if_done(t)?;
        self.observe(t, phase, capacity);
        Ok(())
    }

    /// Tells the fuzzer which abstract state the last step led to
    /// ([`crate::feedback`]). This target is about what one thread does
    /// while another holds a lock-drop window open, so the state is that
    /// and nothing else:
    /// - the pool: each design has its own protocol and windows;
    /// - the phase of the step thread `t` just ran (`ran`);
    /// - whether another thread holds a grow window open (between its grow
    ///   request and its commit), and whether another holds a shrink
    ///   window open: a step run inside a window is what can make the
    ///   waiting resizer stale;
    /// - whether the step moved the capacity: a commit that resized, which
    ///   is what makes a pending resizer stale;
    /// - whether handle 0 is live: the context manager's descriptor, which
    ///   the historical C versions handed out without looking;
    /// - while a shrink window is open, how far the highest live handle is
    ///   below a quarter of the capacity ([`shrink_margin_class`]): the
    ///   pending shrink goes stale when the ids climb to that quarter, so
    ///   every insert that brings them closer is a step towards the
    ///   interleaving a shrink must re-validate against.
    ///
    /// Capacity and fill classes, the version and the phase of every
    /// thread were components before: some 12^4 combinations hashed into
    /// [`feedback::SLOTS`] edges, which rewarded libFuzzer for nearly every
    /// input, grew the corpus by thousands of units a minute, and made the
    /// planted stale-shrink bug c3 slower to find than with no state
    /// feedback at all (README, "State feedback").
    fn observe(&self, t: usize, ran: Phase, capacity_before: usize) {
        let in_window = |phases: [Phase; 2]| {
            self.threads.iter().enumerate().any(|(i, thread)| {
                i != t
                    && !thread.finished
                    && thread
                        .current
                        .as_ref()
                        .is_some_and(|r| phases.contains(&Phase::of(r.op.phase())))
            })
        };
        let grow_open = in_window([Phase::GrowAlloc, Phase::GrowCommit]);
        let shrink_open = in_window([Phase::ShrinkAlloc, Phase::ShrinkCommit]);
        let capacity = self.refs.pool().capacity();
        let resized = capacity != capacity_before;
        let margin = if shrink_open {
            shrink_margin_class(capacity, self.model.highest())
        } else {
            0
        };
        let state = feedback::AbstractState::new("concurrent_resize")
            .with(self.program.pool as u64, 8)
            .with(u64::from(self.model.handles.contains_key(&0)), 2)
            .with(phase_class(ran), 12)
            .with(u64::from(grow_open), 2)
            .with(u64::from(shrink_open), 2)
            .with(u64::from(resized), 2)
            .with(margin, SHRINK_MARGIN_CLASSES);
        feedback::observe(state);
    }

    /// Runs thread `t`'s critical section, applies the operation to the
    /// model at its linearisation point, and checks the lock release.
    fn critical_section(
        &mut self,
        t: usize,
        phase: Phase,
        capacity: usize,
        others_in_flight: bool,
    ) -> Checked {
        let running = self.threads[t].current.as_mut().expect("runnable");
        running.op.step_locked(&mut self.refs);
        #[cfg(test)]
        if let Some((step, c)) = self.wrong_after {
            if step + 1 == self.out.schedule.0.len() {
                self.faults.corrupt(c);
                self.refs.apply_corruptions(&self.faults);
            }
        }
        if others_in_flight {
            self.out.interleaved += 1;
        }
        let after = self.refs.pool().capacity();
        if after > capacity {
            self.out.grows += 1;
        } else if after < capacity {
            self.out.shrinks += 1;
        }
        let nodes_before = self.model.nodes.len();
        let refused = self.dead && self.dead_refused;
        // After a corruption an insert's pick sections are the model's
        // too: a pick that meets a mismatch changes bits (and may warn)
        // even when it does not finish the insert.
        let corrupted_pick = match (running.op.request(), phase) {
            (Request::Insert { node, is_manager }, Phase::Pick | Phase::GrowCommit)
                if self.corrupt.active() =>
            {
                Some((node, is_manager))
            }
            _ => None,
        };
        if corrupted_pick.is_none() {
            if let Some(handle) = linearise(running, phase, &mut self.model, refused) {
                self.capacity.released(handle);
                self.corrupt.released(handle);
            }
        }
        let asks = running.op.alloc_site();
        let expected_cap = self
            .capacity
            .section(t, phase, asks, &self.model, self.corrupt.last());
        if expected_cap == 0 {
            self.corrupt.disabled();
        }
        if let Some((node, manager)) = corrupted_pick {
            let pick = (self.corrupt).pick(&mut self.model, node, manager, expected_cap, refused);
            match (pick, running.op.next()) {
                (Pick::Done(outcome), Next::Done(_)) => running.expected = Some(outcome),
                (Pick::Grow, Next::Unlocked) => {}
                // A BUG() the model did not expect (the July 2024
                // collision on a corrupted pool): the crash check below
                // reports it as the finding it is.
                (Pick::Grow, Next::Done(Err(Error::KernelBug { .. }))) => {}
                (pick, next) => {
                    let what = running.what;
                    let text = format_args!(
                        "thread {t}'s {what:?}, phase {phase}: on the corrupted pool the model \
                         expects {pick:?}, the table's operation is at {next:?}"
                    );
                    return Err(self.failure(
                        Check::Outcome,
                        what.kind(),
                        Some(phase),
                        capacity,
                        text,
                    ));
                }
            }
        }
        let running = self.threads[t].current.as_mut().expect("runnable");
        match running.expected {
            Some(Err(Error::Mismatch { .. })) => self.out.mismatch_einval += 1,
            Some(Err(Error::KernelBug { .. })) => self.out.mismatch_crash += 1,
            _ => {}
        }
        self.out.mismatch_search_on += (self.corrupt.warnings.iter())
            .filter(|w| matches!(w, idpool::Warning::Mismatch { warn_on: false, .. }))
            .count() as u32;
        let manager = matches!(running.what, ThreadOp::Insert { manager: true, .. });
        if manager && self.model.nodes.len() > nodes_before {
            self.manager_inserts += 1;
        }
        if let (true, Next::Done(outcome)) = (self.dead, running.op.next()) {
            let new_node = self.model.nodes.len() > nodes_before;
            self.out.dead_inserted += u32::from(new_node);
            self.out.dead_refused += u32::from(outcome == Err(Error::DeadProcess));
            self.out.killed_in_window += u32::from(running.killed_mid_op);
        }
        let holder_of_zero = self.model.handles.get(&0).map(|info| info.node);
        if let (Phase::GrowCommit, Some((holder, inserts)), true) =
            (phase, running.grow_drop.take(), manager)
        {
            if holder != holder_of_zero {
                self.out.manager_grow_zero_moved += 1;
            }
            // This insert's own new handle is no other manager's.
            let own = u32::from(self.model.nodes.len() > nodes_before);
            if self.manager_inserts - own > inserts {
                self.out.manager_grow_other_manager += 1;
            }
        }
        if running.op.alloc_site() == Some(idpool::AllocSite::Grow) {
            running.grow_drop = Some((holder_of_zero, self.manager_inserts));
        }
        let crashed = matches!(running.op.next(), Next::Done(Err(Error::KernelBug { .. })))
            && running
                .expected
                .is_none_or(|e| Next::Done(e) != running.op.next());
        let zero_to_other = matches!(
            (running.what, running.op.next()),
            (ThreadOp::Insert { manager: false, .. }, Next::Done(Ok(0)))
        ) && running.expected != Some(Ok(0));
        if crashed || zero_to_other {
            // The kernel crashed in this critical section, or gave the
            // context manager's descriptor away, and the model did not
            // expect it (only a corruption makes it expect either): that
            // is the finding, before any comparison of the state it left.
            self.finish_if_done(t)?;
            unreachable!("the outcome check fails on a BUG() or a 0 to a non-manager");
        }
        if let Err(e) = F::capacity_rule(capacity, after) {
            let what = running.what;
            let text = format_args!("thread {t}'s {what:?}, phase {phase}: {e}");
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), capacity, text));
        }
        let expected = expected_cap;
        if after != expected {
            let what = running.what;
            let text = format_args!(
                "thread {t}'s {what:?}, phase {phase}: capacity {capacity} before, expected \
                 {expected} after (SPEC's policy on the model's handles and the size asked \
                 for at the lock drop), got {after}"
            );
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), capacity, text));
        }
        let what = running.what;
        self.check_warnings(t, what, phase, after)?;
        let picked = self.corrupt.take_picked();
        self.check_release(t, phase, after, &picked)
    }

    /// The warnings the table logged in this critical section against
    /// those the model expects (none, unless a corruption made a pick meet
    /// a mismatch): an unexpected warning is a finding.
    fn check_warnings(&mut self, t: usize, what: ThreadOp, phase: Phase, cap: usize) -> Checked {
        let expected = std::mem::take(&mut self.corrupt.warnings);
        let actual = self.refs.drain_warnings();
        if actual == expected {
            return Ok(());
        }
        let text = format_args!(
            "thread {t}'s {what:?}, phase {phase}: warnings: expected {expected:?}, got {actual:?}"
        );
        Err(self.failure(Check::Warning, what.kind(), Some(phase), cap, text))
    }

    /// Starts thread `t`'s operation `what` that is one critical section
    /// of its own (a reclaim, a kill, a lookup, a corruption): the step is
    /// named and recorded in the schedule (`failed`: its allocations fail),
    /// the thread has nothing pending any more, and the section counts as
    /// interleaved when other threads are between their sections.
    fn enter_single(
        &mut self,
        t: usize,
        what: ThreadOp,
        phase: Phase,
        failed: bool,
        others_in_flight: bool,
        capacity: usize,
    ) {
        let step = self.out.schedule.0.len();
        check::begin_step("concurrent_resize", step, &what, capacity);
        check::narrate(|| format!("t{t}:{phase}{}", if failed { "!" } else { "" }));
        self.out.schedule.0.push(super::Step {
            thread: t,
            phase,
            failed,
        });
        self.threads[t].single = None;
        if others_in_flight {
            self.out.interleaved += 1;
        }
    }

    /// Runs thread `t`'s [`ThreadOp::Reclaim`]: one critical section, which
    /// changes no handle. The shrinker's capacity must then be
    /// [`designs::reclaimed_capacity`] of the highest live handle in the
    /// model, with the allocations failing as the schedule says.
    fn reclaim(&mut self, t: usize, fail_alloc: bool, others_in_flight: bool) -> Checked {
        let before = self.refs.pool().capacity();
        let what = ThreadOp::Reclaim;
        let phase = Phase::of(RECLAIM);
        self.enter_single(t, what, phase, fail_alloc, others_in_flight, before);
        let gfp = if fail_alloc { Gfp::Fail } else { Gfp::Kernel };
        let given = F::reclaim_refs(&mut self.refs, gfp);
        let after = self.refs.pool().capacity();
        if after < before {
            self.out.reclaims += 1;
        }
        // The policy reads the pool's highest set bit: the highest handle,
        // or the corruption record's highest bit.
        let last =
            (self.corrupt.last()).unwrap_or_else(|| self.model.highest().map(|h| h as usize));
        let expected = match given {
            Some(_) => designs::reclaimed_capacity(before, last, fail_alloc),
            None => before,
        };
        let given_back = given.unwrap_or(0);
        if (after, given_back) != (expected, before - expected) {
            let text = format_args!(
                "thread {t}'s reclaim (allocations fail: {fail_alloc}) of {before} ids, highest \
                 handle {last:?}: expected capacity {expected} ({} ids given back), got {after} \
                 ({given:?} given back)",
                before - expected
            );
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), before, text));
        }
        self.capacity.reclaimed(after);
        self.check_warnings(t, what, phase, after)?;
        if let Err(m) = self.compare(Some(&Probe::everything_of(after, &self.model))) {
            let text = format_args!("thread {t}'s reclaim: {}", mismatch_text(&m));
            return Err(self.failure(check_of(&m), what.kind(), Some(phase), after, text));
        }
        Ok(())
    }

    /// Runs thread `t`'s [`ThreadOp::Kill`] or [`ThreadOp::Lookup`]: one
    /// critical section. A kill marks the process dead (the model
    /// remembers, and from then on expects what the version's history
    /// says of a dead process's new references); a lookup must find the
    /// model's handle of the node, or none.
    fn single(&mut self, t: usize, what: ThreadOp, others_in_flight: bool) -> Checked {
        let capacity = self.refs.pool().capacity();
        let phase = Phase::of(single_phase(what));
        self.enter_single(t, what, phase, false, others_in_flight, capacity);
        match what {
            ThreadOp::Kill => {
                self.refs.mark_dead();
                self.dead = true;
                // Every insert that has dropped the lock and not yet
                // relocked for good sees the death at its next section.
                for r in self.threads.iter_mut().filter_map(|t| t.current.as_mut()) {
                    if matches!(r.what, ThreadOp::Insert { .. }) && r.steps > 0 {
                        r.killed_mid_op = true;
                    }
                }
            }
            ThreadOp::Lookup(node) => {
                let actual = self.refs.lookup(node);
                let expected = self.model.nodes.get(&node).copied();
                self.out.lookups += 1;
                if actual != expected {
                    let text = format_args!(
                        "thread {t}'s lookup of node {node}: expected {expected:?}, got {actual:?}"
                    );
                    return Err(self.failure(Check::Outcome, what.kind(), None, capacity, text));
                }
            }
            ThreadOp::Corrupt(bit) => {
                // Resolved on the model's record, planned in the fault plan
                // and applied by the table as this section starts.
                let c = self
                    .corrupt
                    .resolve(bit, &self.model, capacity, self.capacity.bit_zero());
                check::narrate(|| format!("t{t}: corruption {c:?}"));
                if let Some(c) = c {
                    self.faults.corrupt(c);
                    self.corrupt.apply(c, &self.model, self.capacity.bit_zero());
                    self.out.corruptions += 1;
                }
                self.refs.apply_corruptions(&self.faults);
            }
            other => unreachable!("{other:?} is no single critical section"),
        }
        let after = self.refs.pool().capacity();
        if after != capacity {
            let text = format_args!("thread {t}'s {what:?}: capacity {capacity} became {after}");
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), capacity, text));
        }
        // A lookup or a kill changes no handle: the count and the
        // boundaries' bits, or the whole table (and the design's
        // invariants) when a full check is due (see [`Sim::full_due`]).
        let handles = self.refs.by_handle().len();
        if handles != self.model.handles.len() {
            let text = format_args!(
                "thread {t}'s {what:?}: {handles} handles, model {}",
                self.model.handles.len()
            );
            return Err(self.failure(Check::ByHandle, what.kind(), Some(phase), after, text));
        }
        self.check_warnings(t, what, phase, after)?;
        // A corruption's own section compares everything: the model's
        // record of the bits against the pool's, as the corruption left them.
        let compared = match self.full_due(false) || matches!(what, ThreadOp::Corrupt(_)) {
            true => self.compare_whole(&Probe::everything_of(after, &self.model)),
            false => self
                .compare_bits(&Probe::boundaries(after, &self.model))
                .map_err(|m| (check_of(&m), mismatch_text(&m))),
        };
        compared.map_err(|(check, text)| {
            let text = format_args!("thread {t}'s {what:?}: {text}");
            self.failure(check, what.kind(), Some(phase), after, text)
        })
    }

    /// The whole table against the model (the pool's bits as `probe`
    /// reads them), then the design's own invariants.
    fn compare_whole(&self, probe: &Probe) -> Result<(), (Check, String)> {
        self.compare(Some(probe))
            .map_err(|m| (check_of(&m), mismatch_text(&m)))?;
        self.refs
            .pool()
            .check_design()
            .map_err(|e| (Check::DesignInvariant, e))
    }

    /// A full check costs O(handles), and bulk programs hold thousands: it
    /// runs after every commit, at every [`FULL_CHECK_EVERY`]th lock
    /// release in between and at the end (whatever the table's size), and
    /// the other releases compare the number of handles and the bits of the
    /// ids they touched.
    ///
    /// The pool's bits are read one id at a time ([`crate::bits`]): every
    /// id below the capacity with the full check, else the ids this
    /// operation touched and the boundaries.
    /// Whether this lock release compares the whole table: after a
    /// `commit`, and once [`FULL_CHECK_EVERY`] releases have passed since
    /// the last full check.
    fn full_due(&self, commit: bool) -> bool {
        let due = commit || self.since_full.get() + 1 >= FULL_CHECK_EVERY;
        self.since_full
            .set(if due { 0 } else { self.since_full.get() + 1 });
        due
    }

    fn check_release(&self, t: usize, phase: Phase, capacity: usize, picked: &[u32]) -> Checked {
        let running = self.threads[t].current.as_ref().expect("runnable");
        let what = running.what;
        let handles = self.refs.by_handle().len();
        // After a corruption the full check keeps its schedule: the whole
        // table, with the disagreement the record predicts, at commits,
        // every FULL_CHECK_EVERY releases and the end. At every release
        // the touched ids, the boundaries and every id whose bit the
        // model's pick set in this section (a mismatch id the pool
        // offered: a table that skipped its bit is caught here, before a
        // release of that handle clears it again) are read against the
        // record.
        let full = self.full_due(phase.is_commit());
        let mut probe = Probe::boundaries(capacity, &self.model);
        for &id in picked {
            probe.touch(id);
        }
        match running.op.request() {
            Request::Increment(h) | Request::Decrement(h) => {
                probe.touch(h);
            }
            Request::Insert { .. } => {}
        }
        if let Next::Done(Ok(h)) = running.op.next() {
            probe.touch(h);
        }
        let (check, text) = if full {
            probe.everything(capacity, &self.model);
            match self.compare_whole(&probe) {
                Ok(()) => return Ok(()),
                Err(failed) => failed,
            }
        } else if handles != self.model.handles.len() {
            let text = format!("{handles} handles, model {}", self.model.handles.len());
            (Check::ByHandle, text)
        } else if let Err(m) = self.compare_bits(&probe) {
            (check_of(&m), mismatch_text(&m))
        } else {
            return Ok(());
        };
        let text = format_args!("thread {t}'s {what:?}, phase {phase}: {text}");
        Err(self.failure(check, what.kind(), Some(phase), capacity, text))
    }

    /// When thread `t`'s operation is done: compare its result with the
    /// model's, and remember the handle it holds.
    fn finish_if_done(&mut self, t: usize) -> Checked {
        let thread = &mut self.threads[t];
        let Next::Done(actual) = thread.current.as_ref().expect("runnable").op.next() else {
            return Ok(());
        };
        let running = thread.current.take().unwrap();
        check::narrate(|| format!("t{t} done: {actual:?} (model {:?})", running.expected));
        // An insert whose allocation failed ends where it failed, often
        // outside any critical section, having changed nothing.
        let failed_insert = running.expected.is_none()
            && running.alloc_failed
            && actual == Err(Error::NoMemory)
            && matches!(running.what, ThreadOp::Insert { .. });
        if running.expected != Some(actual) && !failed_insert {
            let what = running.what;
            let capacity = self.refs.pool().capacity();
            if let Err(Error::KernelBug { id }) = actual {
                // `expected` is still `None` when the crash comes before the
                // operation's linearisation point: the model predicted no
                // crash, and no outcome yet.
                let expected = match running.expected {
                    Some(outcome) => format!("{outcome:?}"),
                    None => "no crash (the operation had not reached its \
                             linearisation point)"
                        .to_string(),
                };
                let text = format_args!(
                    "thread {t}'s {what:?}: kernel BUG() in binder_get_ref_for_node_olocked: \
                     descriptor {id} is already in refs_by_desc; the model expected {expected}"
                );
                let manager = matches!(what, ThreadOp::Insert { manager: true, .. });
                let detail = check::Detail::Crash {
                    version: self.program.version,
                    id,
                    manager,
                };
                return Err(self
                    .failure(Check::KernelCrash, what.kind(), None, capacity, text)
                    .with_detail(detail));
            }
            if let (ThreadOp::Insert { manager: false, .. }, Ok(0)) = (what, actual) {
                let text = format_args!(
                    "thread {t}'s {what:?}: new handle 0 given to a non-manager (model {:?})",
                    running.expected
                );
                return Err(self.failure(Check::HandleZero, what.kind(), None, capacity, text));
            }
            let text = format_args!(
                "thread {t}'s {what:?}: expected {:?}, got {actual:?}",
                running.expected
            );
            return Err(self.failure(Check::Outcome, what.kind(), None, capacity, text));
        }
        if running.alloc_failed && actual.is_err() {
            self.out.failed_allocs += 1;
        }
        if let (ThreadOp::Insert { .. } | ThreadOp::Increment(_), Ok(h)) = (running.what, actual) {
            thread.held.push(h);
        }
        Ok(())
    }

    /// The table's invariants, `by_handle` against the model's, then the
    /// pool's bits that `probe` names.
    /// After a corruption, the pool/`by_handle` disagreement the table
    /// reports must be exactly the one the model's record predicts (the
    /// rule of `handle_table`'s whole-table check).
    fn compare(&self, probe: Option<&Probe>) -> Result<(), Mismatch> {
        let cap = self.refs.pool().capacity();
        let invariants = match (
            self.refs.check_invariants(),
            self.corrupt.expected_disagreement(&self.model, cap),
        ) {
            (
                Err(InvariantViolation::PoolTreeMismatch {
                    only_in_pool,
                    only_in_tree,
                }),
                Some(expected),
            ) if (only_in_pool.clone(), only_in_tree.clone()) == expected => Ok(()),
            (Ok(()), Some((pool, tree))) => return Err(Mismatch::Unreported(pool, tree)),
            (result, _) => result,
        };
        model::compare(invariants, self.refs.by_handle(), &self.model)?;
        model::compare_nodes(self.refs.by_node(), &self.model)?;
        probe.map_or(Ok(()), |probe| self.compare_bits(probe))
    }

    /// The pool's bits that `probe` names against the model's.
    fn compare_bits(&self, probe: &Probe) -> Result<(), Mismatch> {
        if self.corrupt.active() {
            let cap = self.refs.pool().capacity();
            let Some(expected) = self.corrupt.expected_bits(cap) else {
                return Ok(());
            };
            return bits::compare(self.refs.pool(), expected, probe).map_err(Mismatch::PoolBits);
        }
        // The expectation follows the version the program asked for, not
        // the one the table reports.
        let expected = bits::handles_of(&self.model, self.program.version);
        bits::compare(self.refs.pool(), expected, probe).map_err(Mismatch::PoolBits)
    }

    /// A failure at the current step, with the program and the schedule
    /// so far (which replays exactly).
    fn failure(
        &self,
        check: Check,
        op: OpKind,
        phase: Option<Phase>,
        capacity: usize,
        what: fmt::Arguments<'_>,
    ) -> Box<Failure> {
        let step = self.out.schedule.0.len();
        Box::new(Failure {
            target: "concurrent_resize",
            step,
            op,
            check,
            // Named on a historical version only, so that mainline
            // signatures stay as they were.
            flavour: (!matches!(self.program.version.name(), "c-mainline" | "rust-mainline"))
                .then(|| crate::history::side_name(F::NAME, self.program.version)),
            phase,
            capacity,
            detail: None,
            message: format!(
                "concurrent_resize: step {step} of {:?}: {what}\nschedule: {}",
                self.program, self.out.schedule
            ),
        })
    }
}

/// The request `what` makes, given the handles the thread holds and the
/// prefilled ones left; `None` when it has nothing to act on.
fn request(what: ThreadOp, held: &mut Vec<u32>, prefilled: &mut Vec<u32>) -> Option<Request> {
    Some(match what {
        ThreadOp::Insert { node, manager } => Request::Insert {
            node,
            is_manager: manager,
        },
        ThreadOp::InsertMany(_) => unreachable!("expanded when the thread was made"),
        ThreadOp::Reclaim | ThreadOp::Kill | ThreadOp::Lookup(_) | ThreadOp::Corrupt(_) => {
            unreachable!("{what:?} is no request")
        }
        ThreadOp::Release(_) | ThreadOp::Increment(_) if held.is_empty() => return None,
        ThreadOp::Release(k) => Request::Decrement(held.swap_remove(k as usize % held.len())),
        ThreadOp::Increment(k) => Request::Increment(held[k as usize % held.len()]),
        ThreadOp::ReleasePrefill(_) if prefilled.is_empty() => return None,
        ThreadOp::ReleasePrefill(k) => {
            let i = prefilled.len() - 1 - k as usize % prefilled.len();
            Request::Decrement(prefilled.remove(i))
        }
    })
}

/// Applies the running operation to the model if this critical section is
/// its linearisation point: the first section of an increment or a
/// decrement, the section that finishes an insert. Returns the handle a
/// last decrement removed.
fn linearise<F: Flavour>(
    running: &mut Running<F>,
    phase: Phase,
    model: &mut HandleModel,
    dead_refused: bool,
) -> Option<u32> {
    let request = running.op.request();
    match request {
        Request::Increment(h) if phase == Phase::Start => {
            running.expected = Some(model.increment(h));
        }
        Request::Decrement(h) if phase == Phase::Start => {
            let removed = model.decrement(h);
            running.expected = Some(removed.map(|_| h));
            return (removed == Ok(true)).then_some(h);
        }
        Request::Insert { node, is_manager } => {
            let Next::Done(actual) = running.op.next() else {
                return None;
            };
            running.expected = match model.reference(node) {
                Some(h) => Some(Ok(h)),
                None if actual == Err(Error::NoMemory) && running.alloc_failed => None,
                // A dead process's new reference, where the version looks.
                None if dead_refused => Some(Err(Error::DeadProcess)),
                None => {
                    let id = model.smallest_free(u32::from(!is_manager));
                    model.add(node, id);
                    Some(Ok(id))
                }
            };
        }
        _ => {}
    }
    None
}

/// The check a mismatch fails.
fn check_of(m: &Mismatch) -> Check {
    match m {
        Mismatch::Invariant(_) => Check::Invariant,
        Mismatch::ByHandle(_) => Check::ByHandle,
        Mismatch::PoolBits(_) => Check::PoolBits,
        Mismatch::ByNode(_) => Check::ByNode,
        Mismatch::Unreported(..) => Check::Invariant,
    }
}

/// What a mismatch says in a concurrent failure.
fn mismatch_text(m: &Mismatch) -> String {
    match m {
        Mismatch::Invariant(violation) => {
            format!("invariant broken at lock release: {violation}")
        }
        Mismatch::ByHandle(diff) => {
            format!("by_handle differs from the model's (handle, expected, actual): {diff:?}")
        }
        Mismatch::ByNode(diff) => {
            format!("by_node differs from the model's (node, expected, actual): {diff:?}")
        }
        Mismatch::Unreported(pool, tree) => format!(
            "after the corruption the model expects the pool and by_handle to disagree (set \
             in the pool only {pool:?}, in by_handle only {tree:?}), the table reports no \
             disagreement"
        ),
        Mismatch::PoolBits(diff) => {
            format!("the pool's bits differ from the model's (id, expected, actual): {diff:?}")
        }
    }
}

/// The number of classes [`shrink_margin_class`] returns.
const SHRINK_MARGIN_CLASSES: u64 = 6;

/// How many inserts a pending shrink is from going stale: `capacity / 4`
/// less the highest live handle (SPEC's shrink condition: the highest id
/// below a quarter of the capacity), bucketed. 1 when the ids already
/// reach the quarter (the shrink is stale), 2 when one insert is left,
/// then 2 to 8, 9 to 32 and more than 32 left. 0 is for "no shrink
/// window open", which the caller passes itself.
///
/// It is a guide for the fuzzer, not a check, and it is stated for
/// mainline's rule on the live handles: on the C v3 rule (which shrinks
/// at the quarter too) class 1 is not yet stale, and after a corruption
/// the pool decides on its highest set bit, which may not be a handle's.
fn shrink_margin_class(capacity: usize, highest: Option<u32>) -> u64 {
    let quarter = i64::try_from(capacity / 4).unwrap_or(i64::MAX);
    let margin = quarter - highest.map_or(-1, i64::from);
    match margin {
        ..=0 => 1,
        1 => 2,
        2..=8 => 3,
        9..=32 => 4,
        _ => 5,
    }
}

/// A class number for each phase, for the state feedback.
fn phase_class(phase: Phase) -> u64 {
    match phase {
        Phase::Start => 0,
        Phase::AllocRef => 1,
        Phase::Pick => 2,
        Phase::GrowAlloc => 3,
        Phase::GrowCommit => 4,
        Phase::ShrinkAlloc => 5,
        Phase::ShrinkCommit => 6,
        Phase::Done => 7,
        Phase::Other(_) => 8,
    }
}
