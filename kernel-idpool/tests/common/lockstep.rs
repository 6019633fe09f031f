//! Two pools driven call by call with the same random program, every answer
//! compared: the smallest unused id (found and acquired), the presence of
//! each grow and shrink request, each reallocation's success and length,
//! the capacity after every call, and the used ids every few calls.
//!
//! After every release the two pools are asked whether they would shrink,
//! as the driver asks.
//!
//! Grow requests are made up to a capacity of 4096 ids, so pools reach
//! 8192 ids at most.
//!
//! Resizers are not committed at once: up to four wait in a queue and are
//! committed in random order, with a grow's resizer sometimes handed to
//! `shrink` and the reverse, which is what other threads' work between a
//! request and its commit looks like to the pool.
//!
//! Out-of-range calls (`find_unused_id` or `release_id` at or above the
//! capacity) are part of the program. A pool that panics on them (mainline
//! built with `CONFIG_RUST_BITMAP_HARDENED`) must panic with the bitmap's
//! assertion and change nothing; the other pool must answer `None` and
//! change nothing: that pair of answers counts as equal. Mainline without
//! the hardening must log one `pr_err!` line per out-of-range release and
//! nothing else.

use super::Rng;
use idpool::{AllocError, Gfp};
use kernel_idpool::print::{take_log, Level};
use kernel_idpool::{KernelIdPool, KernelPoolResizer, KernelReallocRequest};

/// The calls the runner makes, for any pool with our `IdPool`'s API.
pub trait Pool {
    type Request;
    type Resizer;
    fn capacity(&self) -> usize;
    /// `find_unused_id(offset)`, dropped without acquiring.
    fn find(&mut self, offset: usize) -> Option<usize>;
    /// `find_unused_id(offset)` then `acquire()`.
    fn acquire(&mut self, offset: usize) -> Option<usize>;
    fn release(&mut self, id: usize);
    fn grow_request(&self) -> Option<Self::Request>;
    fn shrink_request(&self) -> Option<Self::Request>;
    fn realloc(&self, request: &Self::Request, gfp: Gfp) -> Result<Self::Resizer, AllocError>;
    fn resizer_len(resizer: &Self::Resizer) -> usize;
    fn grow(&mut self, resizer: Self::Resizer);
    fn shrink(&mut self, resizer: Self::Resizer);
    fn used_ids(&mut self) -> Vec<usize>;
    /// Whether out-of-range calls panic (mainline, hardened).
    fn panics_out_of_range(&self) -> bool {
        false
    }
    /// Whether an out-of-range release logs a `pr_err!` line.
    fn logs_out_of_range_release(&self) -> bool {
        false
    }
}

impl Pool for idpool::IdPool {
    type Request = idpool::ReallocRequest;
    type Resizer = idpool::PoolResizer;
    fn capacity(&self) -> usize {
        self.capacity()
    }
    fn find(&mut self, offset: usize) -> Option<usize> {
        self.find_unused_id(offset).map(|u| u.as_usize())
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        self.find_unused_id(offset).map(|u| u.acquire())
    }
    fn release(&mut self, id: usize) {
        self.release_id(id)
    }
    fn grow_request(&self) -> Option<Self::Request> {
        self.grow_request()
    }
    fn shrink_request(&self) -> Option<Self::Request> {
        self.shrink_request()
    }
    fn realloc(&self, request: &Self::Request, gfp: Gfp) -> Result<Self::Resizer, AllocError> {
        request.realloc(gfp)
    }
    fn resizer_len(resizer: &Self::Resizer) -> usize {
        resizer.len()
    }
    fn grow(&mut self, resizer: Self::Resizer) {
        self.grow(resizer)
    }
    fn shrink(&mut self, resizer: Self::Resizer) {
        self.shrink(resizer)
    }
    fn used_ids(&mut self) -> Vec<usize> {
        idpool::IdPool::used_ids(self).collect()
    }
}

impl Pool for KernelIdPool {
    type Request = KernelReallocRequest;
    type Resizer = KernelPoolResizer;
    fn capacity(&self) -> usize {
        self.capacity()
    }
    fn find(&mut self, offset: usize) -> Option<usize> {
        self.find_unused_id(offset).map(|u| u.as_usize())
    }
    fn acquire(&mut self, offset: usize) -> Option<usize> {
        self.find_unused_id(offset).map(|u| u.acquire())
    }
    fn release(&mut self, id: usize) {
        self.release_id(id)
    }
    fn grow_request(&self) -> Option<Self::Request> {
        self.grow_request()
    }
    fn shrink_request(&self) -> Option<Self::Request> {
        self.shrink_request()
    }
    fn realloc(&self, request: &Self::Request, gfp: Gfp) -> Result<Self::Resizer, AllocError> {
        request.realloc(gfp)
    }
    fn resizer_len(resizer: &Self::Resizer) -> usize {
        resizer.len()
    }
    fn grow(&mut self, resizer: Self::Resizer) {
        self.grow(resizer)
    }
    fn shrink(&mut self, resizer: Self::Resizer) {
        self.shrink(resizer)
    }
    fn used_ids(&mut self) -> Vec<usize> {
        KernelIdPool::used_ids(self)
    }
    fn panics_out_of_range(&self) -> bool {
        kernel_idpool::HARDENED
    }
    fn logs_out_of_range_release(&self) -> bool {
        !kernel_idpool::HARDENED
    }
}

