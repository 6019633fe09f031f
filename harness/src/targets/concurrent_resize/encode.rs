//! The bytes a [`Program`] and a schedule decode from: for seeds written
//! by hand (`crafted`), so that an interleaving the
//! random seeds rarely reach is in the corpus and in the smoke test.
//!
//! The bytes are built field by field in the order
//! [`Program`]'s `Arbitrary` reads them, and checked by decoding them
//! again: [`encode`] returns `None` rather than bytes that mean something
//! else.

use super::program::{decode, CorruptBit, Pool, Program, ThreadOp, BULK_COUNTS, SHARED_NODES};
use crate::history::Versions;
use idpool::Version;

/// The prefill sizes a header byte below 12 picks from (see
/// `Program::arbitrary`); any other size is spelled out.
const PREFILLS: [u32; 14] = [0, 15, 16, 31, 32, 33, 62, 63, 63, 126, 127, 127, 128, 255];

/// The four bytes of a derived enum's discriminant choosing variant `i`
/// of `n`: the derive maps a little-endian `u32` `x` to `(x * n) >> 32`.
fn variant(i: u64, n: u64) -> [u8; 4] {
    let x = (i << 32).div_ceil(n) as u32;
    x.to_le_bytes()
}

fn op(out: &mut Vec<u8>, op: ThreadOp) -> Option<()> {
    const N: u64 = 9;
    match op {
        ThreadOp::Insert { node, manager } => {
            out.extend(variant(0, N));
            out.extend([u8::try_from(node).ok()?, u8::from(manager)]);
        }
        ThreadOp::Release(k) => out.extend(variant(1, N).into_iter().chain([k])),
        ThreadOp::ReleasePrefill(k) => out.extend(variant(2, N).into_iter().chain([k])),
        ThreadOp::Increment(k) => out.extend(variant(3, N).into_iter().chain([k])),
        ThreadOp::InsertMany(n) => {
            let i = BULK_COUNTS.iter().position(|&c| c == n)?;
            out.extend(variant(4, N).into_iter().chain([i as u8]));
        }
        ThreadOp::Reclaim => out.extend(variant(5, N)),
        ThreadOp::Kill => out.extend(variant(6, N)),
        ThreadOp::Lookup(node) => out.extend(variant(7, N).into_iter().chain([node as u8])),
        ThreadOp::Corrupt(bit) => {
            let (i, k) = match bit {
                CorruptBit::Clear(k) => (0, k),
                CorruptBit::Set(k) => (1, k),
                CorruptBit::SetHigh(k) => (2, k),
            };
            out.extend(variant(8, N).into_iter().chain(variant(i, 3)).chain([k]));
        }
    }
    Some(())
}

/// Every pool, in the order of its discriminant.
const POOLS: [Pool; 5] = [
    Pool::IdPool,
    Pool::DBitmap,
    Pool::FastPool,
    Pool::AugmentedTree,
    Pool::Shrinker,
];

/// The first five bytes of a program: the version byte and the pool, for
/// each pool and each version of its driver.
fn headers() -> Vec<(Pool, Version, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, &pool) in POOLS.iter().enumerate() {
        let mut seen: Vec<Version> = Vec::new();
        for b in 0u8..8 {
            let version = pool.version_of(&Versions::decode(b));
            if !seen.contains(&version) {
                seen.push(version);
                out.push((pool, version, [&[b][..], &variant(i as u64, 5)].concat()));
            }
        }
    }
    out
}

/// One of each operation: every node for the inserts and lookups, the
/// context manager's and not, every bulk count.
fn every_op() -> Vec<ThreadOp> {
    let nodes = 0..SHARED_NODES;
    let mut ops: Vec<ThreadOp> = nodes
        .clone()
        .flat_map(|node| [false, true].map(|manager| ThreadOp::Insert { node, manager }))
        .collect();
    ops.extend([
        ThreadOp::Release(0),
        ThreadOp::Release(1),
        ThreadOp::Increment(0),
    ]);
    ops.extend((0..4).map(ThreadOp::ReleasePrefill));
    ops.extend(BULK_COUNTS.map(ThreadOp::InsertMany));
    ops.extend([ThreadOp::Reclaim, ThreadOp::Kill]);
    ops.extend(nodes.map(ThreadOp::Lookup));
    ops.extend([0, 1, 2].map(|k| ThreadOp::Corrupt(CorruptBit::Clear(k))));
    ops.extend([0, 1].map(|k| ThreadOp::Corrupt(CorruptBit::Set(k))));
    ops.extend([0, 1].map(|k| ThreadOp::Corrupt(CorruptBit::SetHigh(k))));
    ops
}

