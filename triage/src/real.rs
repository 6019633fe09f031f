//! `triage real-kernel`: `binder_commands` programs replayed on the real
//! drivers of mainline booted in QEMU, each against our model of that
//! driver, and the two real drivers against each other.
//!
//! The kernels and the executor come from the scripts: `ci/kernel-vm.sh
//! --prepare` (the C driver's Debian kernel and module, the static
//! executor) and `ci/kernel-rust.sh` (the Rust driver's kernel). Only
//! sequential mainline programs can run on a real kernel: a program naming
//! another version, a window or a failing allocation is skipped with the
//! reason.

use binder_vm::compare::{
    against_failing_model, against_model, changes, model_fails, show_items, show_only, Mismatch,
};
use binder_vm::klog::{self, Class, Limit, LogLine};
use binder_vm::replay::{replay_with, Kernel, Options, Replay, TraceRun};
use binder_vm::wire::FailNth;
use binder_vm::Driver;
use idpool::driver::{Log, Pid, Program, Snapshot};
use idpool::AllocSite;
use idpool_harness::targets::binder_commands::compare::{self, Diff};
use idpool_harness::targets::binder_commands::{CmdProgram, Plan};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Which real drivers to replay on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// The C driver (Debian's 7.3.4 kernel and module).
    C,
    /// The Rust driver (the kernel ci/kernel-rust.sh builds).
    Rust,
    /// Both, and each against the other.
    Both,
}

/// The repository's root (triage lives one level down).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("triage sits in the repository")
        .to_path_buf()
}

/// The Rust driver's kernel: `RUST_KERNEL_IMAGE`, or what
/// `ci/kernel-rust.sh --print-path` says is built.
fn rust_kernel(root: &Path) -> Result<Kernel, String> {
    let image = match std::env::var_os("RUST_KERNEL_IMAGE") {
        Some(p) => PathBuf::from(p),
        None => {
            let out = std::process::Command::new(root.join("ci/kernel-rust.sh"))
                .arg("--print-path")
                .output()
                .map_err(|e| format!("ci/kernel-rust.sh: {e}"))?;
            if !out.status.success() {
                return Err("the Rust driver's kernel is not built: run ci/kernel-rust.sh".into());
            }
            let text = String::from_utf8_lossy(&out.stdout);
            PathBuf::from(text.lines().last().unwrap_or_default().trim())
        }
    };
    Ok(Kernel {
        driver: Driver::Rust,
        image,
        module: None,
        executor: static_executor(root)?,
    })
}

/// The C driver's kernel: Debian's kernel and module (`ci/kernel-vm.sh
/// --prepare`), or `C_KERNEL_IMAGE`, a kernel with the C driver built in
/// and binderfs (`ci/kernel-rust.sh --fragment ci/kernel/c-binder.config`,
/// with `--fragment ci/kernel/debug.config` for KASAN and lockdep).
fn c_kernel(root: &Path) -> Result<Kernel, String> {
    let Some(image) = std::env::var_os("C_KERNEL_IMAGE") else {
        return Kernel::c_from_cache(root).map_err(|e| e.to_string());
    };
    let image = PathBuf::from(image);
    if !image.is_file() {
        return Err(format!("C_KERNEL_IMAGE={} is not a file", image.display()));
    }
    Ok(Kernel {
        driver: Driver::C,
        image,
        module: None,
        executor: static_executor(root)?,
    })
}

/// The static executor `ci/kernel-vm.sh --prepare` builds.
fn static_executor(root: &Path) -> Result<PathBuf, String> {
    let executor = Kernel::static_executor(root);
    if executor.is_file() {
        Ok(executor)
    } else {
        Err(format!(
            "{} is missing: run ci/kernel-vm.sh --prepare",
            executor.display()
        ))
    }
}

/// The programs under `paths`: trace files (`*.trace`), or raw inputs of
/// the `binder_commands` target, each named by its path; those that cannot
/// run on a real kernel are returned apart with the reason.
type Loaded = (Vec<(String, Program)>, Vec<(String, String)>);

fn load(paths: &[PathBuf], mainline: bool, sequential: bool) -> Result<Loaded, String> {
    let (ok, skipped) = load_failing(paths, mainline, sequential, false)?;
    Ok((ok.into_iter().map(|(n, p, _)| (n, p)).collect(), skipped))
}

/// A program with the allocation site each step fails, if any.
type Failing = (String, Program, Vec<Option<AllocSite>>);
/// The programs to replay, and those skipped with the reason.
type LoadedFailing = (Vec<Failing>, Vec<(String, String)>);

