//! `triage`: from a fuzzer artifact (libFuzzer, AFL++ or honggfuzz) or a
//! reported mismatch to a short, readable, permanent regression test.
//!
//! ```text
//! triage repro <file> [--target T]        replay side by side, stop at the first divergence
//! triage show <file> [--target T]         the input as a trace
//! triage minimize <file> [-o out.trace]   shortest history that fails the same way
//! triage dedup <dir>                      group artifacts by how the oracle failed
//! triage promote <file> --name N          minimise into corpus/regressions/<target>/N.trace
//! triage report <dir>                     groups, sizes and minimised lengths, as Markdown
//! triage states --target T <dir>...       distinct abstract states a corpus reaches, over time
//! triage sample --target T --seconds S    distinct abstract states random inputs reach, over time
//!   [--explore]                           (or inputs that go on from a state's first input)
//! triage plot NAME=LOG... -o cov.svg      coverage over time from libFuzzer logs
//! triage map [--target T] <dir>...        the cells of the command space a corpus reaches
//! ```
//!
//! `--json` (any command but `report` and `plot`) prints one JSON value
//! instead of prose: what the scripts read.
//!
//! Inputs are never modified, and nothing existing is overwritten.

mod groups;
mod input;
mod map;
mod minimize;
mod plot;
mod real;
mod run;
mod states;