/// The dictionary of `concurrent_resize`: the program headers (pool and
/// version), the operations, and the schedule bytes, so that a mutation
/// can turn a program into another pool's or version's, or splice in a
/// whole operation (a context manager's insert on a historical C version
/// is two such tokens away from any program).
pub fn dictionary() -> String {
    let mut out = crate::dict::schedule_dictionary();
    for (pool, version, bytes) in headers() {
        crate::dict::entry(
            &mut out,
            &format!("pool {} version {version}", pool.name()),
            &bytes,
        );
    }
    for o in every_op() {
        let mut bytes = Vec::new();
        if op(&mut bytes, o).is_some() {
            crate::dict::entry(&mut out, &format!("{o:?}"), &bytes);
        }
    }
    out
}

/// The bytes that decode to `program` followed by the schedule bytes
/// `schedule`, or `None` if there are none (a version pair or a count the
/// header cannot say).
pub fn encode(program: &Program, schedule: &[u8]) -> Option<Vec<u8>> {
    let versions = Versions {
        c: match program.pool {
            Pool::DBitmap => program.version,
            _ => Versions::MAINLINE.c,
        },
        rust: match program.pool {
            Pool::DBitmap => Versions::MAINLINE.rust,
            _ => program.version,
        },
        ..Versions::MAINLINE
    };
    let mut out = vec![versions.encode()?];
    let pool = POOLS.iter().position(|&p| p == program.pool)?;
    out.extend(variant(pool as u64, 5));
    match PREFILLS.iter().position(|&p| p == program.prefill) {
        Some(i) => out.extend([0, i as u8]),
        None => out.extend([12, (program.prefill >> 8) as u8, program.prefill as u8]),
    }
    if program.keep != program.prefill {
        return None;
    }
    out.push(2);
    let n = program.threads.len();
    out.push(match n {
        2 => 0,
        3 => 2,
        4 => 3,
        _ => return None,
    });
    for thread in &program.threads {
        if !(1..=6).contains(&thread.len()) {
            return None;
        }
        out.push(thread.len() as u8 - 1);
        for &o in thread {
            op(&mut out, o)?;
        }
    }
    out.extend_from_slice(schedule);
    let (decoded, rest) = decode(&out)?;
    (decoded == *program && rest.len() == schedule.len()).then_some(out)
}

/// The context manager's insert finds the map full (handles 0 to 63 held)
/// and drops the lock to grow it; meanwhile thread 0 releases handle 0
/// (the manager's retry then takes 0), or another thread inserts another
/// manager node (which grows first). Schedule: thread 0 runs its insert
/// to the end, then the second runnable thread runs to its grow commit
/// and waits there (thread 1 in the two-thread program; thread 2 in the
/// three-thread one, where thread 0 is done and thread 1 is the other
/// manager); then the default order runs the others first.
pub(super) fn crafted() -> Vec<Vec<u8>> {
    let manager = |node| ThreadOp::Insert {
        node,
        manager: true,
    };
    let scenarios = [
        vec![vec![manager(0), ThreadOp::Release(0)], vec![manager(1)]],
        vec![vec![manager(0)], vec![manager(1)], vec![manager(2)]],
    ];
    let mut out = Vec::new();
    for (pool, version) in [
        (Pool::IdPool, Version::RustMainline),
        (Pool::DBitmap, Version::CMainline),
    ] {
        for threads in &scenarios {
            let program = Program {
                pool,
                version,
                prefill: 63,
                keep: 63,
                threads: threads.clone(),
            };
            // 0x04: thread 0 until its operation is done (it has no
            // commit); 0x05: the second runnable thread until its
            // operation waits to commit.
            out.push(encode(&program, &[0x04, 0x05]).expect("the header can say it"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbitrary::{Arbitrary, Unstructured};

    #[test]
    fn each_header_decodes_to_its_pool_and_version() {
        let headers = headers();
        assert_eq!(
            headers.len(),
            3 + 4 * 2,
            "3 C versions, 2 Rust versions for 4 pools"
        );
        for (pool, version, bytes) in headers {
            let program = Program::arbitrary(&mut Unstructured::new(&bytes)).unwrap();
            assert_eq!(
                (program.pool, program.version),
                (pool, version),
                "{bytes:02x?}"
            );
        }
    }

    #[test]
    fn each_op_entry_decodes_to_its_op() {
        for o in every_op() {
            let mut bytes = Vec::new();
            op(&mut bytes, o).unwrap();
            let mut u = Unstructured::new(&bytes);
            assert_eq!(ThreadOp::arbitrary(&mut u).unwrap(), o, "{bytes:02x?}");
            assert!(u.is_empty(), "{o:?}: {} bytes left", u.len());
        }
    }
}