/// Where two pools first disagreed.
#[derive(Debug)]
pub struct Divergence {
    pub seed: u64,
    pub step: usize,
    pub call: String,
    pub detail: String,
}

/// The message of the bitmap's hardened assertions.
const HARDENED_ASSERTION: &str = "must be <";

/// Runs `call` on `pool`, which must panic with the hardened assertion if
/// `expect_panic`, leaving the pool as it was; returns its answer, or `None`
/// for the panic.
fn guarded<P: Pool, T>(
    pool: &mut P,
    expect_panic: bool,
    call: impl FnOnce(&mut P) -> Option<T>,
) -> Result<Option<T>, String> {
    if !expect_panic {
        return Ok(call(pool));
    }
    let capacity = pool.capacity();
    let used = pool.used_ids();
    match kernel_idpool::catch_panic(|| call(pool)) {
        Ok(_) => Err("did not panic on an out-of-range call".into()),
        Err(msg) if !msg.contains(HARDENED_ASSERTION) => Err(format!("panicked: {msg}")),
        Err(_) if pool.capacity() != capacity || pool.used_ids() != used => {
            Err("a hardened panic changed the pool".into())
        }
        Err(_) => Ok(None),
    }
}

/// Silences the expected hardened panics of this test binary; others are
/// reported by the default hook.
pub fn quiet_hardened_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !msg.contains(HARDENED_ASSERTION) {
                default(info);
            }
        }));
    });
}

/// What a run reached, so that a test can check it went deep.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub max_capacity: usize,
    pub resizers: usize,
    pub failed_reallocs: usize,
    pub commits: usize,
    pub capacity_changes: usize,
    pub out_of_range: usize,
}

impl core::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.max_capacity = self.max_capacity.max(o.max_capacity);
        self.resizers += o.resizers;
        self.failed_reallocs += o.failed_reallocs;
        self.commits += o.commits;
        self.capacity_changes += o.capacity_changes;
        self.out_of_range += o.out_of_range;
    }
}

enum Kind {
    Grow,
    Shrink,
}

