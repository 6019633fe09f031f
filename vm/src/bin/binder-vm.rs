//! Replays command-level traces on a real kernel and prints what each step
//! observed. `ci/kernel-vm.sh` fetches the kernel and builds the executor,
//! then runs this; see `binder-vm --help`.

use binder_vm::replay::{replay_with, Kernel, Options, Replay, StepRun, TraceRun};
use binder_vm::{klog::Class, program, Driver};
use idpool::driver::{ExtendedError, Program, Snapshot};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const HELP: &str = "\
binder-vm: replay command-level traces on a real Binder driver in QEMU

usage: binder-vm --kernel IMAGE --executor BINDER_EXEC [--module KO] [options] TRACE|DIR...

  --driver c|rust       which driver the kernel has (default c; c needs --module)
  --kernel IMAGE        the kernel image (vmlinuz, bzImage)
  --module KO           binder_linux.ko (C driver)
  --executor PATH       the statically linked binder-exec
  --per-boot N          at most N traces a boot (default 200; the C module
                        takes at most 226 device names)
  --no-pace             do not wait out the C driver's log rate limit
  --icount SHIFT        QEMU's -icount shift=SHIFT,sleep=off (default 3): virtual
                        time, so the pacing's waits cost no host time
  --no-icount           real time (pacing then waits 5 s per window)
  --qemu PATH           the QEMU binary (default qemu-system-x86_64)
  --timeout SECS        give up on a boot after SECS (default 60 + 2 a step)
  --work DIR            keep the initramfs and serial output in DIR
  --json FILE           write every trace's executor lines to FILE
  --raw                 also print each step's raw log lines and debug text
  -q, --quiet           no progress on stderr

A DIR is replayed as its *.trace files in name order, all in one boot (up
to --per-boot). Exit status: 0 when every trace ran to its end, 1 when one
did not, 2 on a usage or setup error.";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("binder-vm: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let Some(args) = parse_args(std::env::args().skip(1))? else {
        println!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    };
    let traces = load(&args.inputs)?;
    let steps: usize = traces.iter().map(|(_, p)| p.steps.len()).sum();
    let result = replay_with(&args.kernel, &traces, &args.opts).map_err(|e| e.to_string())?;
    let mut complete = true;
    for run in &result.traces {
        print_run(run, args.raw);
        complete &= run.error.is_none() && run.steps.len() == run.program.steps.len();
    }
    if let Some(path) = &args.json {
        write_json(path, &result.traces)?;
    }
    print_summary(&result, steps);
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What the command line asks for.
struct Args {
    kernel: Kernel,
    opts: Options,
    /// `--json`.
    json: Option<PathBuf>,
    /// `--raw`.
    raw: bool,
    /// The traces and directories, in order.
    inputs: Vec<PathBuf>,
}

/// The command line, or `None` for `--help`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut driver = Driver::C;
    let (mut image, mut module, mut executor) = (None, None, None);
    let mut opts = Options {
        verbose: true,
        ..Options::default()
    };
    let mut json = None;
    let mut raw = false;
    let mut inputs = Vec::new();
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--driver" => {
                driver = match value("--driver")?.as_str() {
                    "c" => Driver::C,
                    "rust" => Driver::Rust,
                    d => return Err(format!("unknown driver {d:?} (c or rust)")),
                }
            }
            "--kernel" => image = Some(PathBuf::from(value("--kernel")?)),
            "--module" => module = Some(PathBuf::from(value("--module")?)),
            "--executor" => executor = Some(PathBuf::from(value("--executor")?)),
            "--per-boot" => {
                opts.traces_per_boot = value("--per-boot")?
                    .parse()
                    .map_err(|_| "--per-boot needs a number")?
            }
            "--no-pace" => opts.pace.enabled = false,
            "--icount" => {
                opts.icount_shift = Some(
                    value("--icount")?
                        .parse()
                        .map_err(|_| "--icount needs a number")?,
                )
            }
            "--no-icount" => opts.icount_shift = None,
            "--qemu" => opts.qemu = PathBuf::from(value("--qemu")?),
            "--timeout" => {
                let secs: f64 = value("--timeout")?
                    .parse()
                    .map_err(|_| "--timeout needs a number of seconds")?;
                opts.timeout_base = Duration::from_secs_f64(secs);
                opts.timeout_per_step = Duration::ZERO;
            }
            "--work" => opts.work_dir = Some(PathBuf::from(value("--work")?)),
            "--json" => json = Some(PathBuf::from(value("--json")?)),
            "--raw" => raw = true,
            "-q" | "--quiet" => opts.verbose = false,
            s if s.starts_with('-') => return Err(format!("unknown option {s} (see --help)")),
            s => inputs.push(PathBuf::from(s)),
        }
    }
    let kernel = Kernel {
        driver,
        image: image.ok_or("--kernel is required (see --help)")?,
        module,
        executor: executor.ok_or("--executor is required (see --help)")?,
    };
    if inputs.is_empty() {
        return Err("no trace given (see --help)".into());
    }
    Ok(Some(Args {
        kernel,
        opts,
        json,
        raw,
        inputs,
    }))
}

/// `--json`: every trace's executor lines, in order.
fn write_json(path: &Path, traces: &[TraceRun]) -> Result<(), String> {
    let mut text = String::new();
    for run in traces {
        for l in &run.raw {
            text.push_str(l);
            text.push('\n');
        }
    }
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}

