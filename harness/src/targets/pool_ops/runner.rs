//! The pool runner: a fresh pool of one flavour and the model, driven by
//! the same operations, compared after every step on what the step
//! touched, and on everything after a resize and at the end.

use super::api::{PoolApi, Shape, BULK_CAP_LIMIT, MAX_GROWS};
use super::checks::{
    built, check_bits, check_twin, check_used, probe_ceiling, unless_diverged, Touched,
};
use super::model::{ModelPending, PoolModel, MAX_PENDING};
use super::ops::{PoolOp, Resize};
use crate::check::{At, Check, Checked, Failure, Flavour, OpKind};
use crate::domain::{Capacity, Ceiling, Count, Point};
use crate::events::Events;
use crate::history;
use crate::oracle::{Policy, MIN};
use idpool::Gfp;

/// Runs `ops` on a fresh pool of flavour `P` and on the model, for target
/// `target` (the registry entry's name, on every failure). After every
/// step the capacity and what the step touched (`Touched`) are compared,
/// with the boundary ids read one at a time; after a commit, at the end of
/// the input, and (the used set) after a bulk op or a reset, everything.
/// The pool is released ([`PoolApi::deferred_release`]) when a reset replaces it
/// and after the last step. The first divergence is the
/// [`Failure`]; a known upstream finding met at a release is the run's
/// failure only if nothing else failed (see [`run_counting`]).
pub fn run<P: PoolApi>(target: &'static str, policy: Policy, ops: &[PoolOp]) -> Checked<Events> {
    let (events, known) = run_counting::<P>(target, policy, ops)?;
    known.map_or(Ok(events), Err)
}

/// [`run`], with the known upstream findings ([`history::Finding`]) met at
/// a release kept apart: such a finding does not end the run (a reset's
/// fresh pool goes on, and the mainline sides stay checked to the end);
/// the run's events come back with the first of them. Any other failure
/// ends the run.
pub fn run_counting<P: PoolApi>(
    target: &'static str,
    policy: Policy,
    ops: &[PoolOp],
) -> Checked<(Events, Option<Box<Failure>>)> {
    let mut pool = P::reset(0).unwrap_or_else(|_| unreachable!("a 64-id pool needs no memory"));
    let mut pending: Pending<P> = Vec::new();
    let mut model = PoolModel::new(policy);
    let mut known = None;
    for (step, op) in ops.iter().enumerate() {
        let at = At {
            target,
            step,
            op,
            capacity: model.cap,
        };
        crate::check::begin_step(target, step, op, model.cap);
        let before = model.cap;
        let applied = apply(&at, &mut pool, &mut pending, &mut model, &mut known);
        // Any step that replaced the map (a commit, a bulk acquire that
        // grew, a reset) is compared in full.
        let touched = match unless_diverged(&at, &model, &mut pool, applied)? {
            _ if model.cap != before => Touched::Everything,
            touched => touched,
        };
        at.eq(Check::Capacity, model.cap, pool.capacity())?;
        model.observe(target, op);
        if model.cap >= 4096 {
            model.events.deep += 1;
        }
        check_after(&at, &mut model, &mut pool, &touched)?;
    }
    if let Some(last) = ops.last() {
        let at = At {
            target,
            step: ops.len() - 1,
            op: last,
            capacity: model.cap,
        };
        check_after(&at, &mut model, &mut pool, &Touched::Everything)?;
    }
    let capacity = model.cap;
    let at_end = |check, flavour, what: String| {
        Box::new(Failure {
            target,
            step: ops.len(),
            op: OpKind::END_OF_RUN,
            check,
            flavour: Some(flavour),
            phase: None,
            capacity,
            detail: None,
            message: format!(
                "{target}: after the last step, at the release (capacity {capacity}): {what}"
            ),
        })
    };
    release_pool(&mut pool, &mut model, at_end, &mut known)?;
    Ok((model.events, known))
}

/// Releases `pool` ([`PoolApi::deferred_release`]): its events join the model's;
/// a failure of the release (`failure` builds it) is kept in `known` when
/// it is a known upstream finding (the first one met), and ends the run
/// otherwise.
fn release_pool<P: PoolApi>(
    pool: &mut P,
    model: &mut PoolModel,
    failure: impl FnOnce(Check, Flavour, String) -> Box<Failure>,
    known: &mut Option<Box<Failure>>,
) -> Checked {
    let released = pool.deferred_release();
    model.events.merge(released.events);
    let Some((check, flavour, what)) = released.failure else {
        return Ok(());
    };
    let failure = failure(check, flavour, what);
    if history::Finding::of(&failure).is_none() {
        return Err(failure);
    }
    known.get_or_insert(failure);
    Ok(())
}

