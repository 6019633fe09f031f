//! The pool op language: what `pool_ops`, `dbitmap_ops`, `kernel_dbitmap`
//! and `kernel_idpool` programs are made of, how bytes decode to it
//! (weighted towards the resize windows) and its trace lines.
//!
//! Resizes are split the way the kernel splits them: a resize is
//! *requested* and *allocated* (possibly with an injected failure) by
//! [`PoolOp::Prepare`], and *committed* later by [`PoolOp::Commit`]. Any
//! operation may run in between, so a single thread reaches every state
//! that another thread could create while the lock is dropped.

use crate::check::{Op, OpKind};
use crate::domain::{Capacity, Ceiling, Count, Point};
use crate::text::{arity, limits, one, parse_in, parse_point, OpText};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;

/// One operation on a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// Acquire the smallest free id at or above the offset.
    Acquire(Point),
    /// Find the smallest free id and drop it without acquiring: no change.
    FindThenDrop(Point),
    /// Release an id, live or not, in range or not.
    Release(Point),
    /// Request a resize under the lock and allocate it (or fail to): the
    /// resizer waits in the pending list, oldest first, at most
    /// [`MAX_PENDING`](super::model::MAX_PENDING) (a new one pushes the oldest out). Allocation touches
    /// nothing shared, so when it happens between request and commit does
    /// not matter; only the commit's timing does.
    Prepare {
        /// Grow or shrink.
        kind: Resize,
        /// Whether the allocation fails.
        fail: bool,
    },
    /// Commit the k-th pending resizer (k modulo how many are pending).
    Commit(u8),
    /// Acquire `count` ids from the offset up, growing whenever no id is
    /// free from the current one up (from an offset below the capacity
    /// too).
    AcquireMany {
        /// Where the search starts.
        offset: Point,
        /// How many ids.
        count: Count,
    },
    /// Release `count` consecutive ids starting at `from`.
    ReleaseMany {
        /// The first id.
        from: Point,
        /// How many ids.
        count: Count,
    },
    /// Release every live id at or above the point.
    ReleaseFrom(Point),
    /// Start over with a fresh pool of (at least) this capacity.
    Reset(Capacity),
    /// Build a pool of this capacity aside and ask it to grow: the ceiling.
    /// The pool in use is untouched (a map this large makes every later
    /// scan cost milliseconds).
    ProbeCeiling(Ceiling),
    /// Start over with a fresh pool whose allocation fails (the Rust
    /// `IdPool::with_capacity` with failing flags; the C `dbitmap_init`
    /// failing, after which the map stays disabled). Where nothing is
    /// built, the pool in use stays.
    ResetFailing(Capacity),
}

impl<'a> Arbitrary<'a> for PoolOp {
    /// Weighted: resizes and their commits are common; the ceiling probe,
    /// which maps 128 MiB, is rare. The failing reset came last (100..=103),
    /// so the selector bytes below 100 kept their meaning.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=103)? {
            0..=13 => PoolOp::Acquire(Point::arbitrary(u)?),
            14..=18 => PoolOp::FindThenDrop(Point::arbitrary(u)?),
            19..=29 => PoolOp::Release(Point::arbitrary(u)?),
            30..=47 => PoolOp::Prepare {
                kind: Resize::arbitrary(u)?,
                fail: u.ratio(1, 4)?,
            },
            48..=63 => PoolOp::Commit(u8::arbitrary(u)?),
            64..=75 => PoolOp::AcquireMany {
                offset: Point::arbitrary(u)?,
                count: Count::arbitrary(u)?,
            },
            76..=81 => PoolOp::ReleaseMany {
                from: Point::arbitrary(u)?,
                count: Count::arbitrary(u)?,
            },
            82..=89 => PoolOp::ReleaseFrom(Point::arbitrary(u)?),
            90..=97 => PoolOp::Reset(Capacity::arbitrary(u)?),
            98..=99 => PoolOp::ProbeCeiling(Ceiling::arbitrary(u)?),
            _ => PoolOp::ResetFailing(Capacity::arbitrary(u)?),
        })
    }
}

