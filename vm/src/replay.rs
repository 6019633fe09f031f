//! Traces in, observations out: packs the executor, the module and the
//! traces into an initramfs, boots the kernel (as many boots as the traces
//! need, [`Options::traces_per_boot`] a boot), and turns the executor's
//! JSON lines into `idpool::driver`'s [`Observed`] and [`Snapshot`] per step.

use crate::debugfs::{self, ProcText, RefLine};
use crate::driver::Driver;
use crate::initramfs::Initramfs;
use crate::klog::{self, Class, Limit, LogLine};
use crate::program;
use crate::qemu::{self, Boot, BootError};
use crate::wire::{
    Config, FailNth, Fault, Pace, Record, Release, TraceFile, WireBr, WireProc, WireRet,
};
use crate::{abi, exec};
use idpool::driver::{
    Br, Command, Errno, ExtendedError, NodeName, NodeState, Observed, Pid, ProcState, Program,
    Read, Received, RefState, Ret, Snapshot, Step, Tid,
};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A kernel to replay on, and the executor built for it.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// Its driver.
    pub driver: Driver,
    /// The kernel image (`vmlinuz`, `bzImage`).
    pub image: PathBuf,
    /// The C driver's module (`binder_linux.ko`, or `.ko.xz` for a kernel
    /// that decompresses modules itself); `None` for a built-in driver.
    pub module: Option<PathBuf>,
    /// The statically linked `binder-exec`.
    pub executor: PathBuf,
}

impl Kernel {
    /// The C driver's kernel where `ci/kernel-vm.sh` leaves it: the image
    /// and module in `$KERNEL_CACHE/vm/$MAINLINE_ABI/` (`KERNEL_CACHE`
    /// defaults to `$XDG_CACHE_HOME/binder-idpool` or
    /// `~/.cache/binder-idpool`, `MAINLINE_ABI` to `7.3.4+deb13`, as in
    /// `ci/lib.sh`), the executor in `workspace/target/vm-static/`.
    pub fn c_from_cache(workspace: &std::path::Path) -> Result<Kernel> {
        let cache = match std::env::var_os("KERNEL_CACHE") {
            Some(c) => PathBuf::from(c),
            None => std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .ok_or_else(|| Error::Input("neither KERNEL_CACHE nor HOME is set".into()))?
                .join("binder-idpool"),
        };
        let abi = std::env::var("MAINLINE_ABI").unwrap_or_else(|_| "7.3.4+deb13".into());
        let dir = cache.join("vm").join(abi);
        let kernel = Kernel {
            driver: Driver::C,
            image: dir.join("vmlinuz"),
            module: Some(dir.join("binder_linux.ko")),
            executor: Kernel::static_executor(workspace),
        };
        for p in [
            &kernel.image,
            kernel.module.as_ref().expect("set above"),
            &kernel.executor,
        ] {
            if !p.is_file() {
                return Err(Error::Input(format!(
                    "{} is missing: run ci/kernel-vm.sh --prepare first",
                    p.display()
                )));
            }
        }
        Ok(kernel)
    }

    /// Where `ci/kernel-vm.sh` builds the static executor.
    pub fn static_executor(workspace: &std::path::Path) -> PathBuf {
        workspace.join("target/vm-static/x86_64-unknown-linux-gnu/release/binder-exec")
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct Options {
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// Guest memory in MiB.
    pub memory_mb: u32,
    /// At most this many traces (devices) a boot.
    pub traces_per_boot: usize,
    /// The boot's timeout: `base + per_step × steps`.
    pub timeout_base: Duration,
    /// See [`Options::timeout_base`].
    pub timeout_per_step: Duration,
    /// Pacing against the C driver's log rate limit.
    pub pace: Pace,
    /// `-icount shift=N,sleep=off` (see [`Boot::icount_shift`]); on by
    /// default: the executor's waits for the C driver's log rate limit then
    /// cost no host time (a batch of 226 traces: 20-25 s instead of about 6
    /// minutes). Shift 3 (8 ns an instruction): shift 0 made the boot
    /// itself twice as slow (the kernel's timed busy waits take 8 times the
    /// instructions), 5 and more slow the traces.
    pub icount_shift: Option<u32>,
    /// Extra kernel command-line words.
    pub append: String,
    /// Where the initramfs and serial files go (a fresh temporary
    /// directory when `None`); kept after the run.
    pub work_dir: Option<PathBuf>,
    /// Progress on stderr.
    pub verbose: bool,
    /// The faults to inject, by trace name: each step's `fail-nth`.
    pub fail_nth: BTreeMap<String, Vec<FailNth>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            qemu: "qemu-system-x86_64".into(),
            memory_mb: 512,
            traces_per_boot: 200,
            timeout_base: Duration::from_secs(60),
            timeout_per_step: Duration::from_secs(2),
            pace: Pace::default(),
            icount_shift: Some(3),
            append: String::new(),
            work_dir: None,
            verbose: false,
            fail_nth: BTreeMap::new(),
        }
    }
}

