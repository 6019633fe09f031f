//! The pool runner's comparisons after a step: the used set, the bits one
//! id at a time, a twin's answers, a kernel pair's two sides, a reset's
//! refusal and the ceiling probe.

use super::api::{Built, PoolApi, Refused};
use super::model::{CGrowSize, PoolModel};
use super::ops::{PoolOp, Resize};
use crate::bits;
use crate::check::{At, Check, Checked, Failure};

/// What a step may have changed, and so what is compared after it: the
/// ids it touched are read one at a time (beside the boundaries, always);
/// a bulk op, a reset or a refused commit also compares the whole used set
/// once; a commit that resized (the map replaced) compares everything, id
/// by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Touched {
    /// This id, if any, read alone.
    Id(Option<usize>),
    /// Many ids: these, read one at a time, and the whole used set.
    Bulk(Vec<usize>),
    /// The ids of this range (clipped to the capacity) and the whole used set.
    Range(core::ops::Range<usize>),
    /// Every id up to the capacity, the used set, and a twin's invariants.
    Everything,
}

impl Touched {
    pub(super) fn is_everything(&self) -> bool {
        matches!(self, Touched::Everything)
    }
    /// Whether the whole used set is compared.
    pub(super) fn used_set(&self) -> bool {
        !matches!(self, Touched::Id(_))
    }
    /// The ids read one at a time besides the boundaries, up to `cap`
    /// (the one past the capacity is a boundary).
    pub(super) fn ids(&self, cap: usize) -> impl Iterator<Item = usize> + '_ {
        let (listed, range): (&[usize], _) = match self {
            Touched::Id(id) => (id.as_slice(), 0..0),
            Touched::Bulk(ids) => (ids, 0..0),
            Touched::Range(r) => (&[], r.start.min(cap + 1)..r.end.min(cap + 1)),
            Touched::Everything => (&[], 0..cap + 1),
        };
        listed.iter().copied().chain(range)
    }
}

/// The pool built, `None` when it was refused, or the failure of a twin
/// that disagreed about refusing.
pub(super) fn built<P>(at: &At<'_, PoolOp>, fresh: Built<P>) -> Checked<Option<P>> {
    match fresh {
        Ok(pool) => Ok(Some(pool)),
        Err(Refused {
            divergence: Some((name, check, what)),
        }) => Err(at.failure(check, Some(name), what)),
        Err(Refused { divergence: None }) => Ok(None),
    }
}

/// `result`, unless the two implementations inside `pool` (a kernel pair)
/// disagreed meanwhile: that disagreement is the failure, reported before
/// the model's own checks, with which side the model stands with.
pub(super) fn unless_diverged<P: PoolApi, T>(
    at: &At<'_, PoolOp>,
    model: &PoolModel,
    pool: &mut P,
    result: Checked<T>,
) -> Checked<T> {
    match pool.diverged() {
        Some(divergence) => {
            let failed = result.as_ref().err().map(|f| &**f);
            Err(kernel_divergence(at, failed, model, pool, &divergence))
        }
        None => result,
    }
}

/// The failure when the two implementations inside `pool` disagree, with
/// which side the model stands with: the model agrees with ours when
/// neither the step's own checks (`failed`) nor the capacity failed.
fn kernel_divergence<P: PoolApi>(
    at: &At<'_, PoolOp>,
    failed: Option<&Failure>,
    model: &PoolModel,
    pool: &P,
    divergence: &str,
) -> Box<Failure> {
    let model_says = match failed {
        Some(f) => format!("the model disagrees with ours too ({})", f.message),
        None if model.cap != pool.capacity() => format!(
            "the model disagrees with ours too (capacity: model {}, ours {})",
            model.cap,
            pool.capacity()
        ),
        None => format!(
            "the model agrees with ours (capacity {}): both read upstream the same way",
            model.cap
        ),
    };
    at.failure(
        Check::Kernel,
        None,
        format_args!("kernel and ours disagree: {divergence}; {model_says}"),
    )
}

/// The design driven beside the pool, if any, answered as the pool did
/// (whose answers the model has just checked); when `full`, its own
/// invariants too.
pub(super) fn check_twin<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &mut P,
    full: bool,
    model: &mut PoolModel,
) -> Checked {
    let Some(flavour) = pool.twin() else {
        return Ok(());
    };
    if let Some((check, what)) = pool.take_divergence(full) {
        return Err(at.failure(check, Some(flavour), what));
    }
    if full && model.cap >= 4096 {
        model.events.design_deep += 1;
    }
    Ok(())
}

