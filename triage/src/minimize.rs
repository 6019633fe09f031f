//! Delta debugging at the operation level: the shortest history that still
//! fails *the same way* (same signature).

use crate::run::run;
use idpool_harness::domain::Count;
use idpool_harness::pool::PoolOp;
use idpool_harness::sched::{Decision, Program};
use idpool_harness::table::TableOp;
use idpool_harness::trace::Trace;

/// Minimises `trace`, which fails with `signature`. `progress` hears about
/// every improvement.
pub fn minimize(trace: &Trace, signature: &str, progress: &mut dyn FnMut(&str, &Trace)) -> Trace {
    let mut runs = 0usize;
    let mut same = |t: &Trace| {
        runs += 1;
        matches!(run(t), Err(f) if f.signature() == signature)
    };
    let mut best = trace.clone();
    loop {
        let before = best.clone();
        best = match best {
            Trace::PoolOps(ops) => {
                Trace::PoolOps(pool_pass(ops, &mut |o| same(&Trace::PoolOps(o.to_vec()))))
            }
            Trace::DBitmapOps(ops) => Trace::DBitmapOps(pool_pass(ops, &mut |o| {
                same(&Trace::DBitmapOps(o.to_vec()))
            })),
            Trace::HandleTable(ops) => Trace::HandleTable(table_pass(ops, &mut |o| {
                same(&Trace::HandleTable(o.to_vec()))
            })),
            Trace::Concurrent(program, schedule) => {
                let (p, s) = concurrent_pass(program, schedule, &mut |p, s| {
                    same(&Trace::Concurrent(p.clone(), s.to_vec()))
                });
                Trace::Concurrent(p, s)
            }
        };
        if best == before {
            return best;
        }
        progress("pass", &best);
    }
}

/// Removes chunks of `items` (halves, quarters, … single items) while
/// `fails` still holds.
fn shrink_list<T: Clone>(mut items: Vec<T>, fails: &mut dyn FnMut(&[T]) -> bool) -> Vec<T> {
    let mut chunk = items.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < items.len() {
            let mut candidate = items.clone();
            candidate.drain(i..(i + chunk).min(items.len()));
            if fails(&candidate) {
                items = candidate;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 {
            return items;
        }
        chunk = chunk.div_ceil(2);
    }
}

/// Tries smaller versions of one element in place (each `smaller` candidate
/// in turn, repeatedly, while one still fails).
fn simplify_each<T: Clone>(
    items: &mut [T],
    smaller: impl Fn(&T) -> Option<T>,
    fails: &mut dyn FnMut(&[T]) -> bool,
) {
    for i in 0..items.len() {
        while let Some(s) = smaller(&items[i]) {
            let mut candidate = items.to_vec();
            candidate[i] = s;
            if !fails(&candidate) {
                break;
            }
            items[i] = candidate.swap_remove(i);
        }
    }
}

fn half(c: Count) -> Option<Count> {
    (c.0 > 1).then_some(Count(c.0 / 2))
}

fn pool_pass(ops: Vec<PoolOp>, fails: &mut dyn FnMut(&[PoolOp]) -> bool) -> Vec<PoolOp> {
    let mut ops = shrink_list(ops, fails);
    simplify_each(
        &mut ops,
        |op| match *op {
            PoolOp::AcquireMany { offset, count } => {
                half(count).map(|count| PoolOp::AcquireMany { offset, count })
            }
            PoolOp::ReleaseMany { from, count } => {
                half(count).map(|count| PoolOp::ReleaseMany { from, count })
            }
            PoolOp::Prepare { kind, fail: true } => Some(PoolOp::Prepare { kind, fail: false }),
            _ => None,
        },
        fails,
    );
    ops
}

fn table_pass(ops: Vec<TableOp>, fails: &mut dyn FnMut(&[TableOp]) -> bool) -> Vec<TableOp> {
    let mut ops = shrink_list(ops, fails);
    simplify_each(
        &mut ops,
        |op| match *op {
            TableOp::InsertMany(count) => half(count).map(TableOp::InsertMany),
            TableOp::FailNext { site, n } if n > 1 => Some(TableOp::FailNext { site, n: n - 1 }),
            _ => None,
        },
        fails,
    );
    ops
}

fn without_thread(program: &Program, schedule: &[Decision], k: usize) -> (Program, Vec<Decision>) {
    let mut p = program.clone();
    p.threads.remove(k);
    let s = schedule
        .iter()
        .filter(|d| d.thread != k)
        .map(|d| Decision {
            thread: if d.thread > k { d.thread - 1 } else { d.thread },
            fail: d.fail,
        })
        .collect();
    (p, s)
}

fn concurrent_pass(
    mut program: Program,
    mut schedule: Vec<Decision>,
    fails: &mut dyn FnMut(&Program, &[Decision]) -> bool,
) -> (Program, Vec<Decision>) {
    // Whole threads.
    for k in (0..program.threads.len()).rev() {
        if program.threads.len() > 1 {
            let (p, s) = without_thread(&program, &schedule, k);
            if fails(&p, &s) {
                (program, schedule) = (p, s);
            }
        }
    }
    // Each thread's operations.
    for k in 0..program.threads.len() {
        let ops = std::mem::take(&mut program.threads[k]);
        let kept = shrink_list(ops, &mut |o| {
            let mut p = program.clone();
            p.threads[k] = o.to_vec();
            fails(&p, &schedule)
        });
        program.threads[k] = kept;
    }
    // The schedule, then its injected failures.
    schedule = shrink_list(schedule, &mut |s| fails(&program, s));
    simplify_each(
        &mut schedule,
        |d| {
            d.fail.then_some(Decision {
                thread: d.thread,
                fail: false,
            })
        },
        &mut |s| fails(&program, s),
    );
    // The prefill: none, or as little as still fails.
    let mut candidates = vec![0, program.prefill / 2];
    candidates.extend((program.prefill.saturating_sub(4)..program.prefill).rev());
    for prefill in candidates {
        if prefill < program.prefill {
            let p = Program {
                prefill,
                ..program.clone()
            };
            if fails(&p, &schedule) {
                program = p;
            }
        }
    }
    (program, schedule)
}