/// One step as the real driver answered it.
#[derive(Clone, Debug)]
pub struct StepRun {
    /// The step.
    pub step: Step,
    /// Its observables (reads and log normalised).
    pub observed: Observed,
    /// Every process's state afterwards.
    pub snapshot: Snapshot,
    /// Every log line of the step, classified.
    pub log: Vec<LogLine>,
    /// Each process's parsed debug text (`None` once it exited).
    pub procs: Vec<Option<ProcText>>,
    /// What each process read, in the order it read it, as the executor
    /// reported it.
    pub reads: Vec<Vec<WireBr>>,
    /// The ioctl result as reported.
    pub ret: WireRet,
    /// For `exit`: the wait for the deferred release.
    pub release: Option<Release>,
    /// Milliseconds waited for the log's rate limit before the step.
    pub paced_ms: u64,
    /// The fault injected into its command, if one was asked for.
    pub fault: Option<Fault>,
    /// Microseconds the step took in the VM.
    pub us: u64,
    /// The C driver's rate limits whose window had printed its whole
    /// burst, and was not over, by the end of the step (the executor
    /// follows them by the timestamps of the lines they printed): any of
    /// their lines the step's command or drains printed after that was
    /// dropped.
    pub full_limits: Vec<Limit>,
    /// What the executor or the conversion found off: unclassified log
    /// lines, unknown errnos or `BR_*`, refs to nodes never seen, ...
    pub notes: Vec<String>,
}

/// One trace as the real driver ran it.
#[derive(Clone, Debug)]
pub struct TraceRun {
    /// Its name (a file name, or its index).
    pub name: String,
    /// The program.
    pub program: Program,
    /// The VM pids of `p0`, `p1`, ...
    pub pids: Vec<i32>,
    /// Its steps, as far as they ran.
    pub steps: Vec<StepRun>,
    /// Log lines printed while the processes opened the device.
    pub begin_log: Vec<LogLine>,
    /// Log lines printed after the last step to make the kernel report
    /// what its rate limits dropped during the steps (the executor's
    /// flush).
    pub flush_log: Vec<LogLine>,
    /// Log lines printed while the remaining processes closed it at the
    /// end.
    pub end_log: Vec<LogLine>,
    /// Whether log lines may have been lost to the C driver's rate limits:
    /// a window printed its whole burst, or the kernel reported lines it
    /// suppressed. (The comparison with the model accounts for each lost
    /// line by the kernel's own counts; see `compare`.)
    pub log_may_be_incomplete: bool,
    /// Milliseconds in the VM.
    pub ms: u64,
    /// Set when the executor gave up on the trace (the steps stop there).
    pub error: Option<String>,
    /// The executor's JSON lines for this trace, as printed.
    pub raw: Vec<String>,
}

/// One boot.
#[derive(Clone, Debug)]
pub struct BootStats {
    /// The kernel's release.
    pub kernel: String,
    /// Traces it ran.
    pub traces: usize,
    /// From QEMU's start to its exit.
    pub wall: Duration,
    /// Kernel uptime when the executor started.
    pub executor_start_ms: u64,
    /// Kernel uptime when the last trace ended.
    pub done_ms: u64,
    /// Milliseconds of pacing.
    pub paced_ms: u64,
    /// The console (first serial port).
    pub console: String,
}

/// Everything a replay produced.
#[derive(Clone, Debug)]
pub struct Replay {
    /// Per trace, in the order given.
    pub traces: Vec<TraceRun>,
    /// Per boot.
    pub boots: Vec<BootStats>,
}