/// The kinds of pool operations, under their names in signatures and
/// their feedback classes.
impl Op for PoolOp {
    fn kind(&self) -> OpKind {
        let (name, class) = match self {
            PoolOp::Acquire(_) => ("Acquire", 0),
            PoolOp::FindThenDrop(_) => ("FindThenDrop", 1),
            PoolOp::Release(_) => ("Release", 2),
            PoolOp::Prepare { .. } => ("Prepare", 3),
            PoolOp::Commit(_) => ("Commit", 4),
            PoolOp::AcquireMany { .. } => ("AcquireMany", 5),
            PoolOp::ReleaseMany { .. } => ("ReleaseMany", 6),
            PoolOp::ReleaseFrom(_) => ("ReleaseFrom", 7),
            PoolOp::Reset(_) => ("Reset", 8),
            PoolOp::ProbeCeiling(_) => ("ProbeCeiling", 9),
            PoolOp::ResetFailing(_) => ("ResetFailing", 24),
        };
        OpKind::new(name, class)
    }
}

/// Grow or shrink.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resize {
    /// A grow request.
    Grow,
    /// A shrink request.
    Shrink,
}

impl OpText for PoolOp {
    fn write_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PoolOp::Acquire(x) => write!(f, "acquire {x:?}"),
            PoolOp::FindThenDrop(x) => write!(f, "find {x:?}"),
            PoolOp::Release(x) => write!(f, "release {x:?}"),
            PoolOp::Prepare { kind, fail } => {
                let kind = match kind {
                    Resize::Grow => "grow",
                    Resize::Shrink => "shrink",
                };
                write!(f, "prepare {kind}{}", if fail { " fail" } else { "" })
            }
            PoolOp::Commit(k) => write!(f, "commit {k}"),
            PoolOp::AcquireMany { offset, count } => write!(f, "acquire-many {offset:?} {count:?}"),
            PoolOp::ReleaseMany { from, count } => write!(f, "release-many {from:?} {count:?}"),
            PoolOp::ReleaseFrom(x) => write!(f, "release-from {x:?}"),
            PoolOp::Reset(c) => write!(f, "reset {c:?}"),
            PoolOp::ProbeCeiling(c) => write!(f, "probe-ceiling {c:?}"),
            PoolOp::ResetFailing(c) => write!(f, "reset {c:?} fail"),
        }
    }

    fn parse_text(w: &[&str]) -> Result<Self, String> {
        Ok(match w[0] {
            "acquire" => PoolOp::Acquire(one(w, parse_point)?),
            "find" => PoolOp::FindThenDrop(one(w, parse_point)?),
            "release" => PoolOp::Release(one(w, parse_point)?),
            "prepare" => {
                arity(w, 2, 3)?;
                let kind = match w[1] {
                    "grow" => Resize::Grow,
                    "shrink" => Resize::Shrink,
                    other => {
                        return Err(format!(
                            "prepare what? expected grow or shrink, found {other:?}"
                        ))
                    }
                };
                let fail = match w.get(2) {
                    None => false,
                    Some(&"fail") => true,
                    Some(other) => {
                        return Err(format!("expected `fail` or nothing, found {other:?}"))
                    }
                };
                PoolOp::Prepare { kind, fail }
            }
            "commit" => PoolOp::Commit(one(w, |w| parse_in(w, limits::INDEX))?),
            "acquire-many" | "release-many" => {
                arity(w, 3, 3)?;
                let (point, count) = (parse_point(w[1])?, Count(parse_in(w[2], limits::COUNT)?));
                match w[0] {
                    "acquire-many" => PoolOp::AcquireMany {
                        offset: point,
                        count,
                    },
                    _ => PoolOp::ReleaseMany { from: point, count },
                }
            }
            "release-from" => PoolOp::ReleaseFrom(one(w, parse_point)?),
            "reset" => {
                arity(w, 2, 3)?;
                let capacity = Capacity(parse_in(w[1], limits::RESET)?);
                match w.get(2) {
                    None => PoolOp::Reset(capacity),
                    Some(&"fail") => PoolOp::ResetFailing(capacity),
                    Some(other) => {
                        return Err(format!("expected `fail` or nothing, found {other:?}"))
                    }
                }
            }
            "probe-ceiling" => {
                PoolOp::ProbeCeiling(Ceiling(one(w, |w| parse_in(w, limits::CEILING))?))
            }
            other => return Err(format!("unknown pool operation {other:?}")),
        })
    }

    fn simpler(&self) -> Option<Self> {
        match *self {
            PoolOp::AcquireMany { offset, count } => count
                .half()
                .map(|count| PoolOp::AcquireMany { offset, count }),
            PoolOp::ReleaseMany { from, count } => count
                .half()
                .map(|count| PoolOp::ReleaseMany { from, count }),
            PoolOp::Prepare { kind, fail: true } => Some(PoolOp::Prepare { kind, fail: false }),
            _ => None,
        }
    }
}