use clap::{Parser, Subcommand};
use groups::{dedup, Group};
use idpool_harness::check::Failure;
use idpool_harness::history::Finding;
use idpool_harness::targets;
use idpool_harness::trace::Trace;
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
    /// Print one JSON value instead of prose (not for `report`, `plot`).
    #[arg(long, global = true)]
    json: bool,
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
        /// Also write the executor's records of every trace to DIR
        /// (`c.raw`, `rust.raw`), for `--from-raw`.
        #[arg(long, value_name = "DIR")]
        save_raw: Option<PathBuf>,
        /// Boot nothing: compare the records a `--save-raw` run wrote to
        /// DIR (the same paths and flags), on this tree's models and rules.
        #[arg(long, value_name = "DIR")]
        from_raw: Option<PathBuf>,
        /// Replay only the programs that fail an allocation, N times each:
        /// the failing step's ioctl fails its 1st, ..., Nth allocation
        /// (fail-nth; kernels with fault injection, such as
        /// C_KERNEL_IMAGE and RUST_KERNEL_IMAGE built with
        /// ci/kernel/debug.config), each run against the model; prints
        /// which allocation is the model's failure on each driver.
        #[arg(long, value_name = "N", conflicts_with_all = ["sequential", "save_raw", "from_raw"])]
        fail_sweep: Option<u32>,
    },
    /// Replay an input step by step, allocator beside model; exit 1 if it fails.
    Repro {
        /// A trace, or raw bytes from any engine.
        file: PathBuf,
        /// The target of raw bytes, when the path does not name it.
        #[arg(long)]
        target: Option<String>,
    },
    /// Print an input as a trace (raw bytes decoded, nothing run but a
    /// concurrent program's schedule).
    Show {
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
        /// Where to write the minimised trace (default: `<file>.min.trace`).
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
    /// Count the distinct abstract states uniformly random inputs (or an exploration, --explore) reach: a yardstick for a fuzzer's states per CPU-minute.
    Sample {
        /// The target to run them on.
        #[arg(long)]
        target: String,
        /// Run inputs for this many seconds (on one core), saying how far it got on stderr every 30 s.
        #[arg(long)]
        seconds: Option<f64>,
        /// Or run this many inputs (the default: 100000).
        #[arg(long)]
        inputs: Option<usize>,
        /// The longest input, in bytes (default: the target's hunt_max_len); random inputs' lengths are uniform from 1, an exploration's stay short (a prefix and a few bytes).
        #[arg(long)]
        max_len: Option<usize>,
        /// Which random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u32,
        /// Explore instead: each input a prefix (of any length) of the first input to reach some state, then 1 to 32 random bytes.
        #[arg(long)]
        explore: bool,
    },
    /// Map a corpus over the command space: each cell reached with how many inputs, the cells never reached, and those no program reaches (with why); exit 1 when an input reaches one of those.
    Map {
        /// The target the inputs are for (binder_commands has a map).
        #[arg(long, default_value = "binder_commands")]
        target: String,
        /// Corpus directories (searched recursively).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
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
    let json = cli.json;
    let result = match cli.command {
        Command::Repro { file, target } => repro(&file, target.as_deref(), json),
        Command::Show { file, target } => show(&file, target.as_deref(), json),
        Command::RealKernel {
            paths,
            driver,
            mainline,
            sequential,
            save_raw,
            from_raw,
            fail_sweep,
        } => match fail_sweep {
            Some(n) => real::fail_sweep(&paths, driver, mainline, n),
            None => real::run(
                &paths,
                driver,
                mainline,
                sequential,
                real::Raw {
                    save: save_raw,
                    load: from_raw,
                },
            ),
        },
        Command::Minimize {
            file,
            target,
            output,
        } => minimize_cmd(&file, target.as_deref(), output, json),
        Command::Dedup { dir, target } => dedup(&dir, target.as_deref()).map(|groups| {
            groups::print(&groups, json);
            ExitCode::SUCCESS
        }),
        Command::Promote {
            file,
            name,
            root_cause,
            target,
            regressions,
        } => {
            let promotion = Promotion {
                name: &name,
                root_cause: root_cause.as_deref(),
                regressions: &regressions,
            };
            promote(&file, target.as_deref(), &promotion, json)
        }
        Command::Report { dir, target } => groups::report(&dir, target.as_deref()),
        Command::Plot {
            logs,
            output,
            metric,
        } => plot_cmd(&logs, &output, metric),
        Command::States {
            target,
            dirs,
            since,
        } => states::command(&target, &dirs, since, json),
        Command::Map { target, dirs } => map::command(&target, &dirs, json),
        Command::Sample {
            target,
            seconds,
            inputs,
            max_len,
            seed,
            explore,
        } => states::sample_command(&target, seconds, inputs, max_len, seed, explore, json),
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

fn repro(file: &Path, target: Option<&str>, json: bool) -> Result<ExitCode, String> {
    let trace = input::load(file, target)?;
    let provenance = targets::target(trace.target()).and_then(|t| t.provenance());
    let resource = input::resource_finding(file, target);
    let (lines, result) = run::narrated(&trace);
    let code = match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    };
    if json {
        /// What `repro --json` prints.
        #[derive(serde::Serialize)]
        struct Repro<'a> {
            target: &'a str,
            operations: usize,
            provenance: Option<&'a str>,
            passes: bool,
            events: Option<run::EventsJson>,
            failure: Option<run::FailureWithFinding>,
        }
        run::print_json(&Repro {
            target: trace.target(),
            operations: trace.len(),
            provenance: provenance.as_deref(),
            passes: result.is_ok(),
            events: result.as_ref().ok().map(run::EventsJson::of),
            failure: result
                .as_ref()
                .err()
                .map(|f| run::FailureWithFinding::of(f)),
        });
        return Ok(code);
    }
    println!("{} ({} operations)", trace.target(), trace.len());
    if let Some(line) = provenance {
        println!("{line}");
    }
    if let Some(kind) = resource {
        println!("note: a libFuzzer {kind} artifact: this replay may hang or exhaust memory too");
    }
    run::print_narration(&lines);
    run::print_verdict(&result);
    Ok(code)
}

fn show(file: &Path, target: Option<&str>, json: bool) -> Result<ExitCode, String> {
    let trace = input::load_any(file, target)?;
    if json {
        /// What `show --json` prints.
        #[derive(serde::Serialize)]
        struct Show<'a> {
            target: &'a str,
            operations: usize,
            trace: String,
        }
        run::print_json(&Show {
            target: trace.target(),
            operations: trace.len(),
            trace: trace.to_string(),
        });
    } else {
        print!("{trace}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A failing input, its minimised trace, and the failure they share.
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

/// What a minimised or promoted trace is, for `--json`: where it went, its
/// length before and after, and the failure it keeps.
#[derive(serde::Serialize)]
struct Written {
    path: String,
    target: String,
    from: usize,
    operations: usize,
    signature: String,
    finding: Option<&'static str>,
    memory_safety: bool,
}

impl Written {
    fn of(path: &Path, from: &Trace, min: &Trace, failure: &Failure) -> Written {
        Written {
            path: path.display().to_string(),
            target: min.target().to_string(),
            from: from.len(),
            operations: min.len(),
            signature: failure.signature().to_string(),
            finding: Finding::of(failure).map(Finding::name),
            memory_safety: failure.check.is_memory_safety(),
        }
    }
}

fn minimize_cmd(
    file: &Path,
    target: Option<&str>,
    output: Option<PathBuf>,
    json: bool,
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
    let (trace, min, failure) = minimized(file, target)?;
    // The known upstream finding it is, if any (`ci/history.sh` reads it).
    let finding = match Finding::of(&failure) {
        Some(finding) => format!("# finding: {}\n", finding.name()),
        None => String::new(),
    };
    write_new(
        &output,
        &format!("# signature: {}\n{finding}{min}", failure.signature()),
    )?;
    match json {
        true => run::print_json(&Written::of(&output, &trace, &min, &failure)),
        false => println!("{}", output.display()),
    }
    Ok(ExitCode::SUCCESS)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// What `promote` is asked for: the regression's name, its root cause,
/// and the regressions directory.
struct Promotion<'a> {
    name: &'a str,
    root_cause: Option<&'a str>,
    regressions: &'a Path,
}

fn promote(
    file: &Path,
    target: Option<&str>,
    promotion: &Promotion<'_>,
    json: bool,
) -> Result<ExitCode, String> {
    let Promotion {
        name,
        root_cause,
        regressions,
    } = *promotion;
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
    let (trace, min, failure) = minimized(file, target)?;
    std::fs::create_dir_all(dest.parent().unwrap())
        .map_err(|e| format!("{}: {e}", regressions.display()))?;
    let header = regression_header(file, &failure, root_cause);
    write_new(&dest, &format!("{header}{min}"))?;
    match json {
        true => run::print_json(&Written::of(&dest, &trace, &min, &failure)),
        false => println!("{} ({} operations)", dest.display(), min.len()),
    }
    Ok(ExitCode::SUCCESS)
}

/// A promoted trace's header: signature, date, origin, the first line of
/// the failure and the root cause; and, for a known upstream finding on a
/// historical version, what the trace must keep doing there (the
/// regression test expects it, and runs the same operations on mainline,
/// where they must pass).
fn regression_header(file: &Path, failure: &Failure, root_cause: Option<&str>) -> String {
    let mut header = format!(
        "# signature: {}\n# promoted: {} from {}\n# failed with: {}\n# root cause: {}\n",
        failure.signature(),
        today(),
        file.display(),
        shorten(failure.message.lines().next().unwrap_or_default(), 200),
        root_cause.unwrap_or("(not yet written)"),
    );
    if let Some(finding) = Finding::of(failure) {
        header.push_str(&format!(
            "# finding: {} (a known upstream finding on the versions the trace names)\n# expect: {}\n",
            finding.name(),
            failure.signature()
        ));
    }
    header
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

/// A group's minimised length, for `report`: the representative of a group
/// of failures, minimised to the same signature.
fn minimised_len(group: &Group, representative: &Path, target: Option<&str>) -> String {
    let Group::Fails(signature) = group else {
        return "-".to_string();
    };
    match input::load(representative, target) {
        Ok(trace) => minimize::minimize(&trace, signature, &mut |_, _| {})
            .len()
            .to_string(),
        Err(e) => e,
    }
}