/// Why a replay failed as a whole.
#[derive(Debug)]
pub enum Error {
    /// An input is missing or unusable.
    Input(String),
    /// QEMU could not boot or timed out.
    Boot(BootError),
    /// The executor stopped before the end (a panic, a failed setup): its
    /// error records, the console's tail.
    Executor {
        /// What it said.
        message: String,
        /// The console's last lines.
        console_tail: String,
    },
    /// A line of the executor could not be read.
    Protocol(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Input(e) | Error::Protocol(e) => f.write_str(e),
            Error::Boot(e) => write!(f, "{e}"),
            Error::Executor {
                message,
                console_tail,
            } => write!(f, "{message}\nthe console's last lines:\n{console_tail}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result of a replay.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How many devices one load of the C module can make: its `devices=`
/// parameter is a `charp`, at most 1023 characters, and the names `b0`,
/// `b1`, ... joined by commas fill it at 226.
pub const MAX_C_DEVICES: usize = 226;

/// Replays `traces` on `kernel` with the default [`Options`]; the traces are
/// named by their index.
pub fn replay(kernel: &Kernel, traces: &[Program]) -> Result<Vec<TraceRun>> {
    let named: Vec<(String, Program)> = traces
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("#{i}"), p.clone()))
        .collect();
    Ok(replay_with(kernel, &named, &Options::default())?.traces)
}

/// Replays named traces.
pub fn replay_with(
    kernel: &Kernel,
    traces: &[(String, Program)],
    opts: &Options,
) -> Result<Replay> {
    for (what, p) in [
        ("kernel image", Some(&kernel.image)),
        ("executor", Some(&kernel.executor)),
        ("module", kernel.module.as_ref()),
    ] {
        if let Some(p) = p {
            if !p.is_file() {
                return Err(Error::Input(format!(
                    "the {what} {} does not exist",
                    p.display()
                )));
            }
        }
    }
    for (name, p) in traces {
        p.check()
            .map_err(|e| Error::Input(format!("trace {name}: {e}")))?;
    }
    let dir = match &opts.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("binder-vm-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Input(format!("create {}: {e}", dir.display())))?;
    let mut out = Replay {
        traces: Vec::new(),
        boots: Vec::new(),
    };
    let per_boot = match kernel.driver {
        Driver::C => opts.traces_per_boot.clamp(1, MAX_C_DEVICES),
        Driver::Rust => opts.traces_per_boot.max(1),
    };
    let chunks: Vec<&[(String, Program)]> = traces.chunks(per_boot).collect();
    for (b, chunk) in chunks.iter().enumerate() {
        if opts.verbose && chunks.len() > 1 {
            eprintln!(
                "binder-vm: boot {}/{} ({} traces)",
                b + 1,
                chunks.len(),
                chunk.len()
            );
        }
        let (runs, stats) = boot_once(kernel, chunk, opts, &dir)?;
        out.traces.extend(runs);
        out.boots.push(stats);
    }
    Ok(out)
}

fn boot_once(
    kernel: &Kernel,
    traces: &[(String, Program)],
    opts: &Options,
    dir: &std::path::Path,
) -> Result<(Vec<TraceRun>, BootStats)> {
    let fs = initramfs(kernel, traces, opts)?;
    let initrd = dir.join("initrd.gz");
    fs.write_gzip(&initrd)
        .map_err(|e| Error::Input(format!("write {}: {e}", initrd.display())))?;
    let steps: usize = traces.iter().map(|(_, p)| p.steps.len() + p.procs()).sum();
    let boot = Boot {
        qemu: opts.qemu.clone(),
        kernel: kernel.image.clone(),
        initrd,
        append: format!(
            "console=ttyS0 quiet panic=-1 printk.devkmsg=on {}",
            opts.append
        )
        .trim()
        .to_string(),
        memory_mb: opts.memory_mb,
        icount_shift: opts.icount_shift,
        dir: dir.to_path_buf(),
        timeout: opts.timeout_base + opts.timeout_per_step * steps as u32,
    };
    let mut on_line = progress(opts.verbose, traces.len());
    let booted = boot.run(&mut on_line).map_err(Error::Boot)?;
    parse_boot(
        kernel.driver,
        traces,
        &booted.results,
        &booted.console,
        booted.elapsed,
    )
}

/// The initramfs of one boot: the executor as `/init`, the module, the
/// traces in configuration order and the executor's configuration.
fn initramfs(kernel: &Kernel, traces: &[(String, Program)], opts: &Options) -> Result<Initramfs> {
    let read = |p: &PathBuf| {
        std::fs::read(p).map_err(|e| Error::Input(format!("read {}: {e}", p.display())))
    };
    let mut fs = Initramfs::new();
    fs.dir("/dev")
        .char_dev("/dev/console", 5, 1)
        .dir("/proc")
        .dir("/sys")
        .dir("/traces");
    fs.file("/init", 0o755, read(&kernel.executor)?);
    let module = match &kernel.module {
        Some(m) => {
            let name = if m.to_string_lossy().ends_with(".xz") {
                "/binder_linux.ko.xz"
            } else {
                "/binder_linux.ko"
            };
            fs.file(name, 0o644, read(m)?);
            Some(name.to_string())
        }
        None => None,
    };
    let mut files = Vec::new();
    for (i, (name, p)) in traces.iter().enumerate() {
        let path = format!("/traces/{i:05}.trace");
        fs.file(&path, 0o644, program::to_text(p).into_bytes());
        files.push(TraceFile {
            name: name.clone(),
            path,
            fail_nth: opts.fail_nth.get(name).cloned().unwrap_or_default(),
        });
    }
    let cfg = Config {
        driver: kernel.driver,
        module,
        traces: files,
        output: "/dev/ttyS1".into(),
        // Only the C driver's lines are rate-limited.
        pace: Pace {
            enabled: opts.pace.enabled && kernel.driver == Driver::C,
            ..opts.pace
        },
        release_timeout_ms: 5_000,
    };
    fs.file(
        exec::CONFIG_PATH,
        0o644,
        serde_json::to_vec(&cfg).expect("config serialises"),
    );
    Ok(fs)
}

/// What a boot says on stderr as the executor's lines arrive (with
/// `verbose`): the boot, each trace done of `total`, the executor's errors.
fn progress(verbose: bool, total: usize) -> impl FnMut(&str) {
    move |line: &str| {
        if !verbose {
            return;
        }
        if let Ok(r) = serde_json::from_str::<Record>(line) {
            match r {
                Record::Boot {
                    kernel, uptime_ms, ..
                } => {
                    eprintln!(
                        "binder-vm: {kernel} booted, executor at {:.2} s",
                        uptime_ms as f64 / 1000.0
                    )
                }
                Record::TraceEnd { trace, ms, .. } => {
                    eprintln!("binder-vm: trace {}/{total} done ({ms} ms)", trace + 1)
                }
                Record::Error { message, .. } => eprintln!("binder-vm: executor error: {message}"),
                _ => {}
            }
        }
    }
}

/// Turns one boot's JSON lines into trace runs. `traces` are the boot's
/// traces in configuration order.
pub fn parse_boot(
    driver: Driver,
    traces: &[(String, Program)],
    results: &str,
    console: &str,
    wall: Duration,
) -> Result<(Vec<TraceRun>, BootStats)> {
    let mut boot = BootLines {
        driver,
        traces,
        runs: (0..traces.len()).map(|_| None).collect(),
        stats: BootStats {
            kernel: String::new(),
            traces: traces.len(),
            wall,
            executor_start_ms: 0,
            done_ms: 0,
            paced_ms: 0,
            console: console.to_string(),
        },
        done: false,
        errors: Vec::new(),
    };
    for line in results.lines() {
        boot.line(line.trim_end_matches('\r'))?;
    }
    boot.finish(console)
}

/// One boot's lines, as far as [`parse_boot`] read them.
struct BootLines<'a> {
    driver: Driver,
    traces: &'a [(String, Program)],
    /// Each trace's conversion, from its `TraceBegin` on.
    runs: Vec<Option<Conv>>,
    stats: BootStats,
    /// Whether the executor said it was done.
    done: bool,
    /// The executor's errors that name no trace it began.
    errors: Vec<String>,
}

impl BootLines<'_> {
    /// Takes one line of the serial port: its JSON record, if it has one.
    fn line(&mut self, line: &str) -> Result<()> {
        let Some(start) = line.find('{') else {
            return Ok(());
        };
        let json = &line[start..];
        let record: Record = serde_json::from_str(json).map_err(|e| {
            Error::Protocol(format!("an executor line does not parse ({e}): {line}"))
        })?;
        let n = self.traces.len();
        let trace_of = |t: usize| -> Result<usize> {
            if t < n {
                Ok(t)
            } else {
                Err(Error::Protocol(format!(
                    "a record for trace {t} of {n}: {line}"
                )))
            }
        };
        match record {
            Record::Boot {
                kernel, uptime_ms, ..
            } => {
                self.stats.kernel = kernel;
                self.stats.executor_start_ms = uptime_ms;
            }
            Record::TraceBegin {
                trace, pids, log, ..
            } => {
                let t = trace_of(trace)?;
                let (name, program) = &self.traces[t];
                let mut c = Conv::new(self.driver, name.clone(), program.clone(), pids);
                c.run.begin_log = c.classify(&log);
                c.run.raw.push(json.to_string());
                self.runs[t] = Some(c);
            }
            Record::Step { trace, .. } | Record::TraceEnd { trace, .. } => {
                let t = trace_of(trace)?;
                let c = self.runs[t].as_mut().ok_or_else(|| {
                    Error::Protocol(format!("a record before its trace began: {line}"))
                })?;
                c.run.raw.push(json.to_string());
                c.record(record);
            }
            Record::Error {
                trace,
                step,
                message,
            } => match trace.and_then(|t| self.runs.get_mut(t)?.as_mut()) {
                Some(c) => {
                    c.run.raw.push(json.to_string());
                    c.run.error = Some(match step {
                        Some(s) => format!("step {s}: {message}"),
                        None => message,
                    });
                }
                None => self.errors.push(message),
            },
            Record::Done {
                uptime_ms,
                paced_ms,
                ..
            } => {
                self.stats.done_ms = uptime_ms;
                self.stats.paced_ms = paced_ms;
                self.done = true;
            }
        }
        Ok(())
    }

