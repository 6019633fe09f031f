//! The operations of one critical section and no allocation in a
//! `concurrent_resize` run: a reclaim, a kill, a lookup, a corruption.

use super::program::ThreadOp;
use super::sim::{single_phase, Sim, RECLAIM};
use crate::bits::Probe;
use crate::check::{self, Check, Checked, Op, Phase};
use crate::designs::{self, Design};
use crate::sched::Step;
use idpool::Gfp;

impl<F: Design> Sim<'_, F> {
    /// Starts thread `t`'s operation `what` that is one critical section
    /// of its own (a reclaim, a kill, a lookup, a corruption): the step is
    /// named and recorded in the schedule (`failed`: its allocations fail),
    /// the thread has nothing pending any more, and the section counts as
    /// interleaved when other threads are between their sections.
    pub(super) fn enter_single(
        &mut self,
        t: usize,
        what: ThreadOp,
        phase: Phase,
        failed: bool,
        others_in_flight: bool,
        capacity: usize,
    ) {
        let step = self.out.schedule.0.len();
        check::begin_step(self.target, step, &what, capacity);
        check::narrate(|| format!("t{t}:{phase}{}", if failed { "!" } else { "" }));
        self.out.schedule.0.push(Step {
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
    pub(super) fn reclaim(
        &mut self,
        t: usize,
        fail_alloc: bool,
        others_in_flight: bool,
    ) -> Checked {
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
            let text = format_args!("thread {t}'s reclaim: {m}");
            return Err(self.failure(m.check(), what.kind(), Some(phase), after, text));
        }
        Ok(())
    }

    /// Runs thread `t`'s [`ThreadOp::Kill`], [`ThreadOp::Lookup`] or
    /// [`ThreadOp::Corrupt`]: one critical section, which changes no
    /// handle and no capacity.
    pub(super) fn single(&mut self, t: usize, what: ThreadOp, others_in_flight: bool) -> Checked {
        let capacity = self.refs.pool().capacity();
        let phase = Phase::of(single_phase(what));
        self.enter_single(t, what, phase, false, others_in_flight, capacity);
        self.single_op(t, what, capacity)?;
        self.check_single(t, what, phase, capacity)
    }

    /// The section itself. A kill marks the process dead (the model
    /// remembers, and from then on expects what the version's history says
    /// of a dead process's new references); a lookup must find the model's
    /// handle of the node, or none; a corruption is resolved on the model's
    /// record, planned in the fault plan and applied by the table as this
    /// section starts.
    fn single_op(&mut self, t: usize, what: ThreadOp, capacity: usize) -> Checked {
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
                let zero = self.capacity.bit_zero();
                let c = self.corrupt.resolve(bit, &self.model, capacity, zero);
                check::narrate(|| format!("t{t}: corruption {c:?}"));
                if let Some(c) = c {
                    self.faults.corrupt(c);
                    self.corrupt.apply(c, &self.model, zero);
                    self.out.corruptions += 1;
                }
                self.refs.apply_corruptions(&self.faults);
            }
            other => unreachable!("{other:?} is no single critical section"),
        }
        Ok(())
    }

    /// The checks after a single section: the capacity did not move, nor
    /// the number of handles; the warnings; then the boundaries' bits, or
    /// the whole table (and the design's invariants) when a full check is
    /// due ([`Sim::full_due`]) and at a corruption's own section, which
    /// compares the model's record of the bits with the pool's as the
    /// corruption left them.
    fn check_single(&mut self, t: usize, what: ThreadOp, phase: Phase, capacity: usize) -> Checked {
        let after = self.refs.pool().capacity();
        if after != capacity {
            let text = format_args!("thread {t}'s {what:?}: capacity {capacity} became {after}");
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), capacity, text));
        }
        let handles = self.refs.by_handle().len();
        if handles != self.model.handles.len() {
            let text = format_args!(
                "thread {t}'s {what:?}: {handles} handles, model {}",
                self.model.handles.len()
            );
            return Err(self.failure(Check::ByHandle, what.kind(), Some(phase), after, text));
        }
        self.check_warnings(t, what, phase, after)?;
        let compared = match self.full_due(false) || matches!(what, ThreadOp::Corrupt(_)) {
            true => self.compare_whole(&Probe::everything_of(after, &self.model)),
            false => self
                .compare_bits(&Probe::boundaries(after, &self.model))
                .map_err(|m| (m.check(), m.to_string())),
        };
        compared.map_err(|(check, text)| {
            let text = format_args!("thread {t}'s {what:?}: {text}");
            self.failure(check, what.kind(), Some(phase), after, text)
        })
    }
}
