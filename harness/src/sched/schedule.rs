//! The schedule: where scheduling decisions come from (fuzz bytes, a
//! replayed list, a recorder around either), and the schedule as it ran,
//! with its text forms.

use super::FAIL_BYTE;
use crate::check::Phase;
use crate::text::limits;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;

/// One scheduling decision, as it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The thread that ran.
    pub thread: usize,
    /// The phase of its operation that ran.
    pub phase: Phase,
    /// Whether the step was an allocation that was made to fail.
    pub failed: bool,
}

/// A schedule: the steps in the order they ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Schedule(pub Vec<Step>);

impl fmt::Display for Schedule {
    /// `t0:start t1:start t0:alloc-ref t1:alloc-ref! ...` (`!` marks a
    /// failed allocation); a run of more than four steps of one thread is
    /// shortened to `t0:start…pick (×388)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = |s: &Step| format!("t{}:{}{}", s.thread, s.phase, bang(s.failed));
        for (i, run) in self.0.chunk_by(|a, b| a.thread == b.thread).enumerate() {
            let text = match run {
                [first, .., last] if run.len() > 4 => {
                    format!("{}…{} (×{})", step(first), last.phase, run.len())
                }
                _ => run.iter().map(step).collect::<Vec<_>>().join(" "),
            };
            write!(f, "{}{text}", if i == 0 { "" } else { " " })?;
        }
        Ok(())
    }
}

/// `!` for a failed allocation, nothing otherwise.
fn bang(failed: bool) -> &'static str {
    if failed {
        "!"
    } else {
        ""
    }
}

/// What a chooser may know of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadView {
    /// Whether it is in the middle of an operation.
    pub mid_op: bool,
    /// The phase of its next step.
    pub next_phase: Phase,
}

/// Where the scheduling decisions come from.
pub trait Chooser {
    /// Which of the `runnable` threads (given in increasing order) runs
    /// next, and whether its step, if an allocation, fails. `threads[i]`
    /// describes thread `i`.
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool);
}

/// How long a thread chosen by a schedule byte keeps running. The two
/// long bursts stop where the thread holds an allocated resizer and waits
/// to commit it: parked in the lock-drop window that matters most, which
/// the next decision may fill with other threads' steps (or close, by
/// choosing the parked thread). Only [`Burst::Atomic`] runs through a
/// commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    /// Until its current operation is done or waits to commit.
    Operation,
    /// Until it has nothing left to run or waits to commit.
    Thread,
    /// Until its current operation is done, commits included: the window
    /// closes as soon as it opens.
    Atomic,
}

/// Decisions read from fuzz bytes, as the module docs of
/// [`sched`](super) describe.
pub struct ByteChooser<'a> {
    bytes: Unstructured<'a>,
    burst: Option<(usize, Burst)>,
}

impl<'a> ByteChooser<'a> {
    /// Decisions from the bytes left in `bytes`.
    pub fn new(bytes: Unstructured<'a>) -> Self {
        ByteChooser { bytes, burst: None }
    }
}

impl Chooser for ByteChooser<'_> {
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool) {
        if let Some((t, burst)) = self.burst {
            let going = runnable.contains(&t)
                && match burst {
                    Burst::Operation => threads[t].mid_op && !threads[t].next_phase.is_commit(),
                    Burst::Thread => !threads[t].next_phase.is_commit(),
                    Burst::Atomic => threads[t].mid_op,
                };
            if going {
                return (t, false);
            }
            self.burst = None;
        }
        if self.bytes.is_empty() {
            // Out of bytes: threads parked at a commit go last, so every
            // program exposes its widest window by default.
            let free = runnable
                .iter()
                .find(|&&t| !threads[t].next_phase.is_commit());
            return (*free.unwrap_or(&runnable[0]), false);
        }
        let b = u8::arbitrary(&mut self.bytes).unwrap_or(0);
        let t = runnable[(b & 3) as usize % runnable.len()];
        self.burst = match (b >> 2) & 3 {
            1 => Some((t, Burst::Operation)),
            2 => Some((t, Burst::Thread)),
            3 => Some((t, Burst::Atomic)),
            _ => None,
        };
        (t, b >= FAIL_BYTE)
    }
}

/// One scheduling decision: which thread runs, and whether its step, if
/// an allocation, fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The thread.
    pub thread: usize,
    /// Whether its allocation fails.
    pub fail: bool,
}

/// A list of decisions in trace form: `t0*3 t1 t0! t1` (a run of equal
/// decisions is written once with `*k`).
pub struct DecisionsText<'a>(pub &'a [Decision]);

impl fmt::Display for DecisionsText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, run) in self.0.chunk_by(|a, b| a == b).enumerate() {
            let d = run[0];
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}t{}{}", d.thread, bang(d.fail))?;
            if run.len() > 1 {
                write!(f, "*{}", run.len())?;
            }
        }
        Ok(())
    }
}

impl Decision {
    /// Parses one decision of the trace form, `tN`, `tN!`, `tN*k` or
    /// `tN!*k`: the decision and how many times it repeats.
    pub fn parse(word: &str) -> Result<(Decision, usize), String> {
        let (d, times) = match word.split_once('*') {
            Some((d, n)) => (d, crate::text::parse_in::<usize>(n, limits::SCHEDULE)?),
            None => (word, 1),
        };
        let (body, fail) = match d.strip_suffix('!') {
            Some(body) => (body, true),
            None => (d, false),
        };
        let thread = body
            .strip_prefix('t')
            .ok_or_else(|| format!("expected a decision tN or tN!, found {d:?}"))
            .and_then(|n| crate::text::parse_in(n, limits::THREAD))?;
        Ok((Decision { thread, fail }, times))
    }
}

/// Decisions replayed from a list; a decision naming a thread that cannot
/// run, and every decision past the end, runs the lowest runnable thread
/// with no failure. So any list replays deterministically, which is what
/// the minimiser needs.
pub struct Replay<'a>(pub std::slice::Iter<'a, Decision>);

impl Chooser for Replay<'_> {
    fn choose(&mut self, runnable: &[usize], _: &[ThreadView]) -> (usize, bool) {
        match self.0.next() {
            Some(d) if runnable.contains(&d.thread) => (d.thread, d.fail),
            _ => (runnable[0], false),
        }
    }
}

/// Records the decisions another chooser makes, so that a run that fails
/// still leaves its schedule behind.
pub struct Recorder<C: Chooser> {
    inner: C,
    /// The decisions so far.
    pub decisions: Vec<Decision>,
}

impl<C: Chooser> Recorder<C> {
    /// Records what `inner` decides.
    pub fn new(inner: C) -> Self {
        Recorder {
            inner,
            decisions: Vec::new(),
        }
    }
}

impl<C: Chooser> Chooser for Recorder<C> {
    fn choose(&mut self, runnable: &[usize], threads: &[ThreadView]) -> (usize, bool) {
        let (thread, fail) = self.inner.choose(runnable, threads);
        self.decisions.push(Decision { thread, fail });
        (thread, fail)
    }
}