    /// Every trace's run, in configuration order (a trace the executor
    /// never began has no steps and says why), or the error of an executor
    /// that did not finish.
    fn finish(self, console: &str) -> Result<(Vec<TraceRun>, BootStats)> {
        if !self.done {
            let mut message = String::from("the executor did not finish");
            if !self.errors.is_empty() {
                message = format!("{message}: {}", self.errors.join("; "));
            } else if let Some(p) = console.lines().find(|l| l.contains("panicked at")) {
                message = format!("{message}: {p}");
            }
            return Err(Error::Executor {
                message,
                console_tail: qemu::tail(console, 40),
            });
        }
        let mut out = Vec::new();
        for (t, c) in self.runs.into_iter().enumerate() {
            match c {
                Some(c) => out.push(c.run),
                None => {
                    let (name, program) = &self.traces[t];
                    out.push(TraceRun {
                        name: name.clone(),
                        program: program.clone(),
                        pids: Vec::new(),
                        steps: Vec::new(),
                        begin_log: Vec::new(),
                        flush_log: Vec::new(),
                        end_log: Vec::new(),
                        log_may_be_incomplete: false,
                        ms: 0,
                        error: Some(if self.errors.is_empty() {
                            "the executor never started this trace".into()
                        } else {
                            self.errors.join("; ")
                        }),
                        raw: Vec::new(),
                    });
                }
            }
        }
        Ok((out, self.stats))
    }
}