/// [`load`], keeping the programs with failing allocations (and no
/// window) when `failing` is set, each with its steps' sites.
fn load_failing(
    paths: &[PathBuf],
    mainline: bool,
    sequential: bool,
    failing: bool,
) -> Result<LoadedFailing, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|e| e.is_file())
                .collect();
            entries.sort();
            files.extend(entries);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    let (mut ok, mut skipped) = (Vec::new(), Vec::new());
    for f in files {
        let name = f.display().to_string();
        let bytes = std::fs::read(&f).map_err(|e| format!("{name}: {e}"))?;
        let program = if f.extension().is_some_and(|e| e == "trace") {
            let text = String::from_utf8_lossy(&bytes);
            if text.lines().any(|l| l.trim() == "target binder_commands") {
                let trace = idpool_harness::targets::parse_trace(&text)
                    .map_err(|e| format!("{name}: {e}"))?;
                trace
                    .body()
                    .downcast_ref::<CmdProgram>()
                    .cloned()
                    .ok_or_else(|| format!("{name}: not a binder_commands trace"))?
            } else {
                let program =
                    binder_vm::program::parse(&text).map_err(|e| format!("{name}: {e}"))?;
                CmdProgram {
                    plans: vec![Default::default(); program.steps.len()],
                    program,
                    ..CmdProgram::default()
                }
            }
        } else {
            CmdProgram::decode(&bytes)
        };
        let mut program = program;
        if sequential {
            program.plans = vec![Default::default(); program.program.steps.len()];
        }
        if mainline {
            program.c = idpool::Version::CMainline;
            program.rust = idpool::Version::RustMainline;
        }
        if !program.is_mainline() {
            skipped.push((name, "names a version other than mainline".into()));
        } else if program.plans.iter().any(|p| p.window.is_some()) {
            skipped.push((name, "has a window".into()));
        } else if program.planned() && !failing {
            skipped.push((name, "has a failing allocation (see --fail-sweep)".into()));
        } else if program.program.steps.is_empty() {
            skipped.push((name, "has no step".into()));
        } else {
            let fail = program.plans.iter().map(|p| p.fail).collect();
            ok.push((name, program.program, fail));
        }
    }
    Ok((ok, skipped))
}

fn replay(kernel: &Kernel, programs: &[(String, Program)]) -> Result<Replay, String> {
    replay_failing(kernel, programs, BTreeMap::new())
}

/// [`replay`], with the faults `fail_nth` injects, by trace name.
fn replay_failing(
    kernel: &Kernel,
    programs: &[(String, Program)],
    fail_nth: BTreeMap<String, Vec<FailNth>>,
) -> Result<Replay, String> {
    let opts = Options {
        verbose: true,
        fail_nth,
        ..Options::default()
    };
    let result = replay_with(kernel, programs, &opts).map_err(|e| e.to_string())?;
    for b in &result.boots {
        eprintln!(
            "real-kernel: {} boot: {} traces in {:.1} s",
            b.kernel,
            b.traces,
            b.wall.as_secs_f64()
        );
    }
    Ok(result)
}

/// One driver's replay in figures: boots, traces a boot, the time to the
/// executor, wall time a trace, and the time its traces took in the VM
/// (pacing included).
fn figures(driver: &str, r: &Replay) -> String {
    let boots = r.boots.len().max(1) as f64;
    let traces: usize = r.boots.iter().map(|b| b.traces).sum();
    let wall: f64 = r.boots.iter().map(|b| b.wall.as_secs_f64()).sum();
    let to_executor: f64 = r
        .boots
        .iter()
        .map(|b| b.executor_start_ms as f64 / 1000.0)
        .sum::<f64>()
        / boots;
    let in_vm: f64 = r.traces.iter().map(|t| t.ms as f64 / 1000.0).sum();
    let paced: f64 = r.boots.iter().map(|b| b.paced_ms as f64 / 1000.0).sum();
    format!(
        "real-kernel: {driver}: {traces} trace(s) in {} boot(s) ({:.0} a boot), {wall:.1} s from QEMU's start to its exit in all, {:.2} s a trace; kernel boot to executor {to_executor:.2} s of guest time a boot; traces {in_vm:.1} s of guest time, {paced:.1} s of it waiting out the log rate limits",
        r.boots.len(),
        traces as f64 / boots,
        wall / traces.max(1) as f64,
    )
}

fn print(which: &str, name: &str, mismatches: &[Mismatch]) -> bool {
    if mismatches.is_empty() {
        println!("{name}: {which}: agrees with the model");
        return true;
    }
    println!(
        "{name}: {which}: {} difference(s) from the model",
        mismatches.len()
    );
    for m in mismatches {
        println!("    {m}");
    }
    false
}

