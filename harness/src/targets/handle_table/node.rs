//! The nodes a `handle_table` program names: few, so that the same node
//! comes back often.

use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::NodeId;

/// A node among a few, so that the same node comes back often.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node(pub NodeId);

/// How many distinct nodes [`Node`] draws from.
pub const NODES: u64 = 24;

impl<'a> Arbitrary<'a> for Node {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Node(u.int_in_range(0..=NODES - 1)?))
    }
    fn size_hint(_: usize) -> (usize, Option<usize>) {
        (1, Some(1))
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}