/// The conversion of one trace's records.
struct Conv {
    driver: Driver,
    run: TraceRun,
    /// The last full debug text of each process.
    last_text: Vec<Option<String>>,
    /// Node names by debug id, for every node seen alive.
    names: HashMap<u32, NodeName>,
    /// How many nodes each (owner, ptr) had, for serials.
    serials: HashMap<(u8, u64), u32>,
    /// The cookie of each death notification seen set, by (process, ref
    /// debug id).
    deaths: HashMap<(usize, u32), u64>,
}

impl Conv {
    fn new(driver: Driver, name: String, program: Program, pids: Vec<i32>) -> Conv {
        let n = program.procs();
        Conv {
            driver,
            run: TraceRun {
                name,
                program,
                pids,
                steps: Vec::new(),
                begin_log: Vec::new(),
                flush_log: Vec::new(),
                end_log: Vec::new(),
                log_may_be_incomplete: false,
                ms: 0,
                error: None,
                raw: Vec::new(),
            },
            last_text: vec![None; n],
            names: HashMap::new(),
            serials: HashMap::new(),
            deaths: HashMap::new(),
        }
    }

    fn classify(&self, lines: &[String]) -> Vec<LogLine> {
        lines
            .iter()
            .map(|l| klog::classify(l, self.driver))
            .collect()
    }