/// The kernel's own warnings in one trace's log (a `WARNING:`, `BUG:` or
/// `Oops` line outside the driver's messages: KASAN's and lockdep's reports
/// and every `WARN_ON` start so), each with where it was printed: while
/// the processes opened the device, at a step (with its command), at the
/// executor's flush, or while the processes closed it. No model has such a
/// line: any one fails the replay.
fn kernel_warnings(t: &TraceRun) -> Vec<String> {
    let mut parts: Vec<(String, &[LogLine])> = vec![("at the open".into(), &t.begin_log[..])];
    for (i, s) in t.steps.iter().enumerate() {
        parts.push((format!("at step {i} `{}`", s.step), &s.log[..]));
    }
    parts.push(("at the flush".into(), &t.flush_log[..]));
    parts.push(("at the close".into(), &t.end_log[..]));
    warnings_in(parts)
}

/// The warning lines of `parts`, each as "WHERE: LINE".
fn warnings_in<'a>(parts: impl IntoIterator<Item = (String, &'a [LogLine])>) -> Vec<String> {
    parts
        .into_iter()
        .flat_map(|(at, log)| {
            log.iter()
                .filter(|l| is_warning(&l.class))
                .map(move |l| format!("{at}: {}", l.message))
        })
        .collect()
}

/// Whether a line is one of the kernel's own reports: a splat, or a `BUG()`
/// of the driver ("kernel BUG at drivers/android/...").
fn is_warning(class: &Class) -> bool {
    matches!(class, Class::Splat | Class::Log(Log::Bug))
}

/// The warnings on the consoles of `replay`'s boots that no trace's log
/// holds (a report printed after the last log read of a boot's last
/// trace): printed, and counted.
fn console_warnings(which: &str, replay: &Replay) -> usize {
    let in_traces: Vec<String> = replay.traces.iter().flat_map(kernel_warnings).collect();
    let mut n = 0;
    for (b, boot) in replay.boots.iter().enumerate() {
        for line in boot.console.lines() {
            let line = klog::classify(line.trim_end_matches('\r'), Driver::C);
            if is_warning(&line.class) && !in_traces.iter().any(|w| w.ends_with(&line.message)) {
                n += 1;
                println!(
                    "real-kernel: {which}: boot {}: KERNEL WARNING on the console: {}",
                    b + 1,
                    line.message
                );
            }
        }
    }
    n
}

/// Prints one driver's kernel warnings in a trace; whether there were any.
fn print_warnings(which: &str, name: &str, t: &TraceRun) -> bool {
    let warnings = kernel_warnings(t);
    for w in &warnings {
        println!("{name}: {which}: KERNEL WARNING {w}");
    }
    !warnings.is_empty()
}

/// A snapshot without its death notifications: the Rust driver's debug
/// text prints none (`Process::debug_print`, process.rs:642-656, prints a
/// ref's handle, node and counts only), so the real drivers' are compared
/// without them.
fn without_deaths(s: &Snapshot) -> Snapshot {
    let mut s = s.clone();
    for p in &mut s.procs {
        for r in p.refs.values_mut() {
            r.death = None;
        }
    }
    s
}

/// The lines only the real Rust driver printed that the real C driver's
/// rate limits dropped: lines C prints through a limit (`klog::c_limit`)
/// whose window had used its burst at this step. Finding 0003: Rust's lines
/// are not rate-limited.
fn rate_limited(d: &Diff, full: &[Limit]) -> Option<(Diff, Vec<Log>)> {
    let Diff::Log { c, rust } = d else {
        return None;
    };
    let (dropped, kept): (Vec<Log>, Vec<Log>) = rust
        .iter()
        .partition(|l| klog::c_limit(l).is_some_and(|limit| full.contains(&limit)));
    (!dropped.is_empty()).then(|| {
        (
            Diff::Log {
                c: c.clone(),
                rust: kept,
            },
            dropped,
        )
    })
}

