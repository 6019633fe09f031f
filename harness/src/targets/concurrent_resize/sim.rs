//! The simulated process of a `concurrent_resize` run (`Sim`): the
//! table, its model, the threads and what each is running; its setup
//! (prefill, then release down to `keep`), the loop that asks the chooser
//! which thread runs next, and the checks at the end. A step's critical
//! section is `section.rs`'s, a single-section operation `single.rs`'s,
//! the checks at a lock release `release.rs`'s.

use super::capacity::CapacityModel;
use super::corrupt::CorruptBits;
use super::outcome::Outcome;
use super::program::{Pool, Program, ThreadOp, FRESH_NODES, INSERT, PREFILL_NODES, RELEASE};
use crate::bits::Probe;
use crate::check::{self, Check, Checked, Op, OpKind, Phase};
use crate::designs::{self, Design};
use crate::model::HandleModel;
use crate::sched::{Chooser, Step, ThreadView, STEP_BOUND};
use idpool::{Error, Faults, Flavour, Gfp, Next, NodeId, NodeRefs, Operation, Request};
use std::cell::Cell;

pub(super) struct Thread<F: Flavour> {
    pub(super) ops: std::vec::IntoIter<ThreadOp>,
    pub(super) current: Option<Running<F>>,
    pub(super) held: Vec<u32>,
    pub(super) finished: bool,
    /// The thread's next step is this operation of one critical section
    /// and no allocation ([`ThreadOp::Reclaim`], [`ThreadOp::Kill`],
    /// [`ThreadOp::Lookup`]; no `current`).
    pub(super) single: Option<ThreadOp>,
}

/// The phase name of a reclaim step.
pub(super) const RECLAIM: &str = "reclaim";

/// The phase name of an operation of one critical section.
pub(super) fn single_phase(op: ThreadOp) -> &'static str {
    match op {
        ThreadOp::Kill => "kill",
        ThreadOp::Lookup(_) => "lookup",
        ThreadOp::Corrupt(_) => "corrupt",
        _ => RECLAIM,
    }
}

pub(super) struct Running<F: Flavour> {
    pub(super) op: Operation<F>,
    pub(super) what: ThreadOp,
    pub(super) steps: usize,
    /// Set at the linearisation point of the operation.
    pub(super) expected: Option<Result<u32, Error>>,
    /// Whether an allocation of this operation was made to fail.
    pub(super) alloc_failed: bool,
    /// At its last lock drop before a grow allocation: the node holding
    /// handle 0 and [`Sim::manager_inserts`] then.
    pub(super) grow_drop: Option<(Option<NodeId>, u32)>,
    /// The process was killed while this insert was between two steps.
    pub(super) killed_mid_op: bool,
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
    /// The registry entry's name, on every failure and abstract state.
    pub(super) target: &'static str,
    pub(super) program: &'p Program,
    pub(super) refs: NodeRefs<F>,
    pub(super) model: HandleModel,
    pub(super) prefilled: Vec<u32>,
    pub(super) threads: Vec<Thread<F>>,
    /// The capacity the pool must have, from the model's state.
    pub(super) capacity: CapacityModel,
    /// New handles given to a context manager's node so far.
    pub(super) manager_inserts: u32,
    /// Whether a [`ThreadOp::Kill`] ran.
    pub(super) dead: bool,
    /// Whether the version refuses a dead process's new references, as
    /// its rules say ([`crate::history::Rules`]).
    pub(super) dead_refused: bool,
    /// Lock releases since the last full check ([`FULL_CHECK_EVERY`]).
    pub(super) since_full: Cell<u32>,
    /// The pool's bits once a corruption changed one, and the warnings
    /// the model expects.
    pub(super) corrupt: CorruptBits,
    /// The allocator's fault plan, which carries the corruptions.
    pub(super) faults: Faults,
    pub(super) out: Outcome,
    /// A change to the table's bits right after one step's critical
    /// section, behind the model's back: a table whose section left a bit
    /// wrong (for the tests that such a table is caught at that section).
    #[cfg(test)]
    pub(super) wrong_after: Option<(usize, idpool::Corruption)>,
}

/// A lock release compares the whole table at least this often, besides
/// after every commit and at the end.
pub(super) const FULL_CHECK_EVERY: u32 = 32;

