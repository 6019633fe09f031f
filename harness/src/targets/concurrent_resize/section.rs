//! One critical section of a thread's operation in a `concurrent_resize`
//! run: the table's step under the lock, the operation applied to the
//! model at its linearisation point (and, after a corruption, each pick),
//! the capacity the pool must have after it, and the checks at its lock
//! release.

use super::corrupt::Pick;
use super::program::ThreadOp;
use super::sim::{Running, Sim};
use crate::check::{Check, Checked, Op, Phase};
use crate::designs::Design;
use crate::model::HandleModel;
use idpool::{AllocSite, Error, Flavour, Next, NodeId, Request, Warning};

impl<F: Design> Sim<'_, F> {
    /// Runs thread `t`'s critical section, applies the operation to the
    /// model at its linearisation point, and checks the lock release.
    pub(super) fn critical_section(
        &mut self,
        t: usize,
        phase: Phase,
        capacity: usize,
        others_in_flight: bool,
    ) -> Checked {
        let after = self.lock_step(t, capacity, others_in_flight);
        let nodes_before = self.model.nodes.len();
        let expected = self.apply_to_model(t, phase, capacity)?;
        self.count(t, phase, nodes_before);
        self.stop_at_an_unexpected_crash(t)?;
        self.check_capacity(t, phase, capacity, after, expected)?;
        let what = self.running(t).what;
        self.check_warnings(t, what, phase, after)?;
        let picked = self.corrupt.take_picked();
        self.check_release(t, phase, after, &picked)
    }

    /// Thread `t`'s running operation.
    pub(super) fn running(&mut self, t: usize) -> &mut Running<F> {
        self.threads[t].current.as_mut().expect("runnable")
    }

    /// Runs thread `t`'s critical section on the table (in a test, leaving
    /// a bit wrong after it when asked) and counts what it did; the
    /// capacity after it.
    fn lock_step(&mut self, t: usize, capacity: usize, others_in_flight: bool) -> usize {
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
        after
    }

    /// The operation applied to the model if this section is its
    /// linearisation point, or, after a corruption, an insert's pick on
    /// the model's record of the bits (a pick that meets a mismatch
    /// changes bits, and may warn, even when it does not finish the
    /// insert); the capacity the pool must have after the section.
    fn apply_to_model(&mut self, t: usize, phase: Phase, capacity: usize) -> Checked<usize> {
        let refused = self.dead && self.dead_refused;
        let running = self.threads[t].current.as_mut().expect("runnable");
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
        let expected = (self.capacity).section(t, phase, asks, &self.model, self.corrupt.last());
        if expected == 0 {
            self.corrupt.disabled();
        }
        if let Some(insert) = corrupted_pick {
            self.corrupted_pick(t, phase, capacity, insert, expected)?;
        }
        Ok(expected)
    }

    /// An insert's pick section (`insert`: its node and whether it is the
    /// context manager's) on a corrupted pool, by the model's record of the
    /// bits: the outcome it expects where the pick finishes the insert, and
    /// the table's operation where the model says it is.
    fn corrupted_pick(
        &mut self,
        t: usize,
        phase: Phase,
        capacity: usize,
        (node, manager): (NodeId, bool),
        expected_cap: usize,
    ) -> Checked {
        let refused = self.dead && self.dead_refused;
        let pick = (self.corrupt).pick(&mut self.model, node, manager, expected_cap, refused);
        let running = self.threads[t].current.as_mut().expect("runnable");
        match (pick, running.op.next()) {
            (Pick::Done(outcome), Next::Done(_)) => running.expected = Some(outcome),
            (Pick::Grow, Next::Unlocked) => {}
            // A BUG() the model did not expect (the July 2024 collision on
            // a corrupted pool): the crash check reports it as the finding
            // it is.
            (Pick::Grow, Next::Done(Err(Error::KernelBug { .. }))) => {}
            (pick, next) => {
                let what = running.what;
                let text = format_args!(
                    "thread {t}'s {what:?}, phase {phase}: on the corrupted pool the model \
                     expects {pick:?}, the table's operation is at {next:?}"
                );
                return Err(self.failure(Check::Outcome, what.kind(), Some(phase), capacity, text));
            }
        }
        Ok(())
    }

    /// Counts what the section reached, for the smoke test: each version's
    /// reaction to a mismatch, a context manager's insert whose grow
    /// window saw handle 0 change hands or another manager come in, a dead
    /// process's inserts.
    fn count(&mut self, t: usize, phase: Phase, nodes_before: usize) {
        let running = self.threads[t].current.as_mut().expect("runnable");
        match running.expected {
            Some(Err(Error::Mismatch { .. })) => self.out.mismatch_einval += 1,
            Some(Err(Error::KernelBug { .. })) => self.out.mismatch_crash += 1,
            _ => {}
        }
        self.out.mismatch_search_on += (self.corrupt.warnings.iter())
            .filter(|w| matches!(w, Warning::Mismatch { warn_on: false, .. }))
            .count() as u32;
        let new_node = self.model.nodes.len() > nodes_before;
        let manager = matches!(running.what, ThreadOp::Insert { manager: true, .. });
        if manager && new_node {
            self.manager_inserts += 1;
        }
        if let (true, Next::Done(outcome)) = (self.dead, running.op.next()) {
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
            if self.manager_inserts - u32::from(new_node) > inserts {
                self.out.manager_grow_other_manager += 1;
            }
        }
        if running.op.alloc_site() == Some(AllocSite::Grow) {
            running.grow_drop = Some((holder_of_zero, self.manager_inserts));
        }
    }

    /// The kernel crashed in this critical section, or gave the context
    /// manager's descriptor away, and the model did not expect it (only a
    /// corruption makes it expect either): that is the finding, before any
    /// comparison of the state it left.
    fn stop_at_an_unexpected_crash(&mut self, t: usize) -> Checked {
        let running = self.running(t);
        let next = running.op.next();
        let crashed = matches!(next, Next::Done(Err(Error::KernelBug { .. })))
            && running.expected.is_none_or(|e| Next::Done(e) != next);
        let zero_to_other = matches!(
            (running.what, next),
            (ThreadOp::Insert { manager: false, .. }, Next::Done(Ok(0)))
        ) && running.expected != Some(Ok(0));
        if !(crashed || zero_to_other) {
            return Ok(());
        }
        self.finish_if_done(t)?;
        unreachable!("the outcome check fails on a BUG() or a 0 to a non-manager");
    }

    /// The capacity after the section (`after`; `before` it): the design's
    /// own rule, and the one the model computed from its handles and the
    /// size asked for at the lock drop (`expected`).
    fn check_capacity(
        &mut self,
        t: usize,
        phase: Phase,
        before: usize,
        after: usize,
        expected: usize,
    ) -> Checked {
        let what = self.running(t).what;
        if let Err(e) = F::capacity_rule(before, after) {
            let text = format_args!("thread {t}'s {what:?}, phase {phase}: {e}");
            return Err(self.failure(Check::Capacity, what.kind(), Some(phase), before, text));
        }
        if after == expected {
            return Ok(());
        }
        let text = format_args!(
            "thread {t}'s {what:?}, phase {phase}: capacity {before} before, expected \
             {expected} after (the policy of docs/spec.md on the model's handles and the \
             size asked for at the lock drop), got {after}"
        );
        Err(self.failure(Check::Capacity, what.kind(), Some(phase), before, text))
    }

    /// The warnings the table logged in this critical section against
    /// those the model expects (none, unless a corruption made a pick meet
    /// a mismatch): an unexpected warning is a finding.
    pub(super) fn check_warnings(
        &mut self,
        t: usize,
        what: ThreadOp,
        phase: Phase,
        cap: usize,
    ) -> Checked {
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