/// A difference in a line: only what differs.
fn describe(d: &Diff) -> String {
    match d {
        Diff::Ret { c, rust } => {
            let show = |r: &Option<idpool::driver::Ret>| r.map_or("?".into(), |r| r.to_string());
            format!("ret: C {}, Rust {}", show(c), show(rust))
        }
        Diff::Ee { c, rust } => {
            let show = |e: &Option<idpool::driver::ExtendedError>| {
                e.map_or("none".into(), |e| e.to_string())
            };
            format!("extended error: C {}, Rust {}", show(c), show(rust))
        }
        Diff::Reads { pid, c, rust } => {
            format!("p{pid} reads: {}", show_only(("C", c), ("Rust", rust)))
        }
        Diff::Log { c, rust } => format!(
            "log: C only {}, Rust only {}",
            show_items(c),
            show_items(rust)
        ),
        Diff::Frozen { pid, c, rust } => format!("p{pid} frozen: C {c}, Rust {rust}"),
        Diff::State { pid, what, refs } => {
            let key = |m: &compare::RefMap| -> BTreeMap<u32, (Pid, u64, u32, u32, Option<u64>)> {
                m.iter()
                    .map(|(&h, r)| (h, (r.node.owner, r.node.ptr, r.strong, r.weak, r.death)))
                    .collect()
            };
            let show = |v: &(Pid, u64, u32, u32, Option<u64>)| {
                let death = v.4.map(|c| format!(" d{c}")).unwrap_or_default();
                format!("{}:{} s{} w{}{death}", v.0, v.1, v.2, v.3)
            };
            let mut parts: Vec<String> = what
                .split("; ")
                .filter(|p| !p.starts_with("refs:"))
                .map(str::to_string)
                .collect();
            if let Some(c) = changes(
                "handle",
                ("C", &key(&refs.0)),
                ("Rust", &key(&refs.1)),
                show,
            ) {
                parts.push(format!("refs: {c}"));
            }
            format!("p{pid} {}", parts.join("; "))
        }
    }
}

/// The real drivers against each other (returns, reads, log lines and
/// references, step by step), each difference named by the rule of
/// `binder_commands` that explains it, or new; after a difference whose
/// rule makes the drivers' states diverge, the rest of the trace is not
/// compared (as the target does). The count of each rule's differences is
/// added to `by_rule` (`NEW` for those no rule names); whether a new
/// difference was seen.
fn print_drivers(
    name: &str,
    c: &TraceRun,
    rust: &TraceRun,
    fail: &[Option<AllocSite>],
    by_rule: &mut BTreeMap<&'static str, usize>,
) -> bool {
    let mut new = false;
    let mut any = false;
    // Knows the program's tasks: findings 0020 and 0021 need two opens by
    // one task.
    let mut aftermath = compare::Aftermath::new(&c.program.procs);
    for (i, (sc, sr)) in c.steps.iter().zip(&rust.steps).enumerate() {
        let mut diffs: Vec<compare::Diff> = compare::ret(&sc.observed, &sr.observed).collect();
        diffs.extend(compare::reads_and_logs([&sc.observed], [&sr.observed]));
        diffs.extend(compare::states(
            &without_deaths(&sc.snapshot),
            &without_deaths(&sr.snapshot),
        ));
        let mut kept = Vec::new();
        for d in diffs {
            let (d, dropped) = match rate_limited(&d, &sc.full_limits) {
                Some((rest, dropped)) => (rest, dropped),
                None => (d, Vec::new()),
            };
            if !dropped.is_empty() {
                any = true;
                *by_rule.entry("log-lines").or_default() += 1;
                println!(
                    "{name}: real C and real Rust differ at step {i} `{}` [log-lines]: Rust only {}, dropped by C's rate limit",
                    sc.step,
                    show_items(&dropped)
                );
            }
            if !matches!(&d, Diff::Log { c, rust } if c.is_empty() && rust.is_empty()) {
                kept.push(d);
            }
        }
        // As the target does: once one difference of the step is a finding
        // after which the states diverge, the step's other differences
        // follow from it; so does every difference of a refused manager
        // call that left its node in Rust only.
        aftermath.follow(i, &sc.step, &sc.observed, &sr.observed);
        let rules: Vec<_> = kept
            .iter()
            .map(|d| {
                let plan = Plan {
                    window: None,
                    fail: fail.get(i).copied().flatten(),
                };
                // As the target does: each driver's own statement at the
                // step first (0020, 0021), then the step's rules, then what
                // earlier steps left.
                aftermath
                    .explain_first(i, d)
                    .or_else(|| compare::explain(&sc.step, plan, d))
                    .or_else(|| aftermath.explain(i, &sc.step, d))
            })
            .collect();
        let node_left = compare::refused_manager_node(
            &sc.step,
            sc.observed.ret,
            sr.observed.ret,
            &sc.snapshot,
            &sr.snapshot,
        )
        .then(|| compare::rule("failed-set-manager"));
        let diverging = rules
            .iter()
            .flatten()
            .find(|r| r.diverges)
            .copied()
            .or(node_left);
        let diverged = diverging.is_some();
        if let (Some(rule), true) = (node_left, kept.is_empty()) {
            any = true;
            *by_rule.entry(rule.name).or_default() += 1;
            println!(
                "{name}: real C and real Rust differ at step {i} `{}` [{}]: the refused call left its node in Rust only",
                sc.step, rule.name
            );
        }
        for (d, rule) in kept.iter().zip(rules) {
            any = true;
            let rule = rule.or(diverging);
            new |= rule.is_none();
            let by = rule.map_or("NEW", |r| r.name);
            *by_rule.entry(by).or_default() += 1;
            println!(
                "{name}: real C and real Rust differ at step {i} `{}` [{by}]: {}",
                sc.step,
                describe(d)
            );
        }
        if diverged {
            println!("{name}: the drivers' states diverge from step {i} on: not compared further");
            break;
        }
    }
    if !any {
        println!("{name}: real C and real Rust: the same");
    }
    new
}

