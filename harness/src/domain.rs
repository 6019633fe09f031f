//! Value domains that hit the boundaries often.
//!
//! A fuzzer that draws ids and counts uniformly almost never lands on 63, 64
//! or `capacity / 4`. These types spend most of their bytes on the values
//! where the allocator's rules change, and the rest on small plain numbers.

use arbitrary::{Arbitrary, Unstructured};
use core::fmt;

/// The ids and offsets where the bitmap's behaviour changes.
const EDGES: [usize; 9] = [0, 1, 2, 63, 64, 65, 127, 128, 129];

/// An id or an offset, absolute or relative to the current capacity.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    /// A fixed value.
    At(usize),
    /// `capacity / 4 + delta` (delta in -1..=1): the shrink threshold.
    Quarter(i8),
    /// `capacity / 2 + delta`: the shrink target.
    Half(i8),
    /// `capacity + delta`: the end of the map.
    End(i8),
}

impl Point {
    /// The value for a pool of `capacity` ids (saturating at 0).
    pub fn resolve(self, capacity: usize) -> usize {
        let rel = |base: usize, d: i8| base.saturating_add_signed(d as isize);
        match self {
            Point::At(v) => v,
            Point::Quarter(d) => rel(capacity / 4, d),
            Point::Half(d) => rel(capacity / 2, d),
            Point::End(d) => rel(capacity, d),
        }
    }
}

impl<'a> Arbitrary<'a> for Point {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let delta = |u: &mut Unstructured<'a>| u.int_in_range(-1i8..=1);
        Ok(match u.int_in_range(0u8..=15)? {
            0..=8 => Point::At(EDGES[u.int_in_range(0..=EDGES.len() - 1)?]),
            9..=10 => Point::Quarter(delta(u)?),
            11 => Point::Half(delta(u)?),
            12 => Point::End(delta(u)?),
            _ => Point::At(u.int_in_range(0..=300)?),
        })
    }

    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(3))
    }
}

impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rel = |f: &mut fmt::Formatter<'_>, name: &str, d: i8| match d {
            0 => write!(f, "{name}"),
            _ => write!(f, "{name}{d:+}"),
        };
        match *self {
            Point::At(v) => write!(f, "{v}"),
            Point::Quarter(d) => rel(f, "cap/4", d),
            Point::Half(d) => rel(f, "cap/2", d),
            Point::End(d) => rel(f, "cap", d),
        }
    }
}

/// How many ids a bulk operation touches: small edges mostly, and powers of
/// two up to 4096 so that a handful of operations reach deep capacities.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Count(pub usize);

impl<'a> Arbitrary<'a> for Count {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Count(match u.int_in_range(0u8..=7)? {
            0..=3 => [1, 2, 31, 32, 33, 63, 64, 65][u.int_in_range(0..=7)?],
            4..=5 => 1 << u.int_in_range(7..=12)?,
            _ => u.int_in_range(1..=200)?,
        }))
    }

    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(2))
    }
}

impl Count {
    /// Half as many, if more than one: for the minimiser.
    pub fn half(self) -> Option<Count> {
        (self.0 > 1).then_some(Count(self.0 / 2))
    }
}

impl fmt::Debug for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A capacity for a fresh pool: the edges around one and two words, and a
/// few deep ones.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capacity(pub usize);

impl Capacity {
    /// The values drawn from.
    pub const VALUES: [usize; 11] = [0, 1, 63, 64, 65, 127, 128, 129, 256, 4096, 1 << 16];
}

impl<'a> Arbitrary<'a> for Capacity {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Capacity(
            Self::VALUES[u.int_in_range(0..=Self::VALUES.len() - 1)?],
        ))
    }

    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(1))
    }
}

impl fmt::Debug for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A capacity near the ceiling: 2^30 ids is where `grow_request` stops, and
/// `i32::MAX` bits is the longest bitmap.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ceiling(pub usize);

impl Ceiling {
    /// The values drawn from.
    pub const VALUES: [usize; 6] = [
        1 << 29,
        (1 << 30) - 1,
        1 << 30,
        (1 << 30) + 1,
        i32::MAX as usize,
        i32::MAX as usize + 1,
    ];
}

impl<'a> Arbitrary<'a> for Ceiling {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Ceiling(
            Self::VALUES[u.int_in_range(0..=Self::VALUES.len() - 1)?],
        ))
    }

    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(1))
    }
}

impl fmt::Debug for Ceiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