/// The checks after a step that touched `touched`: the used set when the
/// step may have changed many ids, the bits one id at a time (read through
/// both sides of a kernel pair: a disagreement there is the kernel's
/// finding, reported first), and the twin's answers.
fn check_after<P: PoolApi>(
    at: &At<'_, PoolOp>,
    model: &mut PoolModel,
    pool: &mut P,
    touched: &Touched,
) -> Checked {
    if touched.used_set() {
        check_used(at, model, pool)?;
    }
    let bits = check_bits(at, model, pool, touched);
    unless_diverged(at, model, pool, bits)?;
    check_twin(at, pool, touched.is_everything(), model)
}

/// The runner's state besides the pool: the pending resizers, in step with
/// the model's.
type Pending<P> = Vec<(Resize, <P as PoolApi>::Resizer)>;

/// Applies one op to both sides and checks its direct result. Returns
/// what the op may have touched, for the checks after it.
fn apply<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    pending: &mut Pending<P>,
    model: &mut PoolModel,
    known: &mut Option<Box<Failure>>,
) -> Checked<Touched> {
    match *at.op {
        PoolOp::Acquire(offset) => acquire(at, pool, model, offset),
        PoolOp::FindThenDrop(offset) => find_then_drop(at, pool, model, offset),
        PoolOp::Release(id) => {
            let id = id.resolve(model.cap);
            model.live.remove(id);
            pool.release(id);
            Ok(Touched::Id(Some(id)))
        }
        PoolOp::Prepare { kind, fail } => {
            prepare(at, pool, pending, model, kind, fail).map(|_| Touched::Id(None))
        }
        PoolOp::Commit(k) => Ok(commit(pool, pending, model, k)),
        PoolOp::AcquireMany { offset, count } => {
            acquire_many(at, pool, model, offset, count).map(Touched::Bulk)
        }
        PoolOp::ReleaseMany { from, count } => {
            let from = from.resolve(model.cap);
            let range = from..from.saturating_add(count.0);
            release_all(pool, model, range.clone());
            Ok(Touched::Range(range))
        }
        PoolOp::ReleaseFrom(from) => {
            let from = from.resolve(model.cap);
            let doomed: Vec<usize> = model.live.from(from).collect();
            release_all(pool, model, doomed.iter().copied());
            Ok(Touched::Bulk(doomed))
        }
        PoolOp::ProbeCeiling(Ceiling(n)) => {
            probe_ceiling(at, pool, model, n).map(|_| Touched::Id(None))
        }
        PoolOp::Reset(Capacity(n)) => reset(at, pool, model, n, Gfp::Kernel, known),
        PoolOp::ResetFailing(Capacity(n)) => reset(at, pool, model, n, Gfp::Fail, known),
    }
}

/// [`PoolOp::Acquire`]: the smallest free id at or above the offset, on
/// both sides.
fn acquire<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    model: &mut PoolModel,
    offset: Point,
) -> Checked<Touched> {
    let offset = offset.resolve(model.cap);
    let expected = model.smallest_free(offset);
    match expected {
        Some(id) => {
            model.live.insert(id);
        }
        None => model.events.pool_full += 1,
    }
    at.eq(Check::AcquiredId, expected, pool.acquire(offset))?;
    Ok(Touched::Id(expected))
}

/// [`PoolOp::FindThenDrop`]: the id a find offers, read as an index and
/// (where the flavour has that read) as the 32-bit handle; nothing changes.
fn find_then_drop<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    model: &PoolModel,
    offset: Point,
) -> Checked<Touched> {
    let offset = offset.resolve(model.cap);
    let expected = model.smallest_free(offset);
    let found = pool.find(offset);
    at.eq(Check::FoundId, expected, found.map(|(id, _)| id))?;
    if let Some((_, Some(handle))) = found {
        // Ids are below 2^31, so the 32-bit handle is the id.
        let expected = expected.map(|id| u32::try_from(id).expect("below 2^31"));
        at.eq(Check::FoundId, expected, Some(handle))?;
    }
    Ok(Touched::Id(expected))
}

/// [`PoolOp::Commit`]: the `k`-th pending resizer (modulo how many) on
/// both sides. A resize (or a disabled map) replaced the bits: every id is
/// read. A commit the model refuses keeps the map, whose used set is still
/// compared whole.
fn commit<P: PoolApi>(
    pool: &mut P,
    pending: &mut Pending<P>,
    model: &mut PoolModel,
    k: u8,
) -> Touched {
    if model.pending.is_empty() {
        return Touched::Id(None);
    }
    let k = k as usize % model.pending.len();
    let ModelPending { kind, len, ok } = model.pending.remove(k);
    let (_, resizer) = pending.remove(k);
    let before = model.cap;
    model.commit(kind, len, ok);
    pool.commit(kind, resizer);
    if model.cap != before {
        Touched::Everything
    } else {
        Touched::Bulk(Vec::new())
    }
}