    fn record(&mut self, record: Record) {
        match record {
            Record::Step {
                step,
                ret,
                ee,
                reads,
                log,
                procs,
                release,
                paced_ms,
                us,
                full_limits,
                notes,
                fault,
                ..
            } => {
                let Some(program_step) = self.run.program.steps.get(step).cloned() else {
                    self.run.error = Some(format!(
                        "a record for step {step}, which the program does not have"
                    ));
                    return;
                };
                let mut notes = notes;
                let log = self.classify(&log);
                self.run.log_may_be_incomplete |= !full_limits.is_empty();
                let mut observed = self.observe(ret, &reads, &log, &mut notes);
                observed.ee = ee.map(|e| ExtendedError::observe(e.id, e.command, e.param));
                let texts = self.proc_texts(&procs);
                let snapshot = self.snapshot(&texts, step, &program_step, &mut notes);
                self.run.steps.push(StepRun {
                    step: program_step,
                    observed,
                    snapshot,
                    log,
                    procs: texts.into_iter().map(|(_, t)| t).collect(),
                    reads,
                    ret,
                    release,
                    paced_ms,
                    fault,
                    us,
                    full_limits,
                    notes,
                });
            }
            Record::TraceEnd {
                flush,
                log,
                ms,
                log_may_be_incomplete,
                ..
            } => {
                self.run.flush_log = self.classify(&flush);
                self.run.end_log = self.classify(&log);
                self.run.ms = ms;
                self.run.log_may_be_incomplete |= log_may_be_incomplete;
            }
            _ => {}
        }
    }

    /// What a step's command returned, what each process read and the
    /// log lines the command language compares, as `idpool::driver`
    /// observes them; whatever does not convert (an errno it does not name,
    /// a malformed read, an unclassified line, a warning, lines the rate
    /// limit dropped) becomes a note.
    fn observe(
        &mut self,
        ret: WireRet,
        reads: &[Vec<WireBr>],
        log: &[LogLine],
        notes: &mut Vec<String>,
    ) -> Observed {
        let n = self.run.program.procs();
        let mut observed = Observed::new(n);
        observed.ret = to_ret(ret, notes);
        for (k, r) in reads.iter().enumerate().take(n) {
            for br in r {
                match to_br(br) {
                    Ok(b) => observed.reads[k].push(Read {
                        tid: Tid(br.tid),
                        br: b,
                    }),
                    Err(e) => notes.push(format!("p{k}: {e}")),
                }
            }
        }
        for l in log {
            match &l.class {
                Class::Log(x) => observed.log.push(*x),
                Class::Unclassified => notes.push(format!("unclassified log line: {}", l.raw)),
                Class::Splat => notes.push(format!("kernel warning: {}", l.raw)),
                Class::Suppressed { site, count } => {
                    self.run.log_may_be_incomplete = true;
                    notes.push(format!("{site} dropped {count} lines (rate limit)"))
                }
                Class::Known(_) | Class::Foreign => {}
            }
        }
        observed.normalise();
        observed
    }

    /// Each process's liveness and debug text after a step, parsed: `=`
    /// stands for the process's last full text (the executor prints a text
    /// only when it changed), no text for a process that has exited.
    fn proc_texts(&mut self, procs: &[WireProc]) -> Vec<(bool, Option<ProcText>)> {
        let n = self.run.program.procs();
        let mut texts = Vec::new();
        for (k, p) in procs.iter().enumerate().take(n) {
            let text = match p.state.as_deref() {
                None => {
                    self.last_text[k] = None;
                    None
                }
                Some("=") => self.last_text[k].clone(),
                Some(t) => {
                    self.last_text[k] = Some(t.to_string());
                    Some(t.to_string())
                }
            };
            texts.push((p.alive, text.map(|t| debugfs::parse(&t, self.driver))));
        }
        texts
    }

