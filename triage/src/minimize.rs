//! Delta debugging at the operation level: the shortest history that still
//! fails *the same way* (same signature). Each target's trace form knows
//! its own shrink rules (`Trace::shrink`); this repeats its passes until
//! none helps.

use crate::run::run;
use idpool_harness::check::Signature;
use idpool_harness::trace::Trace;

/// Minimises `trace`, which fails with `signature`. `progress` hears about
/// every improvement.
pub fn minimize(
    trace: &Trace,
    signature: &Signature,
    progress: &mut dyn FnMut(&str, &Trace),
) -> Trace {
    let mut same = |t: &Trace| matches!(run(t), Err(f) if f.signature() == *signature);
    let mut best = trace.clone();
    loop {
        let next = best.shrink(&mut same);
        if next == best {
            return best;
        }
        best = next;
        progress("pass", &best);
    }
}