/// The closing line: the traces, the boots and where the time went.
fn print_summary(result: &Replay, steps: usize) {
    let wall: Duration = result.boots.iter().map(|b| b.wall).sum();
    let in_vm: u64 = result
        .boots
        .iter()
        .map(|b| b.done_ms - b.executor_start_ms)
        .sum();
    let paced: u64 = result.boots.iter().map(|b| b.paced_ms).sum();
    println!(
        "\n{} traces ({steps} steps) in {} boot(s): {:.1} s from QEMU's start to its exit; \
         kernel boot to executor {:.2} s; traces {:.2} s in the VM ({:.3} s a trace, {:.1} ms a step), \
         of which {:.2} s waiting out the log rate limit; kernel {}",
        result.traces.len(),
        result.boots.len(),
        wall.as_secs_f64(),
        result.boots.iter().map(|b| b.executor_start_ms).sum::<u64>() as f64 / 1000.0,
        in_vm as f64 / 1000.0,
        in_vm as f64 / 1000.0 / result.traces.len().max(1) as f64,
        in_vm as f64 / steps.max(1) as f64,
        paced as f64 / 1000.0,
        result.boots.first().map_or("?", |b| b.kernel.as_str()),
    );
}

fn load(inputs: &[PathBuf]) -> Result<Vec<(String, Program)>, String> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(input)
                .map_err(|e| format!("read {}: {e}", input.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "trace"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                return Err(format!("{} holds no *.trace file", input.display()));
            }
            files.extend(in_dir);
        } else if input.is_file() {
            files.push(input.clone());
        } else {
            return Err(format!("{} does not exist", input.display()));
        }
    }
    files
        .iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(f).map_err(|e| format!("read {}: {e}", f.display()))?;
            let p = program::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?;
            let name = f.file_name().map_or_else(
                || f.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            Ok((name, p))
        })
        .collect()
}

/// One line per process that holds anything.
pub fn format_snapshot(s: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (k, p) in s.procs.iter().enumerate() {
        if !p.alive {
            out.push(format!("p{k}: exited"));
            continue;
        }
        let mut parts = Vec::new();
        for (ptr, n) in &p.nodes {
            let serial = if n.serial > 0 {
                format!("#{}", n.serial)
            } else {
                String::new()
            };
            parts.push(format!(
                "node {ptr}{serial} (strong {} weak {}{}{})",
                n.strong,
                n.weak,
                if n.has_strong { " hs" } else { "" },
                if n.has_weak { " hw" } else { "" }
            ));
        }
        for (h, r) in &p.refs {
            parts.push(format!(
                "handle {h} -> {} (s {} w {}{})",
                r.node,
                r.strong,
                r.weak,
                r.death.map_or(String::new(), |c| format!(" death {c}"))
            ));
        }
        if p.buffers > 0 {
            parts.push(format!("{} buffer(s)", p.buffers));
        }
        if !parts.is_empty() {
            out.push(format!("p{k}: {}", parts.join(", ")));
        }
    }
    out
}

/// A step's line: the command, what it returned, its extended error (when
/// it says more than `BR_OK`; with `raw`, always, and `no ee` when none was
/// read), what each process read, the log and an exit's release.
fn step_line(s: &StepRun, raw: bool) -> String {
    let o = &s.observed;
    let mut line = format!(
        "  {:<28} ret {}",
        s.step.to_string(),
        o.ret.map_or("?".into(), |r| r.to_string())
    );
    match o.ee {
        Some(ee) if raw || ee != ExtendedError::NONE => line.push_str(&format!(" | {ee}")),
        None if raw => line.push_str(" | no ee"),
        _ => {}
    }
    for (k, reads) in o.reads.iter().enumerate() {
        if !reads.is_empty() {
            let r: Vec<String> = reads.iter().map(|b| b.to_string()).collect();
            line.push_str(&format!(" | p{k} read: {}", r.join(", ")));
        }
    }
    if !o.log.is_empty() {
        let l: Vec<String> = o.log.iter().map(|l| l.to_string()).collect();
        line.push_str(&format!(" | log: {}", l.join(", ")));
    }
    if let Some(r) = &s.release {
        line.push_str(&format!(
            " | release {} after {} us{}",
            r.signal,
            r.us,
            if r.done { "" } else { " (TIMED OUT)" }
        ));
    }
    line
}

fn print_run(run: &TraceRun, raw: bool) {
    println!(
        "\n== {} ({} procs, pids {:?}, {} ms in the VM{})",
        run.name,
        run.program.procs(),
        run.pids,
        run.ms,
        if run.log_may_be_incomplete {
            "; the C driver's rate limits may have dropped log lines"
        } else {
            ""
        }
    );
    let mut last_state: Vec<String> = Vec::new();
    for s in &run.steps {
        let line = step_line(s, raw);
        println!("{line}");
        let state = format_snapshot(&s.snapshot);
        if state != last_state {
            for l in &state {
                println!("      {l}");
            }
            last_state = state;
        }
        for n in &s.notes {
            println!("      note: {n}");
        }
        if raw {
            for l in &s.log {
                let tag = match &l.class {
                    Class::Log(x) => x.to_string(),
                    Class::Known(k) => (*k).to_string(),
                    Class::Suppressed { .. } => "suppressed".into(),
                    Class::Splat => "splat".into(),
                    Class::Foreign => "foreign".into(),
                    Class::Unclassified => "UNCLASSIFIED".into(),
                };
                println!("      log [{tag}] {}", l.raw);
            }
        }
    }
    for l in &run.flush_log {
        println!("      rate-limit flush: {}", l.raw);
    }
    for l in run.end_log.iter().chain(&run.begin_log) {
        if !matches!(l.class, Class::Known("ioctl-failed") | Class::Foreign) {
            println!("      begin/end log: {}", l.raw);
        }
    }
    if let Some(e) = &run.error {
        println!("  ERROR: {e}");
    }
}
