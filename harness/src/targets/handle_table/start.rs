//! `start-from`: a `handle_table` program may start from a process that
//! already holds a few references at given handles
//! ([`idpool::HandleTable::from_handles`]), far above what the
//! smallest-free-id rule reaches cheaply: around 65,535 and 131,071 (the
//! 16- and 17-bit boundaries), up to 2^18, so that every u32/usize cast on
//! the way through the pools is exercised. The inserts, releases and drops
//! of the program then run on top.
//!
//! The bound of 2^18 ([`limits::START_HANDLE`]) is the memory and time
//! budget, not an allocator limit: each bitmap flavour must hold the
//! highest handle (a map of 2^19 bits), and the end of a run and every
//! resize read each id below the capacity one at a time. Handles at or above 2^30 are beyond
//! it, and the flavours differ there: the Rust pools refuse them
//! (`BuildError::NoRoom` once the 2^30 ceiling is reached), the C dbitmap
//! gives its map up when the 2^31-bit grow cannot be allocated and holds
//! them on the linear scan, and the scan and the tree hold any u32. Reaching
//! that needs a 2^30-bit map per Rust pool, so it is not part of a fuzzed
//! program (`pool_ops`' `probe-ceiling` covers the ceiling itself).

use super::node::Node;
use crate::text::{limits, parse_in, parse_node};
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::NodeId;

/// The handles a process starts from, each with its node: at most
/// [`limits::START_HANDLES`], no handle or node twice, every handle in
/// `0..=`[`limits::START_HANDLE`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StartSet {
    pairs: [(u32, NodeId); limits::START_HANDLES],
    len: u8,
}

/// The points the decoder draws handles around: the 16- and 17-bit
/// boundaries, the top of the range, and 0 (the context manager's).
const AROUND: [u32; 4] = [65_536, 131_072, limits::START_HANDLE as u32, 0];

impl StartSet {
    /// The set of `pairs`, or why it is not one (a one-line message naming
    /// the allowed range).
    pub fn new(pairs: &[(u32, NodeId)]) -> Result<StartSet, String> {
        let max = limits::START_HANDLES;
        if pairs.is_empty() || pairs.len() > max {
            return Err(format!(
                "`start-from` takes 1 to {max} handles, found {}",
                pairs.len()
            ));
        }
        let mut set = StartSet {
            pairs: [(0, 0); limits::START_HANDLES],
            len: 0,
        };
        for &(handle, node) in pairs {
            if u64::from(handle) > limits::START_HANDLE {
                return Err(format!(
                    "start handle {handle} is out of range: allowed 0..={}",
                    limits::START_HANDLE
                ));
            }
            if set.pairs().iter().any(|&(h, _)| h == handle) {
                return Err(format!("start handle {handle} is given twice"));
            }
            if set.pairs().iter().any(|&(_, n)| n == node) {
                return Err(format!("node n{node} is given twice"));
            }
            set.pairs[set.len as usize] = (handle, node);
            set.len += 1;
        }
        Ok(set)
    }

    /// The `(handle, node)` pairs, in the order given.
    pub fn pairs(&self) -> &[(u32, NodeId)] {
        &self.pairs[..self.len as usize]
    }

    /// The set without its last handle, for the minimiser; `None` for a
    /// single handle.
    pub fn simpler(&self) -> Option<StartSet> {
        let pairs = self.pairs();
        (pairs.len() > 1)
            .then(|| StartSet::new(&pairs[..pairs.len() - 1]).expect("a subset of a set"))
    }

    /// The highest handle.
    pub fn highest(&self) -> u32 {
        self.pairs().iter().map(|&(h, _)| h).max().unwrap_or(0)
    }

    /// Parses the arguments of `start-from`: `handle=nK` each.
    pub fn parse(words: &[&str]) -> Result<StartSet, String> {
        let pairs = words
            .iter()
            .map(|w| {
                let (handle, node) = w
                    .split_once('=')
                    .ok_or_else(|| format!("expected handle=nK, found {w:?}"))?;
                let handle: u32 = parse_in(handle, limits::START_HANDLE)
                    .map_err(|e| format!("start handle {e}"))?;
                Ok((handle, parse_node(node)?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        StartSet::new(&pairs)
    }
}

impl<'a> Arbitrary<'a> for StartSet {
    /// 1 to [`limits::START_HANDLES`] handles, each near one of the
    /// boundaries (within 4 either side) or anywhere in the range, each
    /// with a node among the program's [`NODES`](super::node::NODES); a handle or node drawn
    /// twice is dropped.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let n = u.int_in_range(1..=limits::START_HANDLES)?;
        let mut pairs: Vec<(u32, NodeId)> = Vec::new();
        for _ in 0..n {
            let kind = u8::arbitrary(u)?;
            let v = u16::arbitrary(u)?;
            let max = limits::START_HANDLE as u32;
            let handle = match kind % 8 {
                k @ 0..=3 => {
                    let base = AROUND[k as usize];
                    (base + u32::from(v % 9)).saturating_sub(4).min(max)
                }
                // Anywhere: the 16 bits scaled up to the range.
                _ => (u32::from(v) << (kind % 8 - 3)).min(max),
            };
            let node = Node::arbitrary(u)?.0;
            if pairs.iter().all(|&(h, m)| h != handle && m != node) {
                pairs.push((handle, node));
            }
        }
        Ok(StartSet::new(&pairs).expect("drawn in range, without repeats"))
    }
}

impl fmt::Debug for StartSet {
    /// `handle=nK` each, as in the trace line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<String> = self
            .pairs()
            .iter()
            .map(|(h, n)| format!("{h}=n{n}"))
            .collect();
        f.write_str(&words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::node::NODES;
    use super::*;

    #[test]
    fn ranges_and_repeats_are_refused_in_one_line() {
        assert!(StartSet::parse(&["70000=n1", "3=n2"]).is_ok());
        let e = StartSet::parse(&["4000000000=n1"]).unwrap_err();
        assert!(e.contains("allowed 0..=262144"), "{e}");
        let e = StartSet::parse(&["5=n1", "5=n2"]).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = StartSet::parse(&["5=n1", "6=n1"]).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        assert!(StartSet::parse(&[]).is_err());
        assert!(StartSet::parse(&["5"]).is_err());
        let seven: Vec<String> = (0..7).map(|i| format!("{i}=n{i}")).collect();
        let seven: Vec<&str> = seven.iter().map(String::as_str).collect();
        assert!(StartSet::parse(&seven).is_err());
    }

    #[test]
    fn the_minimiser_drops_the_last_handle() {
        let set = StartSet::parse(&["70000=n1", "3=n2"]).unwrap();
        let one = set.simpler().unwrap();
        assert_eq!(one.pairs(), &[(70_000, 1)]);
        assert_eq!(one.simpler(), None);
    }

    #[test]
    fn decoded_sets_reach_the_boundaries_and_print_back() {
        let mut above_16_bits = 0;
        for seed in 0..200 {
            let bytes = crate::seeds::bytes(seed, 32);
            let set = StartSet::arbitrary(&mut Unstructured::new(&bytes)).unwrap();
            above_16_bits += set.pairs().iter().filter(|&&(h, _)| h > 65_535).count();
            let text = format!("{set:?}");
            let words: Vec<&str> = text.split(' ').collect();
            assert_eq!(StartSet::parse(&words), Ok(set));
            assert!(set.pairs().iter().all(|&(_, n)| n < NODES));
        }
        assert!(above_16_bits > 100, "{above_16_bits}");
    }
}
