//! `triage`: from a fuzzer artifact (libFuzzer, AFL++ or honggfuzz) or a
//! reported mismatch to a short, readable, permanent regression test.
//!
//! ```text
//! triage repro <file> [--target T]        replay side by side, stop at the first divergence
//! triage minimize <file> [-o out.trace]   shortest history that fails the same way
//! triage dedup <dir>                      group artifacts by how the oracle failed
//! triage promote <file> --name N          minimise into corpus/regressions/<target>/N.trace
//! triage report <dir>                     groups, sizes and minimised lengths, as Markdown
//! triage plot NAME=LOG... -o cov.svg      coverage over time from libFuzzer logs
//! ```
//!
//! Inputs are never modified, and nothing existing is overwritten.

mod input;
mod minimize;
mod plot;
mod real;
mod run;
mod states;

use clap::{Parser, Subcommand};
use idpool_harness::check::Failure;
use idpool_harness::registry;
use idpool_harness::trace::Trace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "triage",
    version,
    about = "Reproduce, minimise, deduplicate and promote idpool fuzz findings"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay binder_commands programs (traces, raw inputs, or directories of them) on the real drivers booted in QEMU, each against our model of it; exit 1 when a model disagrees with its real driver.
    RealKernel {
        /// Trace files, raw binder_commands inputs, or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Which real drivers.
        #[arg(long, value_enum, default_value = "both")]
        driver: real::Which,
        /// Run a program that names a historical version on mainline (the
        /// real kernels are mainline) instead of skipping it.
        #[arg(long)]
        mainline: bool,
        /// Run a program's steps one after another, without their windows
        /// and failing allocations (which a real kernel cannot reproduce),
        /// instead of skipping it.
        #[arg(long)]
        sequential: bool,
    },
    /// Replay an input step by step, allocator beside model; exit 1 if it fails.
    Repro {
        /// A trace, or raw bytes from any engine.
        file: PathBuf,
        /// The target of raw bytes, when the path does not name it.
        #[arg(long)]
        target: Option<String>,
    },
    /// Shrink a failing input to the shortest history with the same failure signature.
    Minimize {
        /// A trace, or raw bytes from any engine.
        file: PathBuf,
        /// The target of raw bytes, when the path does not name it.
        #[arg(long)]
        target: Option<String>,
        /// Where to write the minimised trace (default: <file>.min.trace).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Group the inputs under a directory by failure signature.
    Dedup {
        /// A findings directory (searched recursively).
        dir: PathBuf,
        /// The target of raw bytes whose paths do not name one.
        #[arg(long)]
        target: Option<String>,
    },
    /// Minimise a failing input into a regression trace replayed by `cargo test`.
    Promote {
        /// A trace, or raw bytes from any engine.
        file: PathBuf,
        /// The regression's name: letters, digits, '-' and '_'.
        #[arg(long)]
        name: String,
        /// One line on the root cause, for the trace's header.
        #[arg(long)]
        root_cause: Option<String>,
        /// The target of raw bytes, when the path does not name it.
        #[arg(long)]
        target: Option<String>,
        /// The regressions directory.
        #[arg(long, default_value = "corpus/regressions")]
        regressions: PathBuf,
    },
    /// Plot coverage (or abstract states) over time from time-stamped logs, as SVG.
    Plot {
        /// Logs as NAME=PATH (lines prefixed with elapsed seconds, as ci/campaign.sh writes).
        #[arg(required = true)]
        logs: Vec<String>,
        /// The SVG file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// What to plot: libFuzzer's `cov:` or `triage states`'s `states:`.
        #[arg(long, value_enum, default_value = "cov")]
        metric: plot::Metric,
    },
    /// Count the distinct abstract states a corpus reaches, replaying its files in the order they were written.
    States {
        /// The target the inputs are for.
        #[arg(long)]
        target: String,
        /// Corpus directories (searched recursively).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Count seconds from this Unix time (default: the oldest file's).
        #[arg(long)]
        since: Option<u64>,
    },
    /// Summarise a findings directory as Markdown: groups, sizes, minimised lengths.
    Report {
        /// A findings directory (searched recursively).
        dir: PathBuf,
        /// The target of raw bytes whose paths do not name one.
        #[arg(long)]
        target: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Repro { file, target } => repro(&file, target.as_deref()),
        Command::RealKernel {
            paths,
            driver,
            mainline,
            sequential,
        } => real::run(&paths, driver, mainline, sequential),
        Command::Minimize {
            file,
            target,
            output,
        } => minimize_cmd(&file, target.as_deref(), output),
        Command::Dedup { dir, target } => dedup(&dir, target.as_deref()).map(|groups| {
            print_groups(&groups);
            ExitCode::SUCCESS
        }),
        Command::Promote {
            file,
            name,
            root_cause,
            target,
            regressions,
        } => promote(
            &file,
            &name,
            root_cause.as_deref(),
            target.as_deref(),
            &regressions,
        ),
        Command::Report { dir, target } => report(&dir, target.as_deref()),
        Command::Plot {
            logs,
            output,
            metric,
        } => plot_cmd(&logs, &output, metric),
        Command::States {
            target,
            dirs,
            since,
        } => states_cmd(&target, &dirs, since),
    };
    result.unwrap_or_else(|e| {
        eprintln!("triage: {e}");
        ExitCode::from(2)
    })
}

