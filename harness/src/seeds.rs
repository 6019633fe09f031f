//! Deterministic inputs without a fuzzer: for the smoke test and for the
//! seed corpus.

use crate::Events;

/// `len` pseudo-random bytes from `seed` (xorshift64*): the same bytes on
/// every machine, with no RNG dependency.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// The input of seed `seed`: 64 to 352 bytes.
pub fn input(seed: u64) -> Vec<u8> {
    bytes(seed, 64 + (seed as usize % 7) * 48)
}

/// Which counters of `events` are nonzero: two inputs of the same shape
/// reach the same interesting paths.
pub fn shape(events: &Events) -> Vec<&'static str> {
    events
        .counts()
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(name, _)| name)
        .collect()
}

/// Inputs written by hand for target `target`: interleavings the
/// pseudo-random inputs rarely reach. The seed corpus holds them and the
/// smoke test runs them beside [`input`]'s.
pub fn crafted(target: &str) -> Vec<Vec<u8>> {
    match target {
        "concurrent_resize" => concurrent_crafted(),
        _ => Vec::new(),
    }
}

/// The context manager's insert finds the map full (handles 0 to 63 held)
/// and drops the lock to grow it; meanwhile thread 0 releases handle 0
/// (the manager's retry then takes 0), or another thread inserts another
/// manager node (which grows first). Schedule: thread 0 runs its insert
/// to the end, then the second runnable thread runs to its grow commit
/// and waits there (thread 1 in the two-thread program; thread 2 in the
/// three-thread one, where thread 0 is done and thread 1 is the other
/// manager); then the default order runs the others first.
fn concurrent_crafted() -> Vec<Vec<u8>> {
    use crate::sched::{encode, Pool, Program, ThreadOp};
    use idpool::Version;
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