/// Where the executor's records are saved to, or read back from instead of
/// booting.
#[derive(Debug, Default)]
pub struct Raw {
    /// Write each driver's records to `DIR/<driver>.raw`.
    pub save: Option<PathBuf>,
    /// Read them from `DIR/<driver>.raw` instead of booting.
    pub load: Option<PathBuf>,
}

fn raw_file(dir: &Path, driver: Driver) -> PathBuf {
    dir.join(match driver {
        Driver::C => "c.raw",
        Driver::Rust => "rust.raw",
    })
}

/// Writes every trace's records: a line `=== <name>`, then its records.
fn save_raw(dir: &Path, driver: Driver, r: &Replay) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = String::new();
    for t in &r.traces {
        text.push_str(&format!("=== {}\n", t.name));
        for l in &t.raw {
            text.push_str(l);
            text.push('\n');
        }
    }
    let path = raw_file(dir, driver);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The runs `save_raw` wrote, parsed again, for `programs` in order.
fn load_raw(dir: &Path, driver: Driver, programs: &[(String, Program)]) -> Result<Replay, String> {
    let path = raw_file(dir, driver);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut saved: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("=== ") {
            current = Some(name);
            saved.entry(name).or_default();
        } else if let Some(name) = current {
            saved.entry(name).or_default().push(line.to_string());
        }
    }
    let mut traces = Vec::new();
    for (name, program) in programs {
        let raw = saved
            .get(name.as_str())
            .ok_or_else(|| format!("{}: no records of {name}", path.display()))?;
        traces.push(
            binder_vm::replay::reparse(driver, name, program, raw)
                .map_err(|e| format!("{name}: {e}"))?,
        );
    }
    Ok(Replay {
        traces,
        boots: Vec::new(),
    })
}

/// One driver's runs: replayed (and saved, if asked) or read back.
fn runs_of(
    driver: Driver,
    kernel: impl FnOnce() -> Result<Kernel, String>,
    programs: &[(String, Program)],
    raw: &Raw,
) -> Result<Replay, String> {
    if let Some(dir) = &raw.load {
        return load_raw(dir, driver, programs);
    }
    let r = replay(&kernel()?, programs)?;
    if let Some(dir) = &raw.save {
        save_raw(dir, driver, &r)?;
    }
    Ok(r)
}