    /// Names every node of `texts` not seen alive before, by its owner,
    /// its pointer and a serial among the nodes of that owner and pointer.
    fn name_nodes(&mut self, texts: &[(bool, Option<ProcText>)]) {
        for (k, (_, text)) in texts.iter().enumerate() {
            for node in text.iter().flat_map(|t| &t.nodes) {
                if !self.names.contains_key(&node.debug_id) {
                    let owner = Pid(k as u8);
                    let serial = self.serials.entry((owner.0, node.ptr)).or_insert(0);
                    self.names.insert(
                        node.debug_id,
                        NodeName {
                            owner,
                            ptr: node.ptr,
                            serial: *serial,
                        },
                    );
                    *serial += 1;
                }
            }
        }
    }

    /// The cookie of the death notification of process `k`'s ref `r`. The
    /// debug text says a notification is set, not its cookie: the cookie is
    /// the one of the `death` command after which it appeared, kept until
    /// the text says it is gone.
    fn death(
        &mut self,
        k: usize,
        r: &RefLine,
        program_step: &Step,
        notes: &mut Vec<String>,
    ) -> Option<u64> {
        match r.death {
            Some(true) => {
                let set_now = match program_step.command {
                    Command::RequestDeath { handle, cookie }
                        if program_step.pid.index() == k && handle == r.handle =>
                    {
                        Some(cookie)
                    }
                    _ => None,
                };
                match self.deaths.entry((k, r.debug_id)) {
                    Entry::Occupied(e) => Some(*e.get()),
                    Entry::Vacant(e) => match set_now {
                        Some(cookie) => Some(*e.insert(cookie)),
                        None => {
                            notes.push(format!(
                                "p{k}: handle {} has a death notification no `death` command of this step set",
                                r.handle
                            ));
                            None
                        }
                    },
                }
            }
            Some(false) => {
                self.deaths.remove(&(k, r.debug_id));
                None
            }
            None => None,
        }
    }

    fn snapshot(
        &mut self,
        texts: &[(bool, Option<ProcText>)],
        _step: usize,
        program_step: &Step,
        notes: &mut Vec<String>,
    ) -> Snapshot {
        // Name every live node first: refs may name nodes of any process.
        self.name_nodes(texts);
        let mut procs = Vec::new();
        for (k, (alive, text)) in texts.iter().enumerate() {
            let mut state = ProcState {
                alive: *alive,
                ..ProcState::default()
            };
            if let Some(t) = text {
                for node in &t.nodes {
                    state.nodes.insert(
                        node.ptr,
                        NodeState {
                            serial: self.names[&node.debug_id].serial,
                            strong: node.strong,
                            weak: node.weak,
                            has_strong: node.has_strong,
                            has_weak: node.has_weak,
                        },
                    );
                }
                let mut refs = BTreeMap::new();
                for r in &t.refs {
                    let Some(&node) = self.names.get(&r.node) else {
                        notes.push(format!(
                            "p{k}: handle {} refers to node {} never seen alive",
                            r.handle, r.node
                        ));
                        continue;
                    };
                    let death = self.death(k, r, program_step, notes);
                    refs.insert(
                        r.handle,
                        RefState {
                            node,
                            strong: r.strong,
                            weak: r.weak,
                            death,
                        },
                    );
                }
                state.refs = refs;
                state.buffers = t.buffers;
                for u in &t.unparsed {
                    notes.push(format!("p{k}: unparsed debug line: {u}"));
                }
            }
            procs.push(state);
        }
        Snapshot { procs }
    }
}

/// A reported ioctl result as `idpool::driver::Ret` (`None`, and a note,
/// for an errno the crate does not name).
pub fn to_ret(ret: WireRet, notes: &mut Vec<String>) -> Option<Ret> {
    Some(match ret {
        WireRet::Ok => Ret::Ok,
        WireRet::Skipped => Ret::Skipped,
        WireRet::NodeInfo { strong, weak } => Ret::NodeInfo { strong, weak },
        WireRet::NodeDebug {
            ptr,
            cookie,
            has_strong,
            has_weak,
        } => Ret::NodeDebug {
            ptr,
            cookie,
            has_strong: has_strong != 0,
            has_weak: has_weak != 0,
        },
        WireRet::FrozenInfo {
            sync_recv,
            async_recv,
        } => Ret::FrozenInfo {
            sync_recv,
            async_recv,
        },
        WireRet::Extended(e) => Ret::Extended(ExtendedError::observe(e.id, e.command, e.param)),
        WireRet::Version(v) => Ret::Version(v),
        WireRet::Errno(e) => match Errno::from_code(e) {
            Some(e) => Ret::Err(e),
            None => {
                notes.push(format!("errno {e} is not one idpool::driver::Errno names"));
                return None;
            }
        },
    })
}