fn failing(trace: &Trace, path: &Path) -> Result<Failure, String> {
    match run::run(trace) {
        Ok(_) => Err(format!(
            "{}: passes on this build: nothing to minimise",
            path.display()
        )),
        Err(f) => Ok(*f),
    }
}

fn repro(file: &Path, target: Option<&str>) -> Result<ExitCode, String> {
    let trace = input::load(file, target)?;
    println!("{} ({} operations)", trace.target(), trace.len());
    if let Some(line) = registry::target(trace.target()).and_then(|t| t.provenance()) {
        println!("{line}");
    }
    if let Some(kind) = input::resource_finding(file, target) {
        println!("note: a libFuzzer {kind} artifact: this replay may hang or exhaust memory too");
    }
    let (lines, result) = run::narrated(&trace);
    for line in &lines {
        let indent = if line.starts_with("step ") || line.starts_with('t') {
            ""
        } else {
            "    "
        };
        println!("{indent}{line}");
    }
    match result {
        Ok(events) => {
            let reached: Vec<_> = events
                .counts()
                .into_iter()
                .filter(|&(_, n)| n > 0)
                .collect();
            println!("PASS: allocator and model agree at every step; paths reached: {reached:?}");
            Ok(ExitCode::SUCCESS)
        }
        Err(f) => {
            println!("FAIL at step {} [{}]", f.step, f.signature());
            println!("    {}", f.message.replace('\n', "\n    "));
            println!("    meaning: {}", run::explain(&f));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn minimized(file: &Path, target: Option<&str>) -> Result<(Trace, Trace, Failure), String> {
    let trace = input::load(file, target)?;
    let failure = failing(&trace, file)?;
    let signature = failure.signature();
    eprintln!(
        "minimize: {} operations, signature {signature}",
        trace.len()
    );
    let min = minimize::minimize(&trace, &signature, &mut |stage, t| {
        eprintln!("minimize: {stage}: {} operations", t.len());
    });
    eprintln!(
        "minimize: done: {} -> {} operations",
        trace.len(),
        min.len()
    );
    Ok((trace, min, failure))
}

fn write_new(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                format!("{}: exists already, not overwriting it", path.display())
            }
            _ => format!("{}: cannot create: {e}", path.display()),
        })?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

fn minimize_cmd(
    file: &Path,
    target: Option<&str>,
    output: Option<PathBuf>,
) -> Result<ExitCode, String> {
    let output = output.unwrap_or_else(|| {
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(".min.trace");
        file.with_file_name(name)
    });
    if output.exists() {
        return Err(format!(
            "{}: exists already, not overwriting it",
            output.display()
        ));
    }
    let (_, min, failure) = minimized(file, target)?;
    // The known upstream finding it is, if any (`ci/history.sh` reads it).
    let finding = match idpool_harness::history::Finding::of(&failure) {
        Some(finding) => format!("# finding: {}\n", finding.name()),
        None => String::new(),
    };
    write_new(
        &output,
        &format!("# signature: {}\n{finding}{min}", failure.signature()),
    )?;
    println!("{}", output.display());
    Ok(ExitCode::SUCCESS)
}

/// Signature (or "passes", "unreadable: …", "<target>/timeout",
/// "<target>/oom") -> files, smallest first.
type Groups = BTreeMap<String, Vec<(u64, PathBuf)>>;

fn dedup(dir: &Path, target: Option<&str>) -> Result<Groups, String> {
    let files = input::files_under(dir)?;
    if files.is_empty() {
        return Err(format!("{}: no files to triage", dir.display()));
    }
    let mut groups = Groups::new();
    for (i, path) in files.iter().enumerate() {
        eprint!("\rdedup: {}/{}", i + 1, files.len());
        let key = match input::resource_finding(path, target) {
            Some(key) => key,
            None => replay_key(path, target),
        };
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        groups.entry(key).or_default().push((size, path.clone()));
    }
    eprintln!();
    for files in groups.values_mut() {
        files.sort();
    }
    Ok(groups)
}

/// The group of an input found by replaying it: its failure's signature,
/// `passes`, or `unreadable: …`.
fn replay_key(path: &Path, target: Option<&str>) -> String {
    match input::load(path, target) {
        Err(e) => format!(
            "unreadable: {}",
            e.split(": ").skip(1).collect::<Vec<_>>().join(": ")
        ),
        Ok(trace) => match run::run(&trace) {
            Ok(_) => "passes".to_string(),
            Err(f) => f.signature(),
        },
    }
}

fn print_groups(groups: &Groups) {
    let mut sorted: Vec<_> = groups.iter().collect();
    sorted.sort_by_key(|(_, files)| std::cmp::Reverse(files.len()));
    for (key, files) in sorted {
        println!(
            "{:>5}  {key}\n       e.g. {}",
            files.len(),
            files[0].1.display()
        );
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn promote(
    file: &Path,
    name: &str,
    root_cause: Option<&str>,
    target: Option<&str>,
    regressions: &Path,
) -> Result<ExitCode, String> {
    if !valid_name(name) {
        return Err(format!(
            "bad name {name:?}: use letters, digits, '-' and '_'"
        ));
    }
    if !regressions.is_dir() {
        return Err(format!(
            "{}: no such directory (run from the repository root, or pass --regressions)",
            regressions.display()
        ));
    }
    let trace = input::load(file, target)?;
    let dest = regressions
        .join(trace.target())
        .join(format!("{name}.trace"));
    if dest.exists() {
        return Err(format!(
            "{}: exists already, not overwriting it",
            dest.display()
        ));
    }
    let (_, min, failure) = minimized(file, target)?;
    std::fs::create_dir_all(dest.parent().unwrap())
        .map_err(|e| format!("{}: {e}", regressions.display()))?;
    let header = format!(
        "# signature: {}\n# promoted: {} from {}\n# failed with: {}\n# root cause: {}\n",
        failure.signature(),
        today(),
        file.display(),
        shorten(failure.message.lines().next().unwrap_or_default(), 200),
        root_cause.unwrap_or("(not yet written)"),
    );
    // A known upstream finding on a historical version is what the trace
    // must keep doing there: the regression test expects it (and runs
    // the same operations on mainline, where they must pass).
    let expect = match idpool_harness::history::Finding::of(&failure) {
        Some(finding) => format!(
            "# finding: {} (a known upstream finding on the versions the trace names)\n# expect: {}\n",
            finding.name(),
            failure.signature()
        ),
        None => String::new(),
    };
    write_new(&dest, &format!("{header}{expect}{min}"))?;
    println!("{} ({} operations)", dest.display(), min.len());
    Ok(ExitCode::SUCCESS)
}

fn report(dir: &Path, target: Option<&str>) -> Result<ExitCode, String> {
    let groups = dedup(dir, target)?;
    let total: usize = groups.values().map(Vec::len).sum();
    println!("# Findings in {}\n", dir.display());
    println!("{total} inputs, {} groups.\n", groups.len());
    println!("| group | inputs | representative | minimised ops |");
    println!("| --- | ---: | --- | ---: |");
    for (key, files) in &groups {
        let rep = &files[0].1;
        let min = match key.as_str() {
            "passes" => "-".to_string(),
            k if k.starts_with("unreadable") || input::is_resource_key(k) => "-".to_string(),
            _ => {
                let trace = input::load(rep, target)?;
                minimize::minimize(&trace, key, &mut |_, _| {})
                    .len()
                    .to_string()
            }
        };
        println!("| {key} | {} | {} | {min} |", files.len(), rep.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn plot_cmd(logs: &[String], output: &Path, metric: plot::Metric) -> Result<ExitCode, String> {
    let series = logs
        .iter()
        .map(|arg| {
            let (name, path) = arg
                .split_once('=')
                .ok_or_else(|| format!("expected NAME=PATH, found {arg:?}"))?;
            plot::read_log(name, Path::new(path), metric)
        })
        .collect::<Result<Vec<_>, _>>()?;
    plot::draw(&series, output, metric)?;
    println!("{}", output.display());
    Ok(ExitCode::SUCCESS)
}

fn states_cmd(target: &str, dirs: &[PathBuf], since: Option<u64>) -> Result<ExitCode, String> {
    let target = idpool_harness::registry::target(target)
        .filter(|t| t.has_corpus())
        .ok_or_else(|| {
            format!(
                "unknown target {target:?} (known: {})",
                idpool_harness::registry::traceable_names()
            )
        })?;
    let since = match since {
        Some(secs) => std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
        None => std::time::UNIX_EPOCH,
    };
    let growth = states::growth(target, dirs, since)?;
    // Without --since, times count from the oldest file.
    let origin = if since == std::time::UNIX_EPOCH {
        growth.points.first().map_or(0.0, |p| p.0)
    } else {
        0.0
    };
    for (secs, count) in &growth.points {
        println!("{} states: {count}", secs - origin);
    }
    let total = growth.points.last().map_or(0, |p| p.1);
    eprintln!(
        "{}: {total} distinct abstract states from {} inputs ({} of them end in a failure, known upstream findings included)",
        target.name(),
        growth.inputs,
        growth.failing
    );
    Ok(ExitCode::SUCCESS)
}

/// `text`, cut to at most `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02}")
}
