//! The concurrent target's shrink rules: whole threads, each thread's
//! operations, the schedule and its injected failures, the prefill.

use super::program::Program;
use crate::sched::Decision;
use crate::shrink::{shrink_list, simplify_each};

/// `fails` on a program and a schedule.
type Fails<'a> = dyn FnMut(&Program, &[Decision]) -> bool + 'a;

/// One pass over everything that can shrink, keeping each change for
/// which `fails` still holds.
pub fn shrink(
    program: Program,
    schedule: Vec<Decision>,
    fails: &mut Fails<'_>,
) -> (Program, Vec<Decision>) {
    let (mut program, mut schedule) = without_threads(program, schedule, fails);
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
    let no_fail = |d: &Decision| d.fail.then_some(Decision { fail: false, ..*d });
    simplify_each(&mut schedule, no_fail, &mut |s| fails(&program, s));
    let program = smaller_prefill(program, &schedule, fails);
    (program, schedule)
}

/// Drops whole threads (and their decisions) while `fails` holds.
fn without_threads(
    mut program: Program,
    mut schedule: Vec<Decision>,
    fails: &mut Fails<'_>,
) -> (Program, Vec<Decision>) {
    for k in (0..program.threads.len()).rev() {
        if program.threads.len() > 1 {
            let (p, s) = without_thread(&program, &schedule, k);
            if fails(&p, &s) {
                (program, schedule) = (p, s);
            }
        }
    }
    (program, schedule)
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

/// The prefill: none, or as little as still fails.
fn smaller_prefill(mut program: Program, schedule: &[Decision], fails: &mut Fails<'_>) -> Program {
    let mut candidates = vec![0, program.prefill / 2];
    candidates.extend((program.prefill.saturating_sub(4)..program.prefill).rev());
    for prefill in candidates {
        if prefill < program.prefill {
            let p = Program {
                prefill,
                ..program.clone()
            };
            if fails(&p, schedule) {
                program = p;
            }
        }
    }
    program
}