/// The objects of a reported transaction or reply, translated.
fn received(br: &WireBr) -> Result<Vec<Received>, String> {
    let mut objects = Vec::new();
    for o in br.objects.iter().flatten() {
        objects.push(match o.kind {
            abi::BINDER_TYPE_HANDLE | abi::BINDER_TYPE_WEAK_HANDLE => Received::Handle {
                handle: o.value as u32,
                strong: o.kind == abi::BINDER_TYPE_HANDLE,
            },
            abi::BINDER_TYPE_BINDER | abi::BINDER_TYPE_WEAK_BINDER => Received::Node {
                ptr: o.value,
                strong: o.kind == abi::BINDER_TYPE_BINDER,
            },
            k => return Err(format!("a transaction object of type {k:#x}")),
        });
    }
    Ok(objects)
}

/// A reported `BR_*` as `idpool::driver::Br`.
pub fn to_br(br: &WireBr) -> Result<Br, String> {
    let arg = |i: usize| {
        br.args
            .get(i)
            .copied()
            .ok_or_else(|| format!("{} without its payload", br.br))
    };
    Ok(match br.br.as_str() {
        // A two-way transaction is a call its reader owes a reply to.
        "BR_TRANSACTION" if arg(3)? as u32 & abi::TF_ONE_WAY == 0 => Br::Call(received(br)?),
        "BR_TRANSACTION" => Br::Transaction(received(br)?),
        "BR_REPLY" => Br::Reply(received(br)?),
        "BR_TRANSACTION_COMPLETE" => Br::TransactionComplete,
        "BR_DEAD_REPLY" => Br::DeadReply,
        "BR_FAILED_REPLY" => Br::FailedReply,
        "BR_ERROR" => Br::Error(arg(0)? as u32 as i32),
        "BR_INCREFS" => Br::IncRefs(arg(0)?),
        "BR_ACQUIRE" => Br::Acquire(arg(0)?),
        "BR_RELEASE" => Br::Release(arg(0)?),
        "BR_DECREFS" => Br::DecRefs(arg(0)?),
        "BR_DEAD_BINDER" => Br::DeadBinder(arg(0)?),
        "BR_CLEAR_DEATH_NOTIFICATION_DONE" => Br::ClearDeathDone(arg(0)?),
        "BR_FROZEN_REPLY" => Br::FrozenReply,
        "BR_TRANSACTION_PENDING_FROZEN" => Br::PendingFrozen,
        "BR_ONEWAY_SPAM_SUSPECT" => Br::OnewaySpamSuspect,
        "BR_FROZEN_BINDER" => Br::FrozenBinder {
            cookie: arg(0)?,
            frozen: arg(1)? != 0,
        },
        "BR_CLEAR_FREEZE_NOTIFICATION_DONE" => Br::ClearFreezeDone(arg(0)?),
        "BR_SPAWN_LOOPER" => Br::SpawnLooper,
        other => {
            return Err(format!(
                "{other} ({:#x}) is not one idpool::driver::Br names",
                br.code
            ))
        }
    })
}

/// One trace's run again from the executor's records of it
/// ([`TraceRun::raw`], saved by `triage real-kernel --save-raw`), without
/// a boot: the comparison can then be redone on a changed tree.
pub fn reparse(driver: Driver, name: &str, program: &Program, raw: &[String]) -> Result<TraceRun> {
    let mut text = String::new();
    for line in raw {
        let mut v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Protocol(format!("a saved record does not parse ({e}): {line}")))?;
        if let Some(t) = v.get_mut("trace").filter(|t| !t.is_null()) {
            *t = serde_json::Value::from(0);
        }
        text.push_str(&v.to_string());
        text.push('\n');
    }
    let done = Record::Done {
        traces: 1,
        uptime_ms: 0,
        paced_ms: 0,
    };
    text.push_str(&serde_json::to_string(&done).expect("a record serializes"));
    text.push('\n');
    let (mut runs, _) = parse_boot(
        driver,
        &[(name.to_string(), program.clone())],
        &text,
        "",
        Duration::ZERO,
    )?;
    Ok(runs.remove(0))
}