/// [`PoolOp::Reset`] (`gfp` `Kernel`) and [`PoolOp::ResetFailing`]
/// (`Fail`): a fresh pool of `n` ids on both sides, or none where the model
/// says none is built (the old one then stays). The old pool is released
/// before the fresh one takes its place.
fn reset<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    model: &mut PoolModel,
    n: usize,
    gfp: Gfp,
    known: &mut Option<Box<Failure>>,
) -> Checked<Touched> {
    let failing = gfp == Gfp::Fail;
    let (expected, fresh) = match failing {
        true => (model.reset_failing_capacity(n), P::reset_failing(n)),
        false => (model.reset_capacity(n), P::reset(n)),
    };
    let fresh = built(at, fresh)?;
    at.eq(Check::ResetSucceeds, expected.is_some(), fresh.is_some())?;
    match (expected, fresh) {
        (Some(cap), Some(fresh)) => {
            let failure = |check, flavour, what| at.failure(check, Some(flavour), what);
            release_pool(pool, model, failure, known)?;
            model.events.disabled_at_init += u32::from(failing && cap == 0);
            model.cap = cap;
            model.live.clear();
            *pool = fresh;
        }
        _ => model.events.reset_refused += u32::from(failing),
    }
    Ok(Touched::Bulk(Vec::new()))
}

/// Releases `ids` on both sides.
fn release_all<P: PoolApi>(
    pool: &mut P,
    model: &mut PoolModel,
    ids: impl IntoIterator<Item = usize>,
) {
    for id in ids {
        model.live.remove(id);
        pool.release(id);
    }
}

/// [`PoolOp::Prepare`]: request on both sides, compare, allocate, and
/// queue the resizer.
fn prepare<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    pending: &mut Pending<P>,
    model: &mut PoolModel,
    kind: Resize,
    fail: bool,
) -> Checked {
    let expected = match kind {
        Resize::Grow => model.grow_target(),
        Resize::Shrink => model.shrink_target(),
    };
    if kind == Resize::Grow && expected.is_none() {
        model.events.grow_at_ceiling += 1;
    }
    let request = pool.request(kind);
    at.eq(
        Check::RequestedSize,
        expected,
        request.as_ref().map(P::request_len),
    )?;
    let (Some(len), Some(request)) = (expected, request) else {
        return Ok(());
    };
    let ok = model.alloc_ok(len, fail);
    if !ok {
        model.events.alloc_failed += 1;
    }
    let resizer = P::realloc(&request, if fail { Gfp::Fail } else { Gfp::Kernel });
    // Rust drops a failed allocation on the spot (no resizer); C keeps a
    // resizer either way, holding NULL when the allocation failed. So the
    // check reads both whether a resizer exists and whether it holds memory.
    let kept = match model.policy {
        Policy::Rust => ok.then_some(true),
        Policy::C => Some(ok),
    };
    at.eq(
        Check::AllocationKept,
        kept,
        resizer.as_ref().map(P::allocated),
    )?;
    if let Some(shape) = resizer.as_ref().and_then(P::shape) {
        // A bitmap of 64 bits or fewer lives inline (docs/spec.md, "Bitmap").
        let expected = Shape {
            len,
            empty: len == 0,
            inline: shape.inline.map(|_| len <= MIN),
        };
        at.eq(Check::ResizerShape, expected, shape)?;
    }
    if let Some(resizer) = resizer {
        if pending.len() == MAX_PENDING {
            pending.remove(0);
            model.pending.remove(0);
        }
        pending.push((kind, resizer));
        model.pending.push(ModelPending { kind, len, ok });
    }
    Ok(())
}

/// [`PoolOp::AcquireMany`]: acquire one id after the other, growing both
/// sides whenever the model is full. Returns the ids acquired.
fn acquire_many<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    model: &mut PoolModel,
    offset: Point,
    count: Count,
) -> Checked<Vec<usize>> {
    let mut acquired = Vec::new();
    let mut next = offset.resolve(model.cap);
    for i in 0..count.0 {
        let expected = loop {
            match model.smallest_free(next) {
                Some(id) => break Some(id),
                // Full from `next` up, wherever `next` is (below the
                // capacity too): grow, as a caller that needs an id must.
                None if model.cap >= BULK_CAP_LIMIT || !model.grow_now() => break None,
                None => {}
            }
        };
        // Only grow the pool when the model did: the pool grows to
        // the same size through its own request/realloc/commit.
        let mut actual = None;
        for _ in 0..MAX_GROWS {
            actual = pool.acquire(next);
            if actual.is_some() || pool.capacity() >= model.cap || !pool.grow_now() {
                break;
            }
        }
        if let Some(id) = expected {
            model.live.insert(id);
            acquired.push(id);
        }
        at.compare(
            Check::BulkId,
            None,
            format_args!("id #{i} of the bulk acquire"),
            expected,
            actual,
        )?;
        at.eq(Check::BulkCapacity, model.cap, pool.capacity())?;
        match expected {
            Some(id) => next = id + 1,
            None => {
                model.events.pool_full += 1;
                break;
            }
        }
    }
    Ok(acquired)
}
