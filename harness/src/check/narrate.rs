//! What a runner is doing right now, per thread: the step being run (so
//! that a panic from no check is attributed to it), the narration of every
//! comparison (what `triage repro` prints), and panics caught quietly.

use super::{Checked, Failure, Op, OpKind};
use std::cell::RefCell;

/// What a runner is doing right now: target, step, op kind, capacity.
type Context = (&'static str, usize, OpKind, usize);

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
    static NARRATION: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// The step being run on this thread, if a runner started one.
pub(super) fn current() -> Option<Context> {
    CURRENT.with(|c| *c.borrow())
}

/// Runners call this as each step starts: a panic that does not come from
/// a check (an assertion inside the allocator, say) is then attributed to
/// the step by [`Failure::from_panic`], and a narration gets a header line.
pub fn begin_step(target: &'static str, step: usize, op: &impl Op, capacity: usize) {
    CURRENT.with(|c| *c.borrow_mut() = Some((target, step, op.kind(), capacity)));
    narrate(|| format!("step {step}: {op:?} (capacity {capacity})"));
}

/// From now on, on this thread, every comparison is recorded until
/// [`stop_narrating`].
pub fn start_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = Some(Vec::new()));
}

/// Stops recording comparisons.
pub fn stop_narrating() {
    NARRATION.with(|n| *n.borrow_mut() = None);
}

/// Takes the comparisons recorded since the last call.
pub fn take_narration() -> Vec<String> {
    NARRATION.with(|n| {
        n.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
}

/// Records one line of narration, if narrating.
pub fn narrate(line: impl FnOnce() -> String) {
    NARRATION.with(|n| {
        if let Some(lines) = n.borrow_mut().as_mut() {
            lines.push(line());
        }
    });
}

thread_local! {
    /// How many [`quietly`] calls this thread is inside.
    static QUIET: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with this thread's panic messages silenced (a panic's message
/// would only be noise: the caller catches it and keeps the value).
///
/// The panic hook is the whole process's: taking it and putting it back
/// around `f` would race with another thread doing the same (one of them
/// restores the silent hook for good, and every later panic of the
/// process goes unprinted). So the process's hook is wrapped once, and
/// the wrapper stays silent only for a thread inside `quietly`.
pub fn quietly<T>(f: impl FnOnce() -> T) -> T {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) == 0 {
                hook(info);
            }
        }));
    });
    /// Leaves the quiet section when dropped, a panic's unwinding included.
    struct Loud;
    impl Drop for Loud {
        fn drop(&mut self) {
            QUIET.with(|q| q.set(q.get() - 1));
        }
    }
    QUIET.with(|q| q.set(q.get() + 1));
    let _loud = Loud;
    f()
}

/// Runs `f`, turning a panic that came from no check into a [`Failure`]
/// (see [`Failure::from_panic`]); the panic is not printed.
pub fn catching<T>(f: impl FnOnce() -> Checked<T>) -> Checked<T> {
    quietly(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .unwrap_or_else(|payload| Err(Box::new(Failure::from_panic(payload.as_ref()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `quietly` leaves its thread loud again however `f` ends, a panic
    /// that unwinds through it included, and threads doing it at once do
    /// not leave each other quiet.
    #[test]
    fn quiet_sections_end_on_every_thread() {
        let quiet = || QUIET.with(|q| q.get());
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..100 {
                        let caught = catching::<()>(|| panic!("a check failed"));
                        assert!(caught.is_err());
                        let unwound =
                            std::panic::catch_unwind(|| quietly(|| panic!("through quietly")));
                        assert!(unwound.is_err());
                        assert_eq!(quiet(), 0);
                    }
                });
            }
        });
        assert_eq!(quietly(|| quietly(quiet)), 2);
        assert_eq!(quiet(), 0);
    }
}