/// Runs `steps` random calls on `a` and `b` from `seed`; `Err` at the
/// first disagreement.
pub fn run<A: Pool, B: Pool>(
    a: &mut A,
    b: &mut B,
    seed: u64,
    steps: usize,
) -> Result<Stats, Divergence> {
    let mut stats = Stats::default();
    quiet_hardened_panics();
    take_log();
    let mut rng = Rng(seed);
    let mut pending: Vec<(Kind, A::Resizer, B::Resizer)> = Vec::new();
    // Fill, drain or mix, changing every 64 calls, so that pools grow to a
    // few thousand ids and shrink back.
    let mut mode = 0;
    for step in 0..steps {
        if step % 64 == 0 {
            mode = rng.below(3);
        }
        let cap = a.capacity();
        let mut call: String;
        let mut expected_log = 0;
        let fail = |what: String, call: &str| Divergence {
            seed,
            step,
            call: call.to_owned(),
            detail: what,
        };
        let roll = rng.below(100);
        let (acquire_w, release_w) = match mode {
            0 => (60, 10),
            1 => (10, 60),
            _ => (35, 35),
        };
        if roll < acquire_w {
            // find_unused_id at 0 or 1 (as Binder does), or anywhere,
            // sometimes out of range; then acquire, or drop.
            let offset = match rng.below(8) {
                0..=3 => rng.index(2),
                4..=6 => rng.index(cap),
                _ => cap + rng.index(70),
            };
            let take = rng.below(4) != 0;
            call = format!(
                "find_unused_id({offset}){}",
                if take { ".acquire()" } else { "" }
            );
            let out = offset >= cap;
            stats.out_of_range += usize::from(out);
            let ra = guarded(a, out && a.panics_out_of_range(), |p| {
                if take {
                    p.acquire(offset)
                } else {
                    p.find(offset)
                }
            })
            .map_err(|e| fail(format!("a: {e}"), &call))?;
            let rb = guarded(b, out && b.panics_out_of_range(), |p| {
                if take {
                    p.acquire(offset)
                } else {
                    p.find(offset)
                }
            })
            .map_err(|e| fail(format!("b: {e}"), &call))?;
            if ra != rb {
                return Err(fail(format!("a answered {ra:?}, b {rb:?}"), &call));
            }
        } else if roll < acquire_w + release_w {
            let used = a.used_ids();
            // The highest used id (Binder's processes often drop their
            // newest handles first), any used id, or any id at all.
            let id = match rng.below(8) {
                _ if used.is_empty() => rng.index(cap + 70),
                0..=2 => used[used.len() - 1],
                3..=6 => used[rng.index(used.len())],
                _ => rng.index(cap + 70),
            };
            call = format!("release_id({id})");
            let out = id >= cap;
            stats.out_of_range += usize::from(out);
            expected_log = usize::from(out && a.logs_out_of_range_release())
                + usize::from(out && b.logs_out_of_range_release());
            guarded(a, out && a.panics_out_of_range(), |p| {
                p.release(id);
                Some(())
            })
            .map_err(|e| fail(format!("a: {e}"), &call))?;
            guarded(b, out && b.panics_out_of_range(), |p| {
                p.release(id);
                Some(())
            })
            .map_err(|e| fail(format!("b: {e}"), &call))?;
            // The driver asks whether to shrink after every release.
            let (qa, qb) = (a.shrink_request().is_some(), b.shrink_request().is_some());
            if qa != qb {
                call.push_str(", shrink_request()");
                return Err(fail(format!("a asked: {qa}, b asked: {qb}"), &call));
            }
        } else if roll < 92 || pending.is_empty() {
            // The driver asks to grow only when the pool is full; here any
            // time, up to 4096 ids (each commit doubles, and the used ids
            // of a pool of 2^30 take a while to read back).
            let grow = rng.below(2) == 0 && cap <= 4096;
            let (qa, qb) = if grow {
                (a.grow_request(), b.grow_request())
            } else {
                (a.shrink_request(), b.shrink_request())
            };
            let what = if grow {
                "grow_request"
            } else {
                "shrink_request"
            };
            call = format!("{what}()");
            match (qa, qb) {
                (None, None) => {}
                (Some(qa), Some(qb)) => {
                    let gfp = if rng.below(8) == 0 {
                        Gfp::Fail
                    } else {
                        Gfp::Kernel
                    };
                    call = format!("{what}().realloc({gfp:?})");
                    match (a.realloc(&qa, gfp), b.realloc(&qb, gfp)) {
                        (Err(_), Err(_)) => stats.failed_reallocs += 1,
                        (Ok(ra), Ok(rb)) => {
                            let (la, lb) = (A::resizer_len(&ra), B::resizer_len(&rb));
                            if la != lb {
                                return Err(fail(format!("resizer of {la} ids vs {lb}"), &call));
                            }
                            stats.resizers += 1;
                            let kind = if grow { Kind::Grow } else { Kind::Shrink };
                            pending.push((kind, ra, rb));
                            if pending.len() > 4 {
                                pending.remove(0); // dropped: a failed race
                            }
                        }
                        (ra, rb) => {
                            return Err(fail(
                                format!("a realloc ok: {}, b: {}", ra.is_ok(), rb.is_ok()),
                                &call,
                            ))
                        }
                    }
                }
                (qa, qb) => {
                    return Err(fail(
                        format!("a asked: {}, b asked: {}", qa.is_some(), qb.is_some()),
                        &call,
                    ))
                }
            }
        } else {
            let (kind, ra, rb) = pending.remove(rng.index(pending.len()));
            // Now and then the other commit, as a confused caller might.
            let grow = matches!(kind, Kind::Grow) != (rng.below(8) == 0);
            call = format!(
                "{}(resizer of {} ids)",
                if grow { "grow" } else { "shrink" },
                A::resizer_len(&ra)
            );
            stats.commits += 1;
            if grow {
                a.grow(ra);
                b.grow(rb);
            } else {
                a.shrink(ra);
                b.shrink(rb);
            }
        }
        if a.capacity() != b.capacity() {
            return Err(fail(
                format!("capacity {} vs {}", a.capacity(), b.capacity()),
                &call,
            ));
        }
        stats.max_capacity = stats.max_capacity.max(a.capacity());
        stats.capacity_changes += usize::from(a.capacity() != cap);
        let log = take_log();
        if log.len() != expected_log || log.iter().any(|(level, _)| *level != Level::Err) {
            return Err(fail(
                format!("logged {log:?}, expected {expected_log} pr_err"),
                &call,
            ));
        }
        if step % 8 == 7 || step + 1 == steps {
            let (ua, ub) = (a.used_ids(), b.used_ids());
            if ua != ub {
                return Err(fail(format!("used ids {ua:?} vs {ub:?}"), &call));
            }
        }
    }
    Ok(stats)
}
