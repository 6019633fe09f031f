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

use binder_vm::compare::{against_model, real_against_real, Mismatch};
use binder_vm::replay::{replay_with, Kernel, Options, TraceRun};
use binder_vm::Driver;
use idpool::driver::Program;
use idpool_harness::targets::binder_commands::{compare, CmdProgram};
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
    let executor = Kernel::static_executor(root);
    if !executor.is_file() {
        return Err(format!(
            "{} is missing: run ci/kernel-vm.sh --prepare",
            executor.display()
        ));
    }
    Ok(Kernel {
        driver: Driver::Rust,
        image,
        module: None,
        executor,
    })
}

/// The programs under `paths`: trace files (`*.trace`), or raw inputs of
/// the `binder_commands` target, each named by its path; those that cannot
/// run on a real kernel are returned apart with the reason.
type Loaded = (Vec<(String, Program)>, Vec<(String, String)>);

fn load(paths: &[PathBuf], mainline: bool, sequential: bool) -> Result<Loaded, String> {
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
        } else if program.planned() {
            skipped.push((name, "has a window or a failing allocation".into()));
        } else if program.program.steps.is_empty() {
            skipped.push((name, "has no step".into()));
        } else {
            ok.push((name, program.program));
        }
    }
    Ok((ok, skipped))
}

fn replay(kernel: &Kernel, programs: &[(String, Program)]) -> Result<Vec<TraceRun>, String> {
    let opts = Options {
        verbose: true,
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
    Ok(result.traces)
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

/// The real drivers against each other, each difference named by the rule
/// of `binder_commands` that explains it, or new; after a difference whose
/// rule makes the drivers' states diverge, the rest of the trace is not
/// compared (as the target does). Whether a new difference was seen.
fn print_drivers(name: &str, c: &TraceRun, rust: &TraceRun) -> bool {
    if real_against_real(c, rust).is_empty() {
        println!("{name}: real C and real Rust: the same");
        return false;
    }
    let mut new = false;
    for (i, (sc, sr)) in c.steps.iter().zip(&rust.steps).enumerate() {
        let mut diffs: Vec<compare::Diff> = compare::ret(&sc.observed, &sr.observed)
            .into_iter()
            .collect();
        diffs.extend(compare::reads_and_logs([&sc.observed], [&sr.observed]));
        diffs.extend(compare::states(&sc.snapshot, &sr.snapshot));
        let mut diverged = false;
        for d in diffs {
            let rule = compare::explain(&sc.step, Default::default(), &d);
            new |= rule.is_none();
            diverged |= rule.is_some_and(|r| r.diverges);
            let by = rule.map_or("NEW", |r| r.name);
            println!(
                "{name}: real C and real Rust differ at step {i} `{}` [{by}]: {d:?}",
                sc.step
            );
        }
        if diverged {
            println!("{name}: the drivers' states diverge from step {i} on: not compared further");
            break;
        }
    }
    new
}

/// Replays every program under `paths` on the real drivers `which`
/// (`mainline`: a program naming a historical version runs on mainline).
pub fn run(
    paths: &[PathBuf],
    which: Which,
    mainline: bool,
    sequential: bool,
) -> Result<ExitCode, String> {
    let root = workspace();
    let (programs, skipped) = load(paths, mainline, sequential)?;
    for (name, why) in &skipped {
        println!("{name}: skipped: {why}");
    }
    if programs.is_empty() {
        return Err("no program to replay".into());
    }
    let mut agree = true;
    let mut new_differences = 0;
    let c_runs = match which {
        Which::C | Which::Both => {
            let kernel = Kernel::c_from_cache(&root).map_err(|e| e.to_string())?;
            Some(replay(&kernel, &programs)?)
        }
        Which::Rust => None,
    };
    let rust_runs = match which {
        Which::Rust | Which::Both => Some(replay(&rust_kernel(&root)?, &programs)?),
        Which::C => None,
    };
    for (i, (name, _)) in programs.iter().enumerate() {
        if let Some(runs) = &c_runs {
            agree &= print("C", name, &against_model(&runs[i], Driver::C));
        }
        if let Some(runs) = &rust_runs {
            agree &= print("Rust", name, &against_model(&runs[i], Driver::Rust));
        }
        if let (Some(c), Some(r)) = (&c_runs, &rust_runs) {
            new_differences += usize::from(print_drivers(name, &c[i], &r[i]));
        }
    }
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
    if which == Which::Both {
        println!(
            "real-kernel: {new_differences} program(s) where the real C and Rust drivers differ in a way no rule names{}",
            if new_differences == 0 { "" } else { " (listed above as NEW)" }
        );
    }
    Ok(if agree && new_differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
