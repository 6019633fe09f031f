//! The abstract state of a `concurrent_resize` step, for the state
//! feedback ([`crate::feedback`]): the lock-drop windows other threads
//! hold open, and how far a pending shrink is from going stale.

use super::sim::Sim;
use crate::check::Phase;
use crate::designs::Design;
use crate::feedback;

impl<F: Design> Sim<'_, F> {
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
    /// feedback at all (`docs/results/`, the state feedback's pages).
    pub(super) fn observe(&self, t: usize, ran: Phase, capacity_before: usize) {
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
        let state = feedback::AbstractState::new(self.target)
            .with(self.program.pool as u64, 8)
            .with(u64::from(self.model.handles.contains_key(&0)), 2)
            .with(phase_class(ran), 12)
            .with(u64::from(grow_open), 2)
            .with(u64::from(shrink_open), 2)
            .with(u64::from(resized), 2)
            .with(margin, SHRINK_MARGIN_CLASSES);
        feedback::observe(state);
    }
}

/// The number of classes [`shrink_margin_class`] returns.
const SHRINK_MARGIN_CLASSES: u64 = 6;

/// How many inserts a pending shrink is from going stale: `capacity / 4`
/// less the highest live handle (the shrink condition of `docs/spec.md`: the highest id
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