/// Reads the pool one id at a time ([`PoolApi::is_used`]) and compares
/// each bit with the model's live set: the boundaries (0, 1, the last id
/// of the capacity and the one past it, the highest live id and the one
/// past it) always, and the ids the step touched (every id up to the
/// capacity after a commit and at the end).
pub(super) fn check_bits<P: PoolApi>(
    at: &At<'_, PoolOp>,
    model: &PoolModel,
    pool: &P,
    touched: &Touched,
) -> Checked {
    let cap = model.cap;
    let last = model.live.last();
    let boundaries = [0, 1, cap.saturating_sub(1), cap]
        .into_iter()
        .chain(last.into_iter().flat_map(|l| [l, l + 1]));
    let diff: Vec<(usize, bool, bool)> = if touched.is_everything() {
        // Every id up to the capacity, a word of ids at a time beside the
        // live set (each id still read alone, `PoolApi::bits`): a call and
        // a step of the walk per id was the runner's hot spot on deep
        // pools; the few boundaries look their ids up.
        let mut diff = Vec::new();
        bits::compare_words(
            0..cap + 1,
            |base, n| model.live.word(base, n),
            |base, n| pool.bits(base, n),
            &mut diff,
            6,
        );
        let room = 6 - diff.len();
        let boundaries = boundaries.map(|id| (id, model.live.contains(id)));
        diff.extend(differing(pool, boundaries, room));
        diff
    } else {
        let ids = touched.ids(cap).chain(boundaries);
        differing(pool, ids.map(|id| (id, model.live.contains(id))), 6)
    };
    if diff.is_empty() {
        return Ok(());
    }
    Err(at.failure(
        Check::PoolBits,
        None,
        format_args!("bits read one id at a time (id, expected, actual): {diff:?}"),
    ))
}

/// The first `limit` `(id, expected, actual)` where the pool's bit
/// differs. No id is read once `limit` are found: a read is an observable
/// of its own (a kernel pair compares its two sides at every read).
fn differing<P: PoolApi>(
    pool: &P,
    expected: impl Iterator<Item = (usize, bool)>,
    limit: usize,
) -> Vec<(usize, bool, bool)> {
    expected
        .filter_map(|(id, expected)| {
            let actual = pool.is_used(id);
            (expected != actual).then_some((id, expected, actual))
        })
        .take(limit)
        .collect()
}

pub(super) fn check_used<P: PoolApi>(at: &At<'_, PoolOp>, model: &PoolModel, pool: &P) -> Checked {
    if pool.used_matches(&model.live) {
        return Ok(());
    }
    let used = pool.used();
    if used.len() == model.live.len() && used.iter().copied().eq(model.live.iter()) {
        return Ok(());
    }
    let lost: Vec<_> = model
        .live
        .iter()
        .filter(|id| used.binary_search(id).is_err())
        .take(8)
        .collect();
    let extra: Vec<_> = used
        .iter()
        .filter(|&&id| !model.live.contains(id))
        .take(8)
        .collect();
    Err(at.failure(
        Check::UsedIds,
        None,
        format_args!(
            "used ids: expected {} ids, got {}; lost {lost:?}, unexpected {extra:?} (first 8 of each)",
            model.live.len(),
            used.len()
        ),
    ))
}

/// [`PoolOp::ProbeCeiling`] on the C flavour: no map of `n` bits is built;
/// the grow size asked at `n` and whether it could be allocated are
/// compared with [`CGrowSize`], up to 2^31 where the 32-bit shift wraps to 0.
fn probe_c_grow<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &P,
    model: &mut PoolModel,
    n: usize,
) -> Checked {
    let Ok(nbits) = u32::try_from(n) else {
        return Ok(());
    };
    let Some((target, allocatable)) = pool.grow_target_at(nbits) else {
        return Ok(());
    };
    let expected = CGrowSize::of(nbits);
    if expected.wraps {
        model.events.grow_target_wrapped += 1;
    }
    at.eq(Check::CeilingGrowRequest, expected.target, target)?;
    match allocatable {
        Some(allocatable) => at.eq(Check::CeilingPoolBuilt, expected.allocatable, allocatable),
        None => Ok(()),
    }
}

/// [`PoolOp::ProbeCeiling`]: a pool of `n` ids built aside must refuse to
/// grow past the ceiling exactly where `docs/spec.md` puts it; for the C flavour,
/// which cannot be built at any size, see [`probe_c_grow`].
pub(super) fn probe_ceiling<P: PoolApi>(
    at: &At<'_, PoolOp>,
    pool: &P,
    model: &mut PoolModel,
    n: usize,
) -> Checked {
    if !P::DIRECT_CAPACITY {
        return probe_c_grow(at, pool, model, n);
    }
    let mut aside = PoolModel::new(model.policy);
    let expected = aside.reset_capacity(n);
    let fresh = built(at, P::reset(n))?;
    at.eq(Check::CeilingPoolBuilt, expected.is_some(), fresh.is_some())?;
    let (Some(cap), Some(mut fresh)) = (expected, fresh) else {
        return Ok(());
    };
    aside.cap = cap;
    at.eq(Check::CeilingPoolCapacity, cap, fresh.capacity())?;
    let target = aside.grow_target();
    if target.is_none() {
        model.events.grow_at_ceiling += 1;
    }
    at.eq(
        Check::CeilingGrowRequest,
        target,
        fresh.request(Resize::Grow).as_ref().map(P::request_len),
    )?;
    // What the pool built aside's twin noted of its own answers.
    if let (Some(flavour), Some((check, what))) = (fresh.twin(), fresh.take_divergence(false)) {
        return Err(at.failure(check, Some(flavour), what));
    }
    Ok(())
}
