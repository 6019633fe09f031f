//! How many distinct abstract states a corpus reaches, and when it reached
//! them: replays every input through the harness with the state recorder
//! on (`idpool_harness::feedback::record`), in the order the files were
//! written. The count is exact and does not depend on the engine that
//! wrote the corpus.

use idpool_harness::check;
use idpool_harness::feedback;
use idpool_harness::files;
use idpool_harness::registry::Target;
use idpool_harness::seeds;
use idpool_harness::targets;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The growth of the distinct states: (seconds since `since`, states so
/// far), one point per second at which the count changed, plus the final
/// count at the last file's time. Files older than `since` count at 0 s.
#[derive(Default)]
pub struct Growth {
    /// The points, in time order.
    pub points: Vec<(f64, usize)>,
    /// Inputs replayed.
    pub inputs: usize,
    /// Inputs that failed a check (they still count their states).
    pub failing: usize,
}

/// A [`Growth`] being counted: the states seen so far.
#[derive(Default)]
struct Counting {
    seen: BTreeSet<u64>,
    growth: Growth,
}

impl Counting {
    /// Runs `data` on `target` with the state recorder on, as an input
    /// written (or run) `secs` seconds from the start.
    fn run(&mut self, target: &dyn Target, data: &[u8], secs: f64) {
        let (result, states) = feedback::record(|| check::catching(|| target.run(data)));
        let growth = &mut self.growth;
        growth.inputs += 1;
        growth.failing += usize::from(result.is_err());
        self.seen.extend(states);
        let (second, count) = (secs.floor(), self.seen.len());
        match growth.points.last_mut() {
            Some(last) if last.0 == second => last.1 = count,
            _ => growth.points.push((second, count)),
        }
    }
}

/// Replays every file under `dirs` on `target`, oldest first.
pub fn growth(
    target: &'static dyn Target,
    dirs: &[PathBuf],
    since: SystemTime,
) -> Result<Growth, String> {
    let mut inputs: Vec<(f64, PathBuf)> = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        for path in files::walk(dir, &|p: &Path| !is_hidden(p))? {
            let written = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let secs = written
                .duration_since(since)
                .unwrap_or(Duration::ZERO)
                .as_secs_f64();
            inputs.push((secs, path));
        }
    }
    if inputs.is_empty() {
        return Err(format!(
            "no input under {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    inputs.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut counting = Counting::default();
    for (secs, path) in &inputs {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        counting.run(target, &data, *secs);
    }
    Ok(counting.growth)
}

/// The longest random input [`sample`] makes.
pub const SAMPLE_MAX_LEN: usize = 1 << 20;

/// Random input `i` of `seed`: the bytes of `seeds::bytes(seed << 32 | i)`
/// after the first two, which draw its length uniformly from 1 to
/// `max_len` (within 0.2% for a `max_len` that does not divide 65,536).
///
/// # Panics
///
/// When `max_len` is 0 or above [`SAMPLE_MAX_LEN`], or `i` is 2^32 or more.
pub fn random_input(seed: u32, i: usize, max_len: usize) -> Vec<u8> {
    assert!(
        (1..=SAMPLE_MAX_LEN).contains(&max_len),
        "a random input has 1 to {SAMPLE_MAX_LEN} bytes, not {max_len}"
    );
    let i = u32::try_from(i).expect("at most 2^32 inputs per seed");
    let mut data = seeds::bytes(u64::from(seed) << 32 | u64::from(i), max_len + 2);
    let len = 1 + usize::from(u16::from_le_bytes([data[0], data[1]])) * max_len / 65_536;
    data.drain(..2);
    data.truncate(len);
    data
}

/// Uniformly random inputs, as a yardstick for a fuzzer's states:
/// [`random_input`] 0, 1, 2, ... of `seed`, run until `more(the growth so
/// far)` says no. Counts the distinct states they reach (every input
/// run's, where a fuzzer's corpus has those of the inputs it kept), with
/// one point per second since the start.
///
/// # Panics
///
/// As [`random_input`].
pub fn sample(
    target: &'static dyn Target,
    max_len: usize,
    seed: u32,
    more: impl FnMut(&Growth) -> bool,
) -> Growth {
    run_inputs(target, more, false, |i, _| random_input(seed, i, max_len))
}

/// Runs `next(i, reached)` for i = 0, 1, 2, ... on `target` until
/// `more(the growth so far)` says no, and counts their states, one point
/// per second since the start. When `keep`, `reached` holds each input
/// that reached a new state once per such state; otherwise it stays empty.
fn run_inputs(
    target: &'static dyn Target,
    mut more: impl FnMut(&Growth) -> bool,
    keep: bool,
    mut next: impl FnMut(usize, &[Vec<u8>]) -> Vec<u8>,
) -> Growth {
    let start = std::time::Instant::now();
    let mut counting = Counting::default();
    let mut reached: Vec<Vec<u8>> = Vec::new();
    while more(&counting.growth) {
        let data = next(counting.growth.inputs, &reached);
        let before = counting.seen.len();
        counting.run(target, &data, start.elapsed().as_secs_f64());
        if keep {
            // INVARIANT: one entry per state counted, so that a state is
            // picked as often as any other.
            for _ in before..counting.seen.len() {
                reached.push(data.clone());
            }
        }
    }
    counting.growth
}

/// The most random bytes [`explore`] appends to a prefix: a few steps.
pub const EXPLORE_STEP: usize = 32;

/// Inputs that start again from an input that reached a state and go on
/// elsewhere (the "go-explore" idea): after a first random input, input
/// `i` is [`continuation`] `i` of the inputs that reached a state first,
/// one entry per state. Counts the states as [`sample`] does.
///
/// A second yardstick beside [`sample`]'s: what a search that keeps each
/// state's first input and starts from it reaches in some CPU time, with
/// none of a fuzz engine's instrumentation or bookkeeping. Like every
/// `triage` command it runs the release build, where the allocator's
/// `debug_assert!`s, which are checks, do not run: a yardstick, not a
/// hunt. It is not how any engine here mutates.
///
/// # Panics
///
/// As [`random_input`].
pub fn explore(
    target: &'static dyn Target,
    max_len: usize,
    seed: u32,
    more: impl FnMut(&Growth) -> bool,
) -> Growth {
    run_inputs(target, more, true, |i, reached| {
        if reached.is_empty() {
            random_input(seed, i, max_len)
        } else {
            continuation(reached, seed, i, max_len).input(reached)
        }
    })
}

/// Where an exploration's input goes on from ([`continuation`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continuation {
    /// Which of the inputs that reached a state.
    pub pick: usize,
    /// How many of its bytes are kept.
    pub cut: usize,
    /// The random bytes after them: 1 to [`EXPLORE_STEP`].
    pub tail: Vec<u8>,
}

impl Continuation {
    /// The input: the picked input's first `cut` bytes, then the tail.
    pub fn input(&self, reached: &[Vec<u8>]) -> Vec<u8> {
        let mut data = reached[self.pick][..self.cut].to_vec();
        data.extend_from_slice(&self.tail);
        data
    }
}

/// Input `i` of `seed`'s exploration: one of `reached` (about uniformly),
/// cut at a uniformly random length, then 1 to [`EXPLORE_STEP`] random
/// bytes, within `max_len` bytes in all.
///
/// # Panics
///
/// When `reached` is empty, `max_len` is 0, or `i` is 2^32 or more.
pub fn continuation(reached: &[Vec<u8>], seed: u32, i: usize, max_len: usize) -> Continuation {
    assert!(max_len > 0, "an input has at least one byte");
    let i = u32::try_from(i).expect("at most 2^32 inputs per seed");
    // Another stream than random_input's for the same seed and index.
    let r = seeds::bytes(!(u64::from(seed) << 32 | u64::from(i)), EXPLORE_STEP + 7);
    let pick = u32::from_le_bytes([r[0], r[1], r[2], r[3]]) as usize % reached.len();
    let len = reached[pick].len();
    let cut = (usize::from(u16::from_le_bytes([r[4], r[5]])) * (len + 1) / 65_536).min(max_len - 1);
    let add = 1 + usize::from(r[6]) * EXPLORE_STEP.min(max_len - cut) / 256;
    Continuation {
        pick,
        cut,
        tail: r[7..7 + add].to_vec(),
    }
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// The target called `name`, if it has a corpus (the targets whose
/// states count).
fn corpus_target(name: &str) -> Result<&'static dyn Target, String> {
    targets::target(name)
        .filter(|t| t.has_corpus())
        .ok_or_else(|| {
            let known = targets::traceable_names();
            format!("unknown target {name:?} (known: {known})")
        })
}

/// `triage states`: the growth of the distinct states `dirs` reach on
/// `target`, counted from `since` (Unix seconds; default the oldest
/// file's time), one line `SECS states: N` per point, or (`json`) one
/// JSON object of `target`, `inputs`, `failing`, `states` and `points`
/// (`[seconds, states]` pairs).
pub fn command(
    target: &str,
    dirs: &[PathBuf],
    since: Option<u64>,
    json: bool,
) -> Result<ExitCode, String> {
    let target = corpus_target(target)?;
    let from = since.map_or(UNIX_EPOCH, |secs| UNIX_EPOCH + Duration::from_secs(secs));
    let growth = growth(target, dirs, from)?;
    // Without --since, times count from the oldest file.
    let origin = match since {
        None => growth.points.first().map_or(0.0, |p| p.0),
        Some(_) => 0.0,
    };
    print(target, &growth, origin, "", None, json);
    Ok(ExitCode::SUCCESS)
}

/// `triage sample`: the states uniformly random inputs of 1 to `max_len`
/// bytes (default the target's `hunt_max_len`) reach on `target` in
/// `seconds` on one core, or in `inputs` inputs, or, when `explored`, the
/// inputs of an exploration ([`explore`]) of at most `max_len` bytes;
/// printed as by `triage states`, the JSON with `explore`, `max_len` and
/// `seed` too.
pub fn sample_command(
    target: &str,
    seconds: Option<f64>,
    inputs: Option<usize>,
    max_len: Option<usize>,
    seed: u32,
    explored: bool,
    json: bool,
) -> Result<ExitCode, String> {
    let target = corpus_target(target)?;
    let max_len = max_len.unwrap_or_else(|| target.hunt_max_len());
    if !(1..=SAMPLE_MAX_LEN).contains(&max_len) {
        return Err(format!(
            "--max-len must be 1 to {SAMPLE_MAX_LEN}, not {max_len}"
        ));
    }
    type More<'a> = &'a mut dyn FnMut(&Growth) -> bool;
    let run: fn(&'static dyn Target, usize, u32, More) -> Growth = if explored {
        |target, max_len, seed, more| explore(target, max_len, seed, more)
    } else {
        |target, max_len, seed, more| sample(target, max_len, seed, more)
    };
    let growth = match (seconds, inputs) {
        (Some(_), Some(_)) => return Err("give --seconds or --inputs, not both".into()),
        (Some(s), None) if !(s.is_finite() && s > 0.0) => {
            return Err(format!("--seconds must be a positive number, not {s}"))
        }
        (Some(s), None) => {
            let start = std::time::Instant::now();
            let mut progress = Progress::every(PROGRESS_EVERY);
            run(target, max_len, seed, &mut |growth| {
                let elapsed = start.elapsed();
                let more = elapsed.as_secs_f64() < s;
                // The last call ends the run: its count is the summary's.
                if let Some(line) = progress.line(elapsed, growth).filter(|_| more) {
                    eprintln!("triage sample: {}: {line}", target.name());
                }
                more
            })
        }
        (None, Some(0)) => return Err("--inputs must be at least 1".into()),
        (None, n) => {
            let n = n.unwrap_or(100_000);
            run(target, max_len, seed, &mut |growth| growth.inputs < n)
        }
    };
    let bytes = |n: usize| {
        if n == 1 {
            "1 byte".to_string()
        } else {
            format!("{n} bytes")
        }
    };
    let how = if explored {
        let tail = match EXPLORE_STEP.min(max_len) {
            1 => "1 random byte".to_string(),
            step => format!("1 to {step} random bytes"),
        };
        format!(
            " (explored: a prefix of a state's first input, then {tail}, at most {}, seed {seed})",
            bytes(max_len)
        )
    } else {
        format!(" (uniformly random, 1 to {}, seed {seed})", bytes(max_len))
    };
    let settings = Settings {
        explore: explored,
        max_len,
        seed,
    };
    print(target, &growth, 0.0, &how, Some(settings), json);
    Ok(ExitCode::SUCCESS)
}

/// How often a timed `triage sample` says how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// A long run's progress lines (on stderr): one each time another `every`
/// has passed, with the states and inputs so far, so that a half-hour
/// exploration is not silent until its end.
struct Progress {
    every: Duration,
    next: Duration,
}

impl Progress {
    /// # Panics
    ///
    /// When `every` is zero.
    fn every(every: Duration) -> Self {
        assert!(!every.is_zero(), "progress needs an interval");
        Progress { every, next: every }
    }

    /// The line due at `elapsed`, if one is: `30 s: 6,074 states from
    /// 612,345 inputs`.
    fn line(&mut self, elapsed: Duration, growth: &Growth) -> Option<String> {
        if elapsed < self.next {
            return None;
        }
        while self.next <= elapsed {
            self.next += self.every;
        }
        let states = growth.points.last().map_or(0, |p| p.1);
        Some(format!(
            "{} s: {} states from {} inputs",
            elapsed.as_secs(),
            thousands(states),
            thousands(growth.inputs)
        ))
    }
}

/// `n` with commas between its thousands.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// How `triage sample` made its inputs, in its JSON after the counts.
#[derive(serde::Serialize)]
struct Settings {
    explore: bool,
    max_len: usize,
    seed: u32,
}

/// A growth as `--json` prints it: the counts, the `[seconds, states]`
/// points, and `triage sample`'s settings.
#[derive(serde::Serialize)]
struct GrowthJson {
    target: &'static str,
    inputs: usize,
    failing: usize,
    states: usize,
    points: Vec<(f64, usize)>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    settings: Option<Settings>,
}

/// Prints a growth as `triage states` does: points from `origin`, and the
/// total; `how` follows "inputs" in the prose.
/// `settings` go into the JSON object after the counts (how the inputs
/// were made, for `triage sample`).
fn print(
    target: &dyn Target,
    growth: &Growth,
    origin: f64,
    how: &str,
    settings: Option<Settings>,
    json: bool,
) {
    let total = growth.points.last().map_or(0, |p| p.1);
    if json {
        let points = (growth.points.iter())
            .map(|&(secs, count)| (secs - origin, count))
            .collect();
        crate::run::print_json(&GrowthJson {
            target: target.name(),
            inputs: growth.inputs,
            failing: growth.failing,
            states: total,
            points,
            settings,
        });
        return;
    }
    for (secs, count) in &growth.points {
        println!("{} states: {count}", secs - origin);
    }
    eprintln!(
        "{}: {total} distinct abstract states from {} inputs{how} ({} of them end in a failure, known upstream findings included)",
        target.name(),
        growth.inputs,
        growth.failing
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_is_a_prefix_then_a_few_random_bytes() {
        // Distinct bytes, so that a prefix is told from any other slice.
        let reached = [(0..50).collect::<Vec<u8>>(), (100..110).collect()];
        let max_len = 40;
        let (mut picked, mut cuts, mut tails) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for i in 0..4000 {
            let next = continuation(&reached, 1, i, max_len);
            let base = &reached[next.pick];
            assert!(
                next.cut <= base.len() && next.cut < max_len,
                "input {i}: {next:?}"
            );
            let room = EXPLORE_STEP.min(max_len - next.cut);
            assert!((1..=room).contains(&next.tail.len()), "input {i}: {next:?}");
            let input = next.input(&reached);
            assert_eq!(input[..next.cut], base[..next.cut], "input {i}: a prefix");
            assert_eq!(input[next.cut..], next.tail[..], "input {i}: then the tail");
            picked.insert(next.pick);
            cuts.insert((next.pick, next.cut));
            tails.insert(next.tail);
        }
        assert_eq!(picked, BTreeSet::from([0, 1]), "both inputs are picked");
        for cut in [(0, 0), (0, 39), (1, 0), (1, 10)] {
            assert!(cuts.contains(&cut), "no cut {cut:?}");
        }
        assert!(
            tails.len() > 3000,
            "the tails differ: {} distinct",
            tails.len()
        );
        assert_eq!(
            continuation(&reached, 3, 7, 40),
            continuation(&reached, 3, 7, 40)
        );
        assert_ne!(
            continuation(&reached, 3, 7, 40),
            continuation(&reached, 4, 7, 40)
        );
    }

    #[test]
    fn a_long_run_says_how_far_it_got_once_per_interval() {
        let mut progress = Progress::every(Duration::from_secs(30));
        let growth = |states: usize, inputs: usize| Growth {
            points: vec![(0.0, 1), (12.0, states)],
            inputs,
            failing: 0,
        };
        let at = |s: u64| Duration::from_millis(s * 1000 + 400);
        assert_eq!(progress.line(at(0), &growth(1, 10)), None);
        assert_eq!(progress.line(at(29), &growth(5, 100)), None);
        assert_eq!(
            progress.line(at(30), &growth(6074, 612_345)).as_deref(),
            Some("30 s: 6,074 states from 612,345 inputs")
        );
        assert_eq!(progress.line(at(31), &growth(6075, 620_000)), None);
        // A step longer than the interval gives one line, not a backlog.
        assert_eq!(
            progress.line(at(95), &growth(6100, 1_000_000)).as_deref(),
            Some("95 s: 6,100 states from 1,000,000 inputs")
        );
        assert_eq!(progress.line(at(119), &growth(6100, 1_000_001)), None);
        assert!(progress.line(at(120), &growth(6100, 1_000_002)).is_some());
        // Due exactly at a multiple of the interval, and once.
        let exactly = Duration::from_secs(150);
        assert!(progress.line(exactly, &growth(6100, 1_000_003)).is_some());
        assert_eq!(progress.line(exactly, &growth(6100, 1_000_004)), None);
        assert_eq!(
            progress.line(
                exactly - Duration::from_nanos(1) + Duration::from_secs(30),
                &growth(1, 1)
            ),
            None
        );
        assert_eq!(
            Progress::every(Duration::from_secs(1))
                .line(at(1), &Growth::default())
                .as_deref(),
            Some("1 s: 0 states from 0 inputs")
        );
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (15_568_970, "15,568,970"),
        ] {
            assert_eq!(thousands(n), text);
        }
    }

    #[test]
    fn random_inputs_have_every_length_and_differ() {
        for max_len in [1, 2, 3, 96, 256] {
            let mut lengths = BTreeSet::new();
            for i in 0..4000 {
                lengths.insert(random_input(1, i, max_len).len());
            }
            assert_eq!(
                lengths,
                (1..=max_len).collect::<BTreeSet<_>>(),
                "max_len {max_len}"
            );
        }
        let inputs: BTreeSet<Vec<u8>> = (0..1000).map(|i| random_input(1, i, 256)).collect();
        assert!(
            inputs.len() > 990,
            "inputs differ from one index to the next"
        );
        let other: BTreeSet<Vec<u8>> = (0..1000).map(|i| random_input(2, i, 256)).collect();
        assert!(inputs.intersection(&other).count() < 10, "seeds differ");
        assert_eq!(random_input(3, 7, 256), random_input(3, 7, 256));
    }
}