impl<'p, F: Design> Sim<'p, F> {
    /// The table after the program's setup (prefill, then release down to
    /// `keep`), which runs alone with no failure injected, for target
    /// `target`. The setup is checked like any other step: prefill `i` must
    /// get handle `i + 1` (the smallest free id at or above 1), and the
    /// table must match the model once the setup is done.
    pub(super) fn new(target: &'static str, program: &'p Program) -> Checked<Self> {
        let rules = crate::history::rules(program.version);
        let mut sim = Sim {
            target,
            program,
            refs: NodeRefs::<F>::with_version(program.version),
            model: HandleModel::default(),
            prefilled: Vec::new(),
            threads: Vec::new(),
            capacity: CapacityModel::new(program.pool, program.version, program.threads.len()),
            manager_inserts: 0,
            dead: false,
            dead_refused: rules.dead_refused,
            since_full: Cell::new(0),
            corrupt: CorruptBits::new(rules, program.pool != Pool::AugmentedTree),
            faults: Faults::default(),
            out: Outcome::default(),
            #[cfg(test)]
            wrong_after: None,
        };
        sim.prefill()?;
        sim.release_to_keep()?;
        sim.check_setup()?;
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

    /// Inserts the prefilled handles, `1..=prefill`, each checked.
    fn prefill(&mut self) -> Checked {
        let no_faults = Faults::default();
        // The prefill only adds handles: every id below the one it gave
        // last is held, so each search starts past it.
        let mut from = 1;
        for i in 0..self.program.prefill {
            let node = PREFILL_NODES + i as u64;
            let insert = Request::Insert {
                node,
                is_manager: false,
            };
            let expected = self.model.smallest_free(from);
            from = expected + 1;
            let actual = self.refs.run(insert, &no_faults);
            if actual != Ok(expected) {
                let what = format_args!("prefill #{i}: expected Ok({expected}), got {actual:?}");
                let capacity = self.refs.pool().capacity();
                return Err(self.failure(Check::Outcome, INSERT, None, capacity, what));
            }
            self.model.add(node, expected);
            self.capacity.setup_insert(expected);
            self.prefilled.push(expected);
        }
        Ok(())
    }

    /// Releases the highest prefilled handles down to `keep`: a large pool
    /// with few ids, one release away from a shrink.
    fn release_to_keep(&mut self) -> Checked {
        let no_faults = Faults::default();
        while self.prefilled.len() > self.program.keep as usize {
            let handle = self.prefilled.pop().unwrap();
            let actual = self.refs.run(Request::Decrement(handle), &no_faults);
            let removed = self.model.decrement(handle);
            if removed == Ok(true) {
                self.capacity.released(handle);
                self.capacity.setup_release(&self.model);
            }
            let expected = removed.map(|_| handle);
            if actual != expected {
                let what = format_args!(
                    "release of prefilled handle {handle}: expected {expected:?}, got {actual:?}"
                );
                let capacity = self.refs.pool().capacity();
                return Err(self.failure(Check::Outcome, RELEASE, None, capacity, what));
            }
        }
        Ok(())
    }

    /// After the setup: the capacity, and the whole table against the
    /// model.
    fn check_setup(&self) -> Checked {
        let capacity = self.refs.pool().capacity();
        if capacity != self.capacity.cap {
            let what = format_args!(
                "after the prefill of {} and the release down to {}: expected capacity {}, \
                 got {capacity}",
                self.program.prefill, self.program.keep, self.capacity.cap
            );
            return Err(self.failure(Check::Capacity, INSERT, None, capacity, what));
        }
        if let Err(m) = self.compare(Some(&Probe::everything_of(capacity, &self.model))) {
            let what = format_args!("after the prefill: {m}");
            return Err(self.failure(m.check(), INSERT, None, capacity, what));
        }
        Ok(())
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
        self.check_end()?;
        Ok(self.out)
    }

    /// The checks at the end of a run: whether the table says its process
    /// died, the version it reports, the design's own invariants, and the
    /// whole table against the model.
    fn check_end(&self) -> Checked {
        let capacity = self.refs.pool().capacity();
        let end = OpKind::END_OF_RUN;
        if let Some(death) = designs::death_mismatch(self.refs.is_dead(), self.dead) {
            let what = format_args!("at the end: {death}");
            return Err(self.failure(Check::Death, end, None, capacity, what));
        }
        if let Some(mismatch) = designs::version_mismatch(&self.refs, self.program.version) {
            let what = format_args!("at the end: {mismatch}");
            return Err(self.failure(Check::Version, end, None, capacity, what));
        }
        if let Err(e) = self.refs.pool().check_design() {
            let what = format_args!("at the end: {e}");
            return Err(self.failure(Check::DesignInvariant, end, None, capacity, what));
        }
        if let Err(m) = self.compare(Some(&Probe::everything_of(capacity, &self.model))) {
            let what = format_args!("at the end: {m}");
            return Err(self.failure(m.check(), end, None, capacity, what));
        }
        Ok(())
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
        check::begin_step(self.target, step, &what, capacity);
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