/// Replays every program under `paths` on the real drivers `which`
/// (`mainline`: a program naming a historical version runs on mainline).
pub fn run(
    paths: &[PathBuf],
    which: Which,
    mainline: bool,
    sequential: bool,
    raw: Raw,
) -> Result<ExitCode, String> {
    let root = workspace();
    let (programs, skipped) = load(paths, mainline, sequential)?;
    for (name, why) in &skipped {
        println!("{name}: skipped: {why}");
    }
    if programs.is_empty() {
        return Err("no program to replay".into());
    }
    let mut disagree = [0usize; 2];
    let mut warned = [0usize; 2];
    let mut new_differences = 0;
    let mut by_rule: BTreeMap<&'static str, usize> = BTreeMap::new();
    let c_runs = match which {
        Which::C | Which::Both => Some(runs_of(Driver::C, || c_kernel(&root), &programs, &raw)?),
        Which::Rust => None,
    };
    let rust_runs = match which {
        Which::Rust | Which::Both => Some(runs_of(
            Driver::Rust,
            || rust_kernel(&root),
            &programs,
            &raw,
        )?),
        Which::C => None,
    };
    let mut differing_programs = 0;
    let mut console = 0;
    for (which, runs) in [("C", &c_runs), ("Rust", &rust_runs)] {
        if let Some(r) = runs {
            console += console_warnings(which, r);
        }
    }
    for (i, (name, _)) in programs.iter().enumerate() {
        if let Some(r) = &c_runs {
            disagree[0] += usize::from(!print("C", name, &against_model(&r.traces[i], Driver::C)));
            warned[0] += usize::from(print_warnings("C", name, &r.traces[i]));
        }
        if let Some(r) = &rust_runs {
            disagree[1] += usize::from(!print(
                "Rust",
                name,
                &against_model(&r.traces[i], Driver::Rust),
            ));
            warned[1] += usize::from(print_warnings("Rust", name, &r.traces[i]));
        }
        if let (Some(c), Some(r)) = (&c_runs, &rust_runs) {
            let before: usize = by_rule.values().sum();
            new_differences += usize::from(print_drivers(
                name,
                &c.traces[i],
                &r.traces[i],
                &[],
                &mut by_rule,
            ));
            differing_programs += usize::from(by_rule.values().sum::<usize>() > before);
        }
    }
    let agree = disagree == [0, 0];
    println!(
        "real-kernel: {} program(s) replayed, {} skipped; every model {}",
        programs.len(),
        skipped.len(),
        if agree {
            "agrees with its real driver"
        } else {
            "does NOT agree with its real driver"
        }
    );
    for (driver, runs, n, w) in [
        ("C", &c_runs, disagree[0], warned[0]),
        ("Rust", &rust_runs, disagree[1], warned[1]),
    ] {
        if let Some(r) = runs {
            println!(
                "real-kernel: {driver}: {n} program(s) where the model and the real driver differ"
            );
            println!(
                "real-kernel: {driver}: {w} program(s) with a kernel warning (KASAN, lockdep, WARN, BUG){}",
                if w == 0 { "" } else { ": listed above as KERNEL WARNING" }
            );
            if !r.boots.is_empty() {
                println!("{}", figures(driver, r));
            }
        }
    }
    if which == Which::Both {
        println!(
            "real-kernel: the real C and Rust drivers differ in {differing_programs} program(s); differences by rule:"
        );
        for (rule, n) in &by_rule {
            println!("real-kernel:     {rule}: {n}");
        }
        println!(
            "real-kernel: {new_differences} program(s) where the real C and Rust drivers differ in a way no rule names{}",
            if new_differences == 0 { "" } else { " (listed above as NEW)" }
        );
    }
    if console > 0 {
        println!(
            "real-kernel: {console} kernel warning(s) on the consoles outside any trace's log"
        );
    }
    Ok(
        if agree && new_differences == 0 && warned == [0, 0] && console == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

/// Replays every program under `paths` that fails an allocation (a step
/// with `fail-ref`, `fail-grow` or `fail-shrink`) on the real drivers
/// `which`, `up_to` times: the failing step's ioctl runs with its 1st,
/// 2nd, ... `up_to`th allocation failed (`fail-nth`; kernels with fault
/// injection, such as `ci/kernel/debug.config`'s). Each run is compared
/// with the model that fails the step's first allocation at the planned
/// site, which maps the model's site to the real driver's allocation: the
/// `n` whose run agrees. With both drivers, the real C and Rust runs at
/// their matching `n` are compared as `run` compares them. Exit 1 when a
/// program matches no `n` on a driver, when the drivers differ in a way no
/// rule names, or when a kernel warned.
pub fn fail_sweep(
    paths: &[PathBuf],
    which: Which,
    mainline: bool,
    up_to: u32,
) -> Result<ExitCode, String> {
    if up_to == 0 {
        return Err("--fail-sweep needs a count of at least 1".into());
    }
    let root = workspace();
    let (loaded, mut skipped) = load_failing(paths, mainline, false, true)?;
    let mut programs: Vec<Failing> = Vec::new();
    for (name, program, fail) in loaded {
        match fail.iter().filter(|f| f.is_some()).count() {
            0 => skipped.push((name, "fails no allocation".into())),
            1 => programs.push((name, program, fail)),
            _ => skipped.push((name, "fails allocations at more than one step".into())),
        }
    }
    for (name, why) in &skipped {
        println!("{name}: skipped: {why}");
    }
    if programs.is_empty() {
        return Err("no program with a failing allocation to replay".into());
    }
    // Every program once per n, each variant named by its program and n.
    let variant = |name: &str, n: u32| format!("{name} fail-nth {n}");
    let mut variants = Vec::new();
    let mut fail_nth = BTreeMap::new();
    for (name, program, fail) in &programs {
        let step = fail
            .iter()
            .position(Option::is_some)
            .expect("one failing step");
        for n in 1..=up_to {
            variants.push((variant(name, n), program.clone()));
            fail_nth.insert(variant(name, n), vec![FailNth { step, nth: n }]);
        }
    }
    let mut runs: Vec<(Driver, Replay)> = Vec::new();
    if which != Which::Rust {
        if std::env::var_os("C_KERNEL_IMAGE").is_none() {
            return Err("--fail-sweep on the C driver needs a kernel with fault injection, and Debian's has none: build one with `ci/kernel-rust.sh --fragment ci/kernel/c-binder.config --fragment ci/kernel/debug.config` and set C_KERNEL_IMAGE to the path it prints".into());
        }
        runs.push((
            Driver::C,
            replay_failing(&c_kernel(&root)?, &variants, fail_nth.clone())?,
        ));
    }
    if which != Which::C {
        runs.push((
            Driver::Rust,
            replay_failing(&rust_kernel(&root)?, &variants, fail_nth)?,
        ));
    }
    let mut unmatched = 0;
    let mut warned: usize = runs
        .iter()
        .map(|(driver, r)| console_warnings(driver_name(*driver), r))
        .sum();
    let mut new_differences = 0;
    let mut by_rule: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (k, (name, program, fail)) in programs.iter().enumerate() {
        let step = fail
            .iter()
            .position(Option::is_some)
            .expect("one failing step");
        let site = fail[step].expect("the failing step");
        println!(
            "{name}: step {step} `{}` fails its first {} allocation in the model",
            program.steps[step],
            site_name(site)
        );
        let mut matched: Vec<Option<&TraceRun>> = Vec::new();
        for (driver, replay) in &runs {
            let which = driver_name(*driver);
            let mut agreeing = Vec::new();
            let mut first_match = None;
            let mut injected_any = false;
            let mut all_agree = true;
            let mut all_ran = true;
            let model_fails = replay
                .traces
                .get(k * up_to as usize)
                .is_some_and(|t| model_fails(t, *driver, fail));
            for n in 1..=up_to {
                let t = &replay.traces[k * up_to as usize + n as usize - 1];
                let fault = t.steps.get(step).and_then(|s| s.fault);
                let injected = match fault {
                    Some(f) if f.injected => "injected",
                    Some(_) => "not injected (fewer allocations)",
                    None => "not run",
                };
                let mismatches = against_failing_model(t, *driver, fail);
                let verdict = if mismatches.is_empty() {
                    "agrees with the model".to_string()
                } else {
                    format!("{} difference(s) from the model", mismatches.len())
                };
                println!("{name}: {which}: fail-nth {n}: {injected}; {verdict}");
                warned += usize::from(print_warnings(which, &t.name, t));
                let injected = fault.is_some_and(|f| f.injected);
                injected_any |= injected;
                all_ran &= fault.is_some();
                all_agree &= mismatches.is_empty();
                if mismatches.is_empty() && injected {
                    agreeing.push(n);
                    first_match.get_or_insert(t);
                }
            }
            let site = site_name(site);
            if !agreeing.is_empty() {
                println!(
                    "{name}: {which}: the model's {site} failure is allocation {} of the real driver's ioctl{}",
                    show_ns(&agreeing),
                    if agreeing.len() > 1 {
                        " (what userspace sees does not tell these allocations apart)"
                    } else {
                        ""
                    }
                );
            } else if !injected_any && all_agree && all_ran {
                println!(
                    "{name}: {which}: nothing to map: the real ioctl makes no allocation, and every run agrees with the model{}",
                    if model_fails {
                        ", whose failure at its site changes nothing userspace sees (a map of one word is stored inline: nothing to allocate)"
                    } else {
                        ", which fails no allocation here either"
                    }
                );
            } else {
                unmatched += 1;
                println!(
                    "{name}: {which}: no fail-nth from 1 to {up_to} agrees with the model{}",
                    if model_fails {
                        ""
                    } else {
                        " (the model fails no allocation here)"
                    }
                );
            }
            matched.push(first_match);
        }
        if let [Some(c), Some(rust)] = matched[..] {
            new_differences += usize::from(print_drivers(name, c, rust, fail, &mut by_rule));
        }
    }
    println!(
        "real-kernel: {} program(s) with a failing allocation, {} skipped; {unmatched} program-driver pair(s) where no fail-nth agrees with the model; {warned} run(s) with a kernel warning",
        programs.len(),
        skipped.len()
    );
    if runs.len() == 2 {
        for (rule, n) in &by_rule {
            println!("real-kernel:     {rule}: {n}");
        }
        println!(
            "real-kernel: {new_differences} program(s) where the real C and Rust drivers differ in a way no rule names"
        );
    }
    Ok(if unmatched == 0 && warned == 0 && new_differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Allocation numbers, runs of them as ranges: `1-3, 5`.
fn show_ns(ns: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &n in ns {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A site as traces name it.
fn site_name(site: AllocSite) -> &'static str {
    match site {
        AllocSite::Ref => "fail-ref",
        AllocSite::Grow => "fail-grow",
        AllocSite::Shrink => "fail-shrink",
    }
}

fn driver_name(driver: Driver) -> &'static str {
    match driver {
        Driver::C => "C",
        Driver::Rust => "Rust",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_numbers_show_as_ranges() {
        assert_eq!(show_ns(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
        assert_eq!(show_ns(&[4]), "4");
    }

    #[test]
    fn kernel_warnings_are_kasan_lockdep_and_warn_lines_only() {
        let line = |raw: &str| klog::classify(raw, Driver::C);
        let step = [
            line("<3>[   12.000000] binder_linux: 100:100 got transaction to invalid handle, 7"),
            line("<3>[   12.100000] BUG: KASAN: slab-use-after-free in binder_free_buf+0x1c/0x90"),
            line("<4>[   12.200000] Call Trace:"),
        ];
        let close = [line(
            "<4>[   13.000000] WARNING: possible circular locking dependency detected",
        )];
        let found = warnings_in([
            ("at step 2 `p0 free`".to_string(), &step[..]),
            ("at the close".to_string(), &close[..]),
        ]);
        assert_eq!(
            found,
            [
                "at step 2 `p0 free`: BUG: KASAN: slab-use-after-free in binder_free_buf+0x1c/0x90",
                "at the close: WARNING: possible circular locking dependency detected",
            ]
        );
        // The driver's own lines, and a trace without warnings: none.
        assert!(warnings_in([("at the open".to_string(), &step[..1])]).is_empty());
    }
    use idpool::driver::{NodeName, ProcState, RefState};

    #[test]
    fn a_rust_line_whose_c_limit_had_used_its_burst_is_log_lines_and_only_that() {
        // Rust's lines are not rate-limited (finding 0003); C's
        // binder_txn_error lines go through binder_debug's limit
        // (binder.c:142-157), its invalid-handle line through
        // binder_user_error's (160-171), binder_ioctl's through none (6000).
        let d = Diff::Log {
            c: vec![],
            rust: vec![
                Log::TransactionFailed,
                Log::TransactionToInvalidHandle(4),
                Log::IoctlFailed(idpool::driver::Errno::Inval),
            ],
        };
        let (rest, dropped) = rate_limited(&d, &[Limit::Debug]).expect("one dropped");
        assert_eq!(dropped, [Log::TransactionFailed]);
        assert_eq!(
            rest,
            Diff::Log {
                c: vec![],
                rust: vec![
                    Log::TransactionToInvalidHandle(4),
                    Log::IoctlFailed(idpool::driver::Errno::Inval)
                ]
            },
            "what binder_debug's limit does not explain is still compared"
        );
        assert_eq!(rate_limited(&d, &[]), None, "no limit had used its burst");
        let c_only = Diff::Log {
            c: vec![Log::TransactionFailed],
            rust: vec![],
        };
        assert_eq!(
            rate_limited(&c_only, &[Limit::Debug, Limit::UserError]),
            None,
            "a line C printed is never explained by its rate limit"
        );
    }

    #[test]
    fn the_real_drivers_refs_are_compared_without_death_notifications() {
        // Process::debug_print prints a ref's handle, node and counts only
        // (process.rs:642-656): the real Rust driver's refs never show one.
        let r = |death| RefState {
            node: NodeName {
                owner: Pid(0),
                ptr: 1,
                serial: 0,
            },
            strong: 1,
            weak: 0,
            death,
        };
        let snap = |death| Snapshot {
            procs: vec![ProcState {
                alive: true,
                refs: [(1, r(death))].into(),
                nodes: Default::default(),
                buffers: 0,
                frozen: false,
            }],
        };
        assert_eq!(without_deaths(&snap(Some(7))), snap(None));
        assert_eq!(
            compare::states(&without_deaths(&snap(Some(7))), &snap(None)),
            [],
            "C's death notification is not a difference"
        );
        let mut other = snap(None);
        other.procs[0].refs.get_mut(&1).unwrap().strong = 2;
        let diffs = compare::states(&without_deaths(&snap(Some(7))), &other);
        assert_eq!(diffs.len(), 1, "the counts still are: {diffs:?}");
        let line = describe(&diffs[0]);
        assert!(
            line.contains("handle 1: C p0:1 s1 w0, Rust p0:1 s2 w0") && line.len() < 120,
            "one short line: {line}"
        );
    }
}
