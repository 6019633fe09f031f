//! The checks of one `handle_table` side after a step: the planned
//! failures, the capacity, the bits one id at a time, the shrinker's
//! reclaimable count, and the whole table (its version, its process's
//! death, the design's invariants, the table's own invariants against the
//! disagreement the model expects, `by_handle` and `by_node`).

use super::model::TableModel;
use super::ops::TableOp;
use super::sides::AnyTable;
use crate::bits::Probe;
use crate::check::{At, Check, Checked};
use crate::designs;
use crate::model::compare_invariants;

/// Above this many ids, a pool's every bit is read only at the end of a
/// run and when its capacity changed.
pub(super) const FULL_READ_LIMIT: usize = 1 << 16;

/// The checks of one side after a step: the planned failures it has not
/// consumed, its capacity, then its whole state (at a `boundary` step and
/// whenever the capacity changed from `before`) and the bits: those the
/// step touched and the boundaries, every one at the `last` step and at a
/// resize, and at any whole check of a pool of at most [`FULL_READ_LIMIT`]
/// ids.
pub(super) fn check_after_step(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
    before: usize,
    boundary: bool,
    last: bool,
    touched: &[u32],
) -> Checked {
    // The planned failures not consumed yet: which allocations a step
    // made, per flavour.
    let pending = u64::from(model.pending_any)
        + model
            .pending_at
            .values()
            .map(|&n| u64::from(n))
            .sum::<u64>();
    let flavour = table.flavour();
    at.compare(
        Check::PendingFailures,
        Some(flavour),
        format_args!("{flavour}: planned failures still pending"),
        pending,
        u64::from(table.pending_failures()),
    )?;
    at.compare(
        Check::Capacity,
        Some(flavour),
        format_args!("{flavour}: capacity after the step"),
        model.cap,
        table.capacity(),
    )?;
    let capacity = table.capacity();
    let whole = boundary || capacity != before;
    if whole {
        check_whole(at, table, model)?;
    }
    // Where the model says nothing of any bit (the linear scan, a disabled
    // dbitmap), no bit is compared ([`crate::bits::compare`]).
    if model.knows_bits() {
        let mut probe = Probe::boundaries(capacity, &model.refs);
        // Every id is read at the end, at a resize, and after any whole
        // check of a pool of at most FULL_READ_LIMIT ids; a bigger one
        // (built by `start-from`) is read at its boundaries and the ids the
        // step touched in between.
        if last || capacity != before || (whole && capacity <= FULL_READ_LIMIT) {
            probe.everything(capacity, &model.refs);
        }
        for &id in touched {
            probe.touch(id);
        }
        check_bits(at, table, model, &probe)?;
    }
    // After the bits: a wrong bit that moves the highest one is reported
    // as the bits' difference, not as the count that follows from it.
    if whole {
        check_reclaimable(at, table, model)?;
    }
    Ok(())
}

/// The pool read one id at a time against the model ([`crate::bits`]).
fn check_bits(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
    probe: &Probe,
) -> Checked {
    let flavour = table.flavour();
    table.compare_bits(model, probe).map_err(|diff| {
        at.failure(
            Check::PoolBits,
            Some(flavour),
            format_args!(
                "{flavour}: the pool's bits differ from the model's (id, expected, actual): \
                 {diff:?}"
            ),
        )
    })
}

/// The shrinker's `count_objects` against what the model's reclaim rule
/// gives back now; nothing for a table without the callback.
pub(super) fn check_reclaimable(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
) -> Checked {
    let (reclaimable, expected) = (table.reclaimable_ids(), model.reclaimable_ids());
    if reclaimable == expected {
        return Ok(());
    }
    let flavour = table.flavour();
    Err(at.failure(
        Check::Reclaimable,
        Some(flavour),
        format_args!(
            "{flavour}: a reclaim would give back {expected:?} ids by the model, \
             the table counts {reclaimable:?} (count_objects)"
        ),
    ))
}

/// The whole table against its model: the version it reports, whether it
/// says its process died, the design's own invariants, the table's own
/// invariants (a pool/`by_handle` disagreement is expected exactly where
/// the model's bits say so, after a corruption), `by_handle` and `by_node`.
pub(super) fn check_whole(
    at: &At<'_, TableOp>,
    table: &dyn AnyTable,
    model: &TableModel,
) -> Checked {
    let flavour = table.flavour();
    let fail = |check: Check, what: &dyn core::fmt::Display| {
        at.failure(check, Some(flavour), format_args!("{flavour}: {what}"))
    };
    if let Some(mismatch) = table.version_mismatch(model.version) {
        return Err(fail(Check::Version, &mismatch));
    }
    if let Some(death) = designs::death_mismatch(table.is_dead(), model.dead) {
        return Err(fail(Check::Death, &death));
    }
    if let Err(e) = table.check_design() {
        let what = format!("the design's own invariant broken: {e}");
        return Err(fail(Check::DesignInvariant, &what));
    }
    compare_invariants(table.check_invariants(), model.expected_disagreement())
        .and_then(|()| table.compare_maps(&model.refs))
        .map_err(|m| fail(m.check(), &m))
}
