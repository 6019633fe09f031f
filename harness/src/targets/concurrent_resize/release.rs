//! The checks at a lock release of a `concurrent_resize` run, and at an
//! operation's end: what a release reads (the touched ids and the
//! boundaries, or the whole table when a full check is due), the outcome
//! against the model's, and the failure with the schedule so far.

use super::program::ThreadOp;
use super::sim::{Running, Sim, FULL_CHECK_EVERY};
use crate::bits::{self, Probe};
use crate::check::{self, Check, Checked, Detail, Failure, Flavour, Op, OpKind, Phase};
use crate::designs::Design;
use crate::model::{self, Mismatch};
use core::fmt;
use idpool::{Error, Next, Request};

impl<F: Design> Sim<'_, F> {
    /// The whole table against the model (the pool's bits as `probe`
    /// reads them), then the design's own invariants.
    pub(super) fn compare_whole(&self, probe: &Probe) -> Result<(), (Check, String)> {
        self.compare(Some(probe))
            .map_err(|m| (m.check(), m.to_string()))?;
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
    pub(super) fn full_due(&self, commit: bool) -> bool {
        let due = commit || self.since_full.get() + 1 >= FULL_CHECK_EVERY;
        self.since_full
            .set(if due { 0 } else { self.since_full.get() + 1 });
        due
    }

    pub(super) fn check_release(
        &self,
        t: usize,
        phase: Phase,
        capacity: usize,
        picked: &[u32],
    ) -> Checked {
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
            (m.check(), m.to_string())
        } else {
            return Ok(());
        };
        let text = format_args!("thread {t}'s {what:?}, phase {phase}: {text}");
        Err(self.failure(check, what.kind(), Some(phase), capacity, text))
    }

    /// When thread `t`'s operation is done: compare its result with the
    /// model's, and remember the handle it holds.
    pub(super) fn finish_if_done(&mut self, t: usize) -> Checked {
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
            return Err(self.outcome_failure(t, &running, actual));
        }
        if running.alloc_failed && actual.is_err() {
            self.out.failed_allocs += 1;
        }
        if let (ThreadOp::Insert { .. } | ThreadOp::Increment(_), Ok(h)) = (running.what, actual) {
            thread.held.push(h);
        }
        Ok(())
    }

    /// The failure of thread `t`'s operation that ended with `actual`,
    /// otherwise than the model expects: a `BUG()` (the model may not have
    /// reached its linearisation point yet: it then predicted no crash,
    /// and no outcome), a new handle 0 to a non-manager, or another
    /// outcome.
    fn outcome_failure(
        &self,
        t: usize,
        running: &Running<F>,
        actual: Result<u32, Error>,
    ) -> Box<Failure> {
        let what = running.what;
        let capacity = self.refs.pool().capacity();
        if let Err(Error::KernelBug { id }) = actual {
            let expected = match running.expected {
                Some(outcome) => format!("{outcome:?}"),
                None => {
                    "no crash (the operation had not reached its linearisation point)".to_string()
                }
            };
            let text = format_args!(
                "thread {t}'s {what:?}: kernel BUG() in binder_get_ref_for_node_olocked: \
                 descriptor {id} is already in refs_by_desc; the model expected {expected}"
            );
            let manager = matches!(what, ThreadOp::Insert { manager: true, .. });
            let detail = Detail::Crash {
                version: self.program.version,
                id,
                manager,
            };
            return self
                .failure(Check::KernelCrash, what.kind(), None, capacity, text)
                .with_detail(detail);
        }
        if let (ThreadOp::Insert { manager: false, .. }, Ok(0)) = (what, actual) {
            let text = format_args!(
                "thread {t}'s {what:?}: new handle 0 given to a non-manager (model {:?})",
                running.expected
            );
            return self.failure(Check::HandleZero, what.kind(), None, capacity, text);
        }
        let text = format_args!(
            "thread {t}'s {what:?}: expected {:?}, got {actual:?}",
            running.expected
        );
        self.failure(Check::Outcome, what.kind(), None, capacity, text)
    }

    /// The table's invariants, `by_handle` against the model's, then the
    /// pool's bits that `probe` names.
    /// After a corruption, the pool/`by_handle` disagreement the table
    /// reports must be exactly the one the model's record predicts (the
    /// rule of `handle_table`'s whole-table check).
    pub(super) fn compare(&self, probe: Option<&Probe>) -> Result<(), Mismatch> {
        let cap = self.refs.pool().capacity();
        let expected = self.corrupt.expected_disagreement(&self.model, cap);
        model::compare_invariants(self.refs.check_invariants(), expected)?;
        model::compare(self.refs.by_handle(), &self.model)?;
        model::compare_nodes(self.refs.by_node(), &self.model)?;
        probe.map_or(Ok(()), |probe| self.compare_bits(probe))
    }

    /// The pool's bits that `probe` names against the model's.
    pub(super) fn compare_bits(&self, probe: &Probe) -> Result<(), Mismatch> {
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
    pub(super) fn failure(
        &self,
        check: Check,
        op: OpKind,
        phase: Option<Phase>,
        capacity: usize,
        what: fmt::Arguments<'_>,
    ) -> Box<Failure> {
        let step = self.out.schedule.0.len();
        Box::new(Failure {
            target: self.target,
            step,
            op,
            check,
            // Named on a historical version only, so that mainline
            // signatures stay as they were.
            flavour: (!matches!(self.program.version.name(), "c-mainline" | "rust-mainline"))
                .then(|| Flavour::on(F::FLAVOUR, self.program.version)),
            phase,
            capacity,
            detail: None,
            message: format!(
                "{}: step {step} of {:?}: {what}\nschedule: {}",
                self.target, self.program, self.out.schedule
            ),
        })
    }
}
