//! The executor: PID 1 of the VM. It mounts what it needs, makes one Binder
//! device per trace (the C module's `devices=`, or binderfs), then runs
//! every trace on its own device, as `docs/commands.md` says: one forked
//! OS process per task of the program, with one open of the device, one
//! serving thread and one socket per program process (several when the
//! task opens the device more than once, `procs 0 0 p0`), each open told
//! by the executor over its socket which command to run, when to drain its
//! work and when to close. After every command it records the ioctl's
//! result, every `BR_*` each process read, the kernel log lines and each
//! process's state in the driver's debug files, and prints them as JSON
//! lines ([`crate::wire::Record`]).

use crate::abi;
use crate::klog::{self, Class, Limit, RateLimits, Window};
use crate::program;
use crate::sys;
use crate::wire::{
    Config, Driver, Fault, Pace, Record, Release, TraceFile, WireBr, WireEe, WireProc, WireRet,
};
use idpool::driver::{Command, Pid, Procs, Step};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

mod child;
mod commands;
mod drain;

/// Where the host puts the configuration.
pub const CONFIG_PATH: &str = "/binder-vm.json";
/// The mapping size of every process (1 MiB, as libbinder maps).
const MAP_SIZE: usize = 1 << 20;
/// The read buffer of a drain.
const READ_SIZE: usize = 4096;
/// `MODULE_INIT_COMPRESSED_FILE` of `finit_module(2)`.
const MODULE_INIT_COMPRESSED_FILE: libc::c_int = 4;

/// What the executor asks of one of its processes.
#[derive(Debug, Serialize, Deserialize)]
enum Request {
    /// Run this command (its text form) on thread `tid`; `pids` are the
    /// trace's processes' pids, for the commands that name a process.
    Run {
        /// `t0` .. `t2`.
        tid: u8,
        /// The command's text.
        command: String,
        /// The VM pids of `p0`, `p1`, ...
        pids: Vec<i32>,
        /// Fail this allocation of the command's ioctl (`fail-nth`).
        #[serde(default)]
        fail_nth: Option<u32>,
    },
    /// Each thread the driver knows reads and answers everything the
    /// driver has for it.
    Drain,
    /// Unmap and close the Binder file; its serving thread ends (the task's
    /// process exits with its last open).
    Exit,
}

/// A process's answer.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Reply {
    /// Its task's pid (in the first answer, after opening the device).
    pid: i32,
    /// The thread id of its `t0` (in the first answer).
    #[serde(default)]
    tid: i32,
    /// The command's result.
    ret: Option<WireRet>,
    /// The command's thread's extended error after it.
    ee: Option<WireEe>,
    /// What a drain read (each read names its thread).
    reads: Vec<WireBr>,
    /// Anything off.
    notes: Vec<String>,
    /// Whether the command's planned allocation failure was injected.
    fault_injected: Option<bool>,
    /// Set when it could not do what it was asked at all.
    error: Option<String>,
}

impl Reply {
    fn error(e: String) -> Reply {
        Reply {
            error: Some(e),
            ..Reply::default()
        }
    }
}

/// PID 1's entry point: runs everything, then powers the VM off.
pub fn main() -> ! {
    let mut out = Output::console();
    if let Err(e) = run(&mut out) {
        out.emit(&Record::Error {
            trace: None,
            step: None,
            message: e,
        });
    }
    out.flush();
    sys::sync();
    // Reboot, not power-off: QEMU runs with -no-reboot, so a reboot ends
    // it, and it works on kernels without ACPI (tinyconfig) too.
    let e = sys::reboot(libc::RB_AUTOBOOT);
    eprintln!("binder-exec: reboot failed: {e}");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The JSON-lines channel.
struct Output {
    file: Option<File>,
}

impl Output {
    fn console() -> Output {
        Output { file: None }
    }

    fn open(path: &str) -> Output {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path)
        {
            Ok(file) => Output { file: Some(file) },
            Err(e) => {
                eprintln!("binder-exec: cannot open {path} ({e}); results go to the console");
                Output { file: None }
            }
        }
    }

    fn emit(&mut self, record: &Record) {
        let mut line = serde_json::to_string(record).expect("records serialise");
        line.push('\n');
        let ok = match &mut self.file {
            Some(f) => f.write_all(line.as_bytes()).is_ok(),
            None => false,
        };
        if !ok {
            print!("BINDER-VM {line}");
            let _ = io::stdout().flush();
        }
    }

    fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.flush();
            sys::tcdrain(f);
        }
        let _ = io::stdout().flush();
    }
}

fn mount_all(driver: Driver) -> Result<(), String> {
    let mounts: &[(&str, &str, &str)] = &[
        ("devtmpfs", "/dev", "devtmpfs"),
        ("proc", "/proc", "proc"),
        ("sysfs", "/sys", "sysfs"),
        ("debugfs", "/sys/kernel/debug", "debugfs"),
    ];
    for (src, target, fs) in mounts {
        let _ = std::fs::create_dir_all(target);
        match sys::mount(src, target, fs, None) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) if *fs == "debugfs" && driver == Driver::Rust => {
                eprintln!("binder-exec: no debugfs ({e}); not needed for the Rust driver");
            }
            Err(e) => return Err(format!("mount {fs} on {target}: {e}")),
        }
    }
    if driver == Driver::Rust {
        let _ = std::fs::create_dir_all("/dev/binderfs");
        // stats=global makes binder_logs/ (state, stats, proc/<pid>).
        sys::mount("binder", "/dev/binderfs", "binder", Some("stats=global"))
            .map_err(|e| format!("mount binderfs on /dev/binderfs: {e}"))?;
    }
    Ok(())
}

/// Lets `fail-nth` fail the drivers' allocations: every fault attribute
/// exempts, by default, allocations that may sleep (`ignore-gfp-wait`),
/// which are all of the drivers' (`GFP_KERNEL`); each injected fault logs
/// one line (`verbose` 1). Fails on a kernel without fault injection's
/// debugfs files.
fn allow_faults() -> Result<(), String> {
    for attr in ["failslab", "fail_page_alloc"] {
        for (file, value) in [("ignore-gfp-wait", "N"), ("verbose", "1")] {
            let path = format!("/sys/kernel/debug/{attr}/{file}");
            std::fs::write(&path, value).map_err(|e| {
                format!("write {value} to {path}: {e} (a kernel without CONFIG_FAULT_INJECTION_DEBUG_FS?)")
            })?;
        }
    }
    Ok(())
}

/// What the executor writes to `/dev/kmsg` before reading the log.
const MARK: &str = "binder-exec: mark";

/// The kernel log since the last call. A line printed without a newline
/// (the Rust driver's `pr_warn!`s, the C driver's node-info error) stays
/// open in the kernel's log buffer, invisible to readers, until another
/// line begins: the executor first writes a line of its own to
/// `/dev/kmsg`, which closes it, and leaves that line out.
fn klog_lines() -> Vec<String> {
    let mut notes = Vec::new();
    if let Err(e) = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .and_then(|mut f| f.write_all(format!("{MARK}\n").as_bytes()))
    {
        notes.push(format!("binder-exec: write /dev/kmsg: {e}"));
    }
    match sys::klog_read_clear() {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains(MARK))
            .map(str::to_string)
            .chain(notes)
            .collect(),
        Err(e) => vec![format!("binder-exec: syslog(2) failed: {e}")],
    }
}

/// The devices, one per trace, and where the driver's debug files are.
struct Devices {
    driver: Driver,
    paths: Vec<String>,
}

impl Devices {
    fn make(cfg: &Config) -> Result<Devices, String> {
        let names: Vec<String> = (0..cfg.traces.len()).map(|i| format!("b{i}")).collect();
        match (cfg.driver, cfg.module.as_deref()) {
            (Driver::C, Some(module)) => {
                let f = File::open(module).map_err(|e| format!("open {module}: {e}"))?;
                let flags = if module.ends_with(".xz") || module.ends_with(".zst") {
                    MODULE_INIT_COMPRESSED_FILE
                } else {
                    0
                };
                let params = format!("devices={}", names.join(","));
                if !names.is_empty() {
                    sys::finit_module(f.as_raw_fd(), &params, flags).map_err(|e| {
                        format!(
                            "finit_module({module}, devices= {} names): {e}",
                            names.len()
                        )
                    })?;
                }
                Ok(Devices {
                    driver: Driver::C,
                    paths: names.iter().map(|n| format!("/dev/{n}")).collect(),
                })
            }
            // The Rust driver, and a C driver built in (no module): the
            // devices are made in binderfs.
            (driver, _) => {
                let control = File::open("/dev/binderfs/binder-control")
                    .map_err(|e| format!("open /dev/binderfs/binder-control: {e}"))?;
                for n in &names {
                    sys::binderfs_add(&control, n)
                        .map_err(|e| format!("BINDER_CTL_ADD {n}: {e}"))?;
                }
                Ok(Devices {
                    driver,
                    paths: names.iter().map(|n| format!("/dev/binderfs/{n}")).collect(),
                })
            }
        }
    }

    fn proc_state_path(&self, pid: i32) -> String {
        match self.driver {
            Driver::C => format!("/sys/kernel/debug/binder/proc/{pid}"),
            Driver::Rust => format!("/dev/binderfs/binder_logs/proc/{pid}"),
        }
    }

    /// The driver's global state file: every Binder process of every
    /// device, each as its pid's file prints it (C `print_binder_state`,
    /// binder.c:6863-6886; Rust `rust_binder_state_show_impl`,
    /// rust_binder_main.rs:575-586).
    fn state_path(&self) -> &'static str {
        match self.driver {
            Driver::C => "/sys/kernel/debug/binder/state",
            Driver::Rust => "/dev/binderfs/binder_logs/state",
        }
    }

    /// The name of trace `index`'s device: its context's name, which each
    /// process's debug text prints (`context b0`).
    fn name(&self, index: usize) -> &str {
        let path = &self.paths[index];
        path.rsplit('/').next().unwrap_or(path)
    }
}

fn run(out: &mut Output) -> Result<(), String> {
    // The driver is only known from the configuration; binderfs is mounted
    // after it is read.
    let _ = mount_all(Driver::C).or_else(|_| mount_all(Driver::Rust));
    let text =
        std::fs::read_to_string(CONFIG_PATH).map_err(|e| format!("read {CONFIG_PATH}: {e}"))?;
    let cfg: Config =
        serde_json::from_str(&text).map_err(|e| format!("parse {CONFIG_PATH}: {e}"))?;
    *out = Output::open(&cfg.output);
    // binderfs (which `mount_all` mounts for the Rust driver) holds the
    // devices of a built-in driver, C's too.
    if cfg.driver == Driver::Rust || cfg.module.is_none() {
        mount_all(Driver::Rust)?;
    }
    if cfg.traces.iter().any(|t| !t.fail_nth.is_empty()) {
        allow_faults()?;
    }
    let devices = Devices::make(&cfg)?;
    if cfg.driver == Driver::Rust {
        spend_debug_id_zero(&devices)?;
    }
    out.emit(&Record::Boot {
        kernel: sys::kernel_release(),
        driver: cfg.driver,
        traces: cfg.traces.len(),
        uptime_ms: sys::boottime_us() / 1000,
        log: klog_lines(),
    });
    let mut pacer = Pacer::new(cfg.pace, cfg.driver == Driver::C);
    for (i, tf) in cfg.traces.iter().enumerate() {
        let mut run = TraceRun {
            index: i,
            cfg: &cfg,
            devices: &devices,
            out,
            pacer: &mut pacer,
            children: Vec::new(),
            from_state: false,
        };
        let result = run.run(tf);
        if let Err(e) = result {
            let step = e.1;
            run.out.emit(&Record::Error {
                trace: Some(i),
                step,
                message: e.0,
            });
            run.abort();
        }
    }
    out.emit(&Record::Done {
        traces: cfg.traces.len(),
        uptime_ms: sys::boottime_us() / 1000,
        paced_ms: pacer.total_us / 1000,
    });
    Ok(())
}

/// Spends the Rust driver's first debug id (`next_debug_id` counts from
/// 0, rust_binder_main.rs:98-102) on a transaction before any trace runs:
/// a transaction's extended error carries its debug id, and an id of 0
/// reads as "no id". On a running system the first id went long ago; the
/// model of the Rust driver numbers a program's transactions from 1. The
/// transaction goes to handle 0 of a fresh open with no context manager,
/// and fails.
fn spend_debug_id_zero(devices: &Devices) -> Result<(), String> {
    let path = devices.paths.first().ok_or("no device to open")?;
    let file = File::options()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let mut write = abi::BC_TRANSACTION.to_le_bytes().to_vec();
    write.extend_from_slice(&abi::TransactionData::default().encode());
    // Fails (no context manager) after taking the id: only the id matters.
    let _ = sys::write_read(&file, &write, 0);
    Ok(())
}

/// Paces the commands against the C driver's two rate limits (see
/// [`Pace`] and [`RateLimits`]): it follows each limit's window through the
/// lines the driver printed, by their timestamps, and before a command
/// waits out any window with fewer than the headroom left of its burst.
struct Pacer {
    cfg: Pace,
    /// Whether the driver's lines are rate-limited at all (C).
    limited: bool,
    limits: RateLimits,
    /// A window printed its whole burst, or the kernel reported dropped
    /// lines, during the current trace.
    incomplete: bool,
    total_us: u64,
}

impl Pacer {
    fn new(cfg: Pace, limited: bool) -> Pacer {
        Pacer {
            cfg,
            limited,
            limits: RateLimits::default(),
            incomplete: false,
            total_us: 0,
        }
    }

    /// When `limit`'s window is over for sure (the kernel's 5 s and the
    /// configured margin), in seconds of uptime.
    fn end(&self, limit: Limit) -> Option<f64> {
        self.limits
            .window(limit)
            .map(|w| w.start + self.cfg.interval_ms as f64 / 1000.0)
    }

    /// Sleeps until every window `wait(limit, window)` names is over, and
    /// forgets the windows that are. Returns the microseconds waited.
    fn wait_out(&mut self, wait: impl Fn(Limit, Window) -> bool) -> u64 {
        let now = sys::boottime_us();
        let mut until: Option<f64> = None;
        for l in Limit::ALL {
            if let (Some(w), Some(end)) = (self.limits.window(l), self.end(l)) {
                if wait(l, w) {
                    until = Some(until.map_or(end, |u| u.max(end)));
                }
            }
        }
        let end_us = until.map_or(0, |u| (u * 1e6) as u64);
        if end_us > now {
            std::thread::sleep(Duration::from_micros(end_us - now));
        }
        let after = sys::boottime_us();
        for l in Limit::ALL {
            if self.end(l).is_some_and(|e| (e * 1e6) as u64 <= after) {
                self.limits.expire(l);
            }
        }
        let waited = if end_us > now { after - now } else { 0 };
        self.total_us += waited;
        waited
    }

    /// Before a command that may print `expect` lines through one limit
    /// (at least the configured headroom): waits out a window that might
    /// overflow. Returns the microseconds waited.
    fn before_command(&mut self, expect: u32) -> u64 {
        if !self.limited || !self.cfg.enabled {
            return 0;
        }
        let (burst, need) = (self.cfg.burst, expect.max(self.cfg.headroom));
        self.wait_out(|_, w| w.printed + need > burst)
    }

    /// The limits whose window has printed its whole burst and is not
    /// over: any of their lines printed now is dropped.
    fn full(&self) -> Vec<Limit> {
        let now = sys::boottime_us() as f64 / 1e6;
        Limit::ALL
            .into_iter()
            .filter(|&l| {
                self.limited && self.limits.full(l) && self.end(l).is_some_and(|e| now < e)
            })
            .collect()
    }

    /// Whether a limit's window printed its whole burst and no line of it
    /// came since: the kernel reports what it dropped only with that
    /// limit's next line.
    fn owes(&self) -> bool {
        self.limited && Limit::ALL.into_iter().any(|l| self.limits.owes(l))
    }

    /// After a command: follows the windows through its lines.
    fn observe(&mut self, lines: &[String]) {
        if !self.limited {
            return;
        }
        for raw in lines {
            let line = klog::classify(raw, Driver::C);
            if matches!(line.class, Class::Suppressed { .. }) {
                self.incomplete = true;
            }
            self.limits.observe(&line);
        }
        if self.owes() {
            self.incomplete = true;
        }
    }
}

/// One process of the running trace (one open of the device), seen from
/// the executor. The opens of one task share its OS process, so its pid.
struct Child {
    /// Its task's pid.
    pid: i32,
    /// Its `t0`'s thread id.
    tid: i32,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    alive: bool,
    last_state: Option<String>,
}

impl Child {
    fn ask(&mut self, req: &Request) -> Result<Reply, String> {
        let mut line = serde_json::to_string(req).expect("requests serialise");
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| format!("pid {}: send {req:?}: {e}", self.pid))?;
        let mut answer = String::new();
        let n = self
            .reader
            .read_line(&mut answer)
            .map_err(|e| format!("pid {}: read the answer to {req:?}: {e}", self.pid))?;
        if n == 0 {
            return Err(format!("pid {} died before answering {req:?}", self.pid));
        }
        let reply: Reply = serde_json::from_str(&answer)
            .map_err(|e| format!("pid {}: bad answer {answer:?}: {e}", self.pid))?;
        match reply.error {
            Some(e) => Err(format!("pid {}: {e}", self.pid)),
            None => Ok(reply),
        }
    }
}

struct TraceRun<'a> {
    index: usize,
    cfg: &'a Config,
    devices: &'a Devices,
    out: &'a mut Output,
    pacer: &'a mut Pacer,
    /// One per process of the program, `children[p.index()]` for `p`.
    children: Vec<Child>,
    /// Whether the processes' debug text comes from the driver's global
    /// state file ([`TraceRun::texts_from_state`]): for a program with
    /// several opens by one task.
    from_state: bool,
}

type StepError = (String, Option<usize>);

/// What a step's command did.
struct CommandDone {
    ret: WireRet,
    ee: Option<WireEe>,
    /// For `exit`: the wait for the deferred release.
    release: Option<Release>,
    notes: Vec<String>,
    /// The fault injected into the command, if one was asked for.
    fault: Option<Fault>,
}

impl TraceRun<'_> {
    fn run(&mut self, tf: &TraceFile) -> Result<(), StepError> {
        let t0 = sys::boottime_us();
        self.pacer.incomplete = false;
        let text = std::fs::read_to_string(&tf.path)
            .map_err(|e| (format!("read {}: {e}", tf.path), None))?;
        let program = program::parse(&text).map_err(|e| (e, None))?;
        let device = self.devices.paths[self.index].clone();
        let _ = klog_lines();
        self.from_state = program.procs.shares_a_task();
        self.spawn_all(&program.procs, &device)
            .map_err(|e| (e, None))?;
        let log = klog_lines();
        self.pacer.observe(&log);
        self.out.emit(&Record::TraceBegin {
            trace: self.index,
            name: tf.name.clone(),
            device,
            pids: self.children.iter().map(|c| c.pid).collect(),
            log,
        });
        for (s, step) in program.steps.iter().enumerate() {
            let record = self.step(s, step).map_err(|e| (e, Some(s)))?;
            self.out.emit(&record);
        }
        let flush = self.flush().map_err(|e| (e, None))?;
        let kmsg = sys::open_kmsg_at_end().ok();
        for k in 0..self.children.len() {
            if self.children[k].alive {
                self.close(k).map_err(|e| (e, None))?;
            }
        }
        if self.devices.driver == Driver::Rust {
            // A release with much work to cancel (hundreds of one-way
            // transactions) logs for long after it left the list; on a slow
            // kernel its lines would land in the next trace.
            sys::wait_log_quiet(
                kmsg.as_ref(),
                Duration::from_millis(200),
                Duration::from_secs(10),
            );
        }
        let mut log = klog_lines();
        self.pacer.observe(&log);
        // What the closes dropped is reported here too, not in the next
        // trace.
        log.extend(self.flush().map_err(|e| (e, None))?);
        self.out.emit(&Record::TraceEnd {
            trace: self.index,
            flush,
            log,
            ms: (sys::boottime_us() - t0) / 1000,
            log_may_be_incomplete: self.pacer.incomplete,
        });
        Ok(())
    }

    /// Forks the program's tasks, each when its first process opens, in
    /// process order: a task makes all its opens then, in process order
    /// (`procs 0 0 p0`: `p0` and `p2`, then `p1`), and
    /// [`TraceRun::children`] holds each process's at its index. After a
    /// failure the tasks already forked are in `children` for
    /// [`TraceRun::abort`].
    fn spawn_all(&mut self, procs: &Procs, device: &str) -> Result<(), String> {
        let mut spawned: Vec<(usize, Child)> = Vec::new();
        for first in (0..procs.len() as u8).map(Pid) {
            if procs.task(first) != first {
                continue;
            }
            let opens: Vec<Pid> = procs.of_task(first).collect();
            match spawn_task(device, procs.euids[first.index()], opens.len()) {
                Ok(children) => {
                    spawned.extend(opens.iter().map(|p| p.index()).zip(children));
                }
                Err(e) => {
                    self.children = spawned.into_iter().map(|(_, c)| c).collect();
                    return Err(e);
                }
            }
        }
        spawned.sort_by_key(|(k, _)| *k);
        self.children = spawned.into_iter().map(|(_, c)| c).collect();
        Ok(())
    }

    /// When a rate limit's window printed its whole burst (so that lines
    /// may have been dropped), waits the window out and makes the driver
    /// print through both limits once, from a process of its own on the
    /// trace's device: a one-way transaction to a handle it does not have
    /// ("got transaction to invalid handle" through `binder_user_error`,
    /// "cannot find target node" and the failed transaction through
    /// `binder_debug`), read back, then the process exits. Each limit's
    /// first call after its window prints "<function>: N callbacks
    /// suppressed" first, so every line the trace lost is counted in the
    /// trace. The lines printed meanwhile; none when no window was full.
    fn flush(&mut self) -> Result<Vec<String>, String> {
        if !self.pacer.owes() {
            return Ok(Vec::new());
        }
        let _ = self.pacer.wait_out(|_, w| w.printed >= RateLimits::BURST);
        let device = self.devices.paths[self.index].clone();
        self.children.extend(spawn_task(&device, 0, 1)?);
        let k = self.children.len() - 1;
        let probe = &mut self.children[k];
        let reply = probe.ask(&Request::Run {
            tid: 0,
            command: "send 1".into(),
            fail_nth: None,
            pids: Vec::new(),
        })?;
        if reply.ret != Some(WireRet::Ok) {
            return Err(format!("the rate-limit probe's send: {:?}", reply.ret));
        }
        probe.ask(&Request::Drain)?;
        self.close(k)?;
        self.children.pop();
        let log = klog_lines();
        self.pacer.observe(&log);
        Ok(log)
    }

    /// Kills what is left of a failed trace and waits for its release, so
    /// that the next trace starts from a quiet driver.
    fn abort(&mut self) {
        for k in 0..self.children.len() {
            if self.children[k].alive {
                let pid = self.children[k].pid;
                // Closing a socket makes its task exit (the kernel then
                // closes its Binder files): every open of the task goes.
                for c in self.children.iter_mut().filter(|c| c.alive && c.pid == pid) {
                    let _ = c.writer.shutdown(std::net::Shutdown::Both);
                    c.alive = false;
                }
                let _ = sys::waitpid(pid);
                let _ = self.wait_release(pid);
            }
        }
        let _ = klog_lines();
    }

    fn step(&mut self, s: usize, step: &Step) -> Result<Record, String> {
        let paced_us = self.pacer.before_command(self.expected_lines(step));
        let t0 = sys::boottime_us();
        let done = self.command(s, step)?;
        let mut notes = done.notes;
        let reads = self.drain(&mut notes)?;
        let log = klog_lines();
        self.pacer.observe(&log);
        let full_limits = self.pacer.full();
        Ok(Record::Step {
            trace: self.index,
            step: s,
            ret: done.ret,
            ee: done.ee,
            reads,
            log,
            procs: self.proc_states()?,
            release: done.release,
            paced_ms: paced_us / 1000,
            us: sys::boottime_us() - t0,
            full_limits,
            notes,
            fault: done.fault,
        })
    }

    /// How many lines `step` may print through one rate limit: an exit
    /// prints a line per piece of work it drops (one-way transactions
    /// queued on its nodes, a transaction on a thread's stack, ...): as
    /// many as its debug text has such lines, and a few more.
    fn expected_lines(&self, step: &Step) -> u32 {
        match (&step.command, &self.children[step.pid.index()].last_state) {
            (Command::Exit, Some(text)) => {
                2 + text.lines().filter(|l| l.contains("transaction")).count() as u32
            }
            _ => 0,
        }
    }

    /// Runs the step's command in its process, on its thread (`exit`: the
    /// process closes the device and exits; nothing for a process that
    /// has exited).
    fn command(&mut self, s: usize, step: &Step) -> Result<CommandDone, String> {
        let k = step.pid.index();
        let mut done = CommandDone {
            ret: WireRet::Skipped,
            ee: None,
            release: None,
            notes: Vec::new(),
            fault: None,
        };
        if !self.children[k].alive {
            return Ok(done);
        }
        if step.command == Command::Exit {
            done.release = Some(self.close(k)?);
            done.ret = WireRet::Ok;
            return Ok(done);
        }
        let fail_nth = self.cfg.traces[self.index]
            .fail_nth
            .iter()
            .find(|f| f.step == s)
            .map(|f| f.nth);
        let request = Request::Run {
            tid: step.tid.0,
            command: step.command.to_string(),
            pids: self.children.iter().map(|c| c.pid).collect(),
            fail_nth,
        };
        let reply = self.children[k].ask(&request)?;
        done.notes = reply
            .notes
            .into_iter()
            .map(|n| format!("p{k}: {n}"))
            .collect();
        done.ret = reply.ret.ok_or("no result for a command")?;
        done.ee = reply.ee;
        done.fault = fail_nth
            .zip(reply.fault_injected)
            .map(|(nth, injected)| Fault { nth, injected });
        Ok(done)
    }

    /// Every live process drains, in order: what each read.
    fn drain(&mut self, notes: &mut Vec<String>) -> Result<Vec<Vec<WireBr>>, String> {
        let mut reads = vec![Vec::new(); self.children.len()];
        for (j, child) in self.children.iter_mut().enumerate() {
            if child.alive {
                let reply = child.ask(&Request::Drain)?;
                reads[j] = reply.reads;
                notes.extend(reply.notes.into_iter().map(|n| format!("p{j} drain: {n}")));
            }
        }
        Ok(reads)
    }

    /// Each process's state: its debug text when it is alive (`=` when
    /// unchanged since the last step): its pid's file, or, for a program
    /// with several opens by one task, its part of the global state file
    /// ([`TraceRun::texts_from_state`]).
    fn proc_states(&mut self) -> Result<Vec<WireProc>, String> {
        let texts = if self.from_state {
            self.texts_from_state()?
        } else {
            self.children
                .iter()
                .map(|child| {
                    child.alive.then(|| {
                        let path = self.devices.proc_state_path(child.pid);
                        std::fs::read_to_string(&path)
                            .unwrap_or_else(|e| format!("binder-exec: read {path}: {e}\n"))
                    })
                })
                .collect()
        };
        let mut procs = Vec::new();
        for (child, text) in self.children.iter_mut().zip(texts) {
            let state = text.map(|text| {
                if child.last_state.as_deref() == Some(text.as_str()) {
                    "=".to_string()
                } else {
                    child.last_state = Some(text.clone());
                    text
                }
            });
            procs.push(WireProc {
                pid: child.pid,
                alive: child.alive,
                state,
            });
        }
        Ok(procs)
    }

    /// Each live process's debug text cut from the driver's global state
    /// file, for a program with several opens by one task: there a pid's
    /// file is no process's own. It prints every process of the pid
    /// (binder.c:6939-6951, C `proc_show`; rust_binder_main.rs:588-599,
    /// `get_procs_with_pid`), and it is the pid's first open's: made at
    /// the first open of a pid only (binder.c:6121-6151, `existing_pid`;
    /// rust_binder_main.rs:393-397, `EEXIST`), removed at that open's
    /// release (binder.c:6199-6203; process.rs:1725) while the others
    /// live on.
    ///
    /// One read of the state file prints every process once, as reading
    /// each pid's file does when every pid has one open (C's printing may
    /// queue node work, see `compare`; the model prints each live process
    /// once a step too). The file holds every device's processes: a
    /// process's block starts at its `proc <pid>` line, and the trace's are
    /// those of its device's `context` line. The blocks of one pid are in
    /// the driver's list order, given to the pid's opens by it: C's
    /// `binder_procs` has the last opened first (`hlist_add_head`,
    /// binder.c:6118), Rust's `all_procs` the first opened first
    /// (`register_process` pushes at the end, context.rs:86). Each text is
    /// `binder proc state:` and the block, as a pid's file prints one
    /// process. A block that lists the `t0` of another open of its pid
    /// (each open's `t0` is its serving thread, known to the driver from
    /// the open's `BC_ENTER_LOOPER` until a `thread-exit`) stops the trace:
    /// the order is not the one assumed.
    fn texts_from_state(&self) -> Result<Vec<Option<String>>, String> {
        let path = self.devices.state_path();
        let mut texts: Vec<Option<String>> = vec![None; self.children.len()];
        let state = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                for (k, child) in self.children.iter().enumerate() {
                    if child.alive {
                        texts[k] = Some(format!("binder-exec: read {path}: {e}\n"));
                    }
                }
                return Ok(texts);
            }
        };
        let blocks = crate::debugfs::proc_blocks(&state, self.devices.name(self.index));
        let live: Vec<Option<(i32, i32)>> = self
            .children
            .iter()
            .map(|c| c.alive.then_some((c.pid, c.tid)))
            .collect();
        texts_of_blocks(&blocks, &live, self.devices.driver).map_err(|e| format!("{path}: {e}"))
    }

    /// Process `k` unmaps and closes its Binder file, and its serving
    /// thread ends; the task's OS process exits with its last open (and is
    /// waited for then). Then the driver's deferred release is waited for.
    fn close(&mut self, k: usize) -> Result<Release, String> {
        let child = &mut self.children[k];
        child.ask(&Request::Exit)?;
        child.alive = false;
        child.last_state = None;
        let pid = child.pid;
        if !self.children.iter().any(|c| c.alive && c.pid == pid) {
            sys::waitpid(pid).map_err(|e| format!("waitpid {pid}: {e}"))?;
        }
        self.wait_release(pid)
    }

    /// Waits until the driver has run the deferred release of `pid`.
    ///
    /// C: `binder_deferred_release` ends with `binder_proc_dec_tmpref`,
    /// which frees the proc (`binder_free_proc`, counted as a deleted
    /// `proc` in debugfs `stats`) once nothing else holds it; the release
    /// is over when the global "proc: active N" line counts only the files
    /// still open (the opens, not the tasks). Rust: the process leaves
    /// binderfs's `binder_logs/state` at the start of `deferred_release`;
    /// its end is not visible, so the executor waits for that and then
    /// for a short settle time. When other opens of the pid are still open
    /// the pid stays in the file: the wait is for the number of its
    /// `proc <pid>` blocks to drop to theirs (without them it is for the
    /// pid to leave the file, node lines included, as before).
    fn wait_release(&mut self, pid: i32) -> Result<Release, String> {
        let open = self.children.iter().filter(|c| c.alive).count();
        let others = self
            .children
            .iter()
            .filter(|c| c.alive && c.pid == pid)
            .count();
        let context = self.devices.name(self.index).to_string();
        let t0 = sys::boottime_us();
        let deadline = t0 + self.cfg.release_timeout_ms * 1000;
        // New log records are followed from here on, without taking them
        // from the log the step reads.
        let kmsg = sys::open_kmsg_at_end().ok();
        let (signal, done) = match self.devices.driver {
            Driver::C => loop {
                let active = std::fs::read_to_string("/sys/kernel/debug/binder/stats")
                    .ok()
                    .and_then(|s| crate::debugfs::active_procs(&s));
                if active == Some(open) {
                    // The count drops (binder_free_proc's
                    // binder_stats_deleted, binder.c:5342) just before the
                    // last of the release, which frees the descriptor map
                    // (5343): a report of it (KASAN) comes after.
                    sys::wait_log_quiet(
                        kmsg.as_ref(),
                        Duration::from_millis(5),
                        Duration::from_secs(5),
                    );
                    break (format!("debugfs stats: proc active {open}"), true);
                }
                if sys::boottime_us() > deadline {
                    break (
                        format!("debugfs stats: proc active {active:?}, expected {open}"),
                        false,
                    );
                }
                std::thread::sleep(Duration::from_micros(200));
            },
            Driver::Rust => {
                let needle = format!("proc {pid}\n");
                loop {
                    let state = std::fs::read_to_string("/dev/binderfs/binder_logs/state")
                        .unwrap_or_default();
                    let gone = if others == 0 {
                        !state.contains(&needle)
                    } else {
                        crate::debugfs::proc_blocks(&state, &context)
                            .iter()
                            .filter(|(p, _)| *p == pid)
                            .count()
                            <= others
                    };
                    if gone {
                        // The release leaves the list before it cancels the
                        // process's work, which logs (deferred_release,
                        // process.rs:1420 then 1480): wait until the log has
                        // been quiet for four times as long as it took to
                        // get here, at least 20 ms, so that a slow kernel
                        // (KASAN, lockdep) logs within the step too.
                        let quiet = (Duration::from_micros(sys::boottime_us() - t0) * 4)
                            .max(Duration::from_millis(20));
                        let waited =
                            sys::wait_log_quiet(kmsg.as_ref(), quiet, Duration::from_secs(5));
                        let left = if others == 0 {
                            format!("without proc {pid}")
                        } else {
                            format!("with {others} proc {pid}")
                        };
                        break (
                            format!(
                                "binder_logs/state {left}, then {} ms ({} ms quiet)",
                                waited.as_millis(),
                                quiet.as_millis()
                            ),
                            true,
                        );
                    }
                    if sys::boottime_us() > deadline {
                        break (
                            format!("binder_logs/state still lists proc {pid} (open {others})"),
                            false,
                        );
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        };
        Ok(Release {
            signal,
            us: sys::boottime_us() - t0,
            done,
        })
    }
}

/// Gives each live process its block of the state file
/// ([`TraceRun::texts_from_state`]): `blocks` are the device's, in the
/// file's order, `live[k]` the pid and `t0` thread id of process `k` if it
/// is alive. The blocks of a pid go to its live opens (in process order,
/// which is their open order) in the driver's list order: C's last opened
/// first, Rust's first opened first. An error when a pid has not as many
/// blocks as live opens, or when a block lists another open's `t0`.
fn texts_of_blocks(
    blocks: &[(i32, String)],
    live: &[Option<(i32, i32)>],
    driver: Driver,
) -> Result<Vec<Option<String>>, String> {
    let mut texts: Vec<Option<String>> = vec![None; live.len()];
    for (k, open) in live.iter().enumerate() {
        let Some((pid, _)) = *open else { continue };
        if texts[k].is_some() {
            continue;
        }
        let mut opens: Vec<usize> = (0..live.len())
            .filter(|&j| live[j].is_some_and(|(p, _)| p == pid))
            .collect();
        if driver == Driver::C {
            opens.reverse();
        }
        let mine: Vec<&str> = blocks
            .iter()
            .filter(|(p, _)| *p == pid)
            .map(|(_, b)| b.as_str())
            .collect();
        if mine.len() != opens.len() {
            return Err(format!(
                "{} processes of pid {pid}, {} of its opens are open",
                mine.len(),
                opens.len()
            ));
        }
        for (&j, block) in opens.iter().zip(&mine) {
            for &other in opens.iter().filter(|&&o| o != j) {
                let tid = live[other].map_or(0, |(_, t)| t);
                let t0 = format!("thread {tid}:");
                if block.lines().any(|l| l.trim_start().starts_with(&t0)) {
                    return Err(format!(
                        "the block of pid {pid} given to p{j} lists p{other}'s t0 ({t0}): its processes are not in the order assumed"
                    ));
                }
            }
            texts[j] = Some(format!("binder proc state:\n{block}"));
        }
    }
    Ok(texts)
}

/// Forks a task of a trace with euid `euid`, which opens `device` `opens`
/// times ([`child::task_main`]): one [`Child`] per open, in order, each
/// once it has answered its first [`Reply`] (all set up).
fn spawn_task(device: &str, euid: u32, opens: usize) -> Result<Vec<Child>, String> {
    let mut parent_ends = Vec::new();
    let mut child_ends = Vec::new();
    for _ in 0..opens {
        let (p, c) = sys::socketpair().map_err(|e| format!("socketpair: {e}"))?;
        parent_ends.push(p);
        child_ends.push(c);
    }
    let pid = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if pid == 0 {
        drop(parent_ends);
        child::task_main(child_ends, device, euid);
    }
    drop(child_ends);
    let mut children = Vec::new();
    let mut failed = None;
    for writer in parent_ends {
        let reader = match writer.try_clone() {
            Ok(r) => BufReader::new(r),
            Err(e) => {
                failed = Some(format!("dup a socket: {e}"));
                break;
            }
        };
        let mut child = Child {
            pid,
            tid: 0,
            writer,
            reader,
            alive: true,
            last_state: None,
        };
        let mut first = String::new();
        let reply = match child.reader.read_line(&mut first) {
            Ok(_) => serde_json::from_str::<Reply>(&first)
                .map_err(|e| format!("pid {pid} did not start: {first:?} ({e})")),
            Err(e) => Err(format!("pid {pid}: {e}")),
        };
        match reply {
            Ok(Reply {
                error: None, tid, ..
            }) => {
                child.tid = tid;
                children.push(child);
            }
            Ok(Reply { error: Some(e), .. }) => {
                failed = Some(format!("pid {pid}: {e}"));
                break;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failed {
        // Its other opens' sockets close with `children`: the task exits.
        drop(children);
        let _ = sys::waitpid(pid);
        return Err(e);
    }
    Ok(children)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two opens of pid 70 (`p0`, `t0` 70, and `p2`, `t0` 72) and `p1`,
    /// pid 71, as each driver's state file lists them.
    #[test]
    fn a_pids_blocks_go_to_its_opens_in_each_drivers_order() {
        let block = |pid: i32, tid: i32| {
            (
                pid,
                format!("proc {pid}\ncontext b0\n  thread {tid}: l 12 need_return 0 tr 0\n"),
            )
        };
        let live = [Some((70, 70)), Some((71, 71)), Some((70, 72))];
        // C: binder_procs, the last opened first (p1 opened after p0 and
        // p2, which its task opened first).
        let c = [block(71, 71), block(70, 72), block(70, 70)];
        let texts = texts_of_blocks(&c, &live, Driver::C).unwrap();
        let t0 = |t: &Option<String>| {
            let p = crate::debugfs::parse(t.as_deref().unwrap(), Driver::C);
            assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
            t.as_deref().unwrap().lines().nth(3).unwrap().to_string()
        };
        assert!(texts[0]
            .as_deref()
            .unwrap()
            .starts_with("binder proc state:\nproc 70\n"));
        assert_eq!(t0(&texts[0]), "  thread 70: l 12 need_return 0 tr 0");
        assert_eq!(t0(&texts[2]), "  thread 72: l 12 need_return 0 tr 0");
        // Rust: all_procs, the first opened first.
        let rust = [block(70, 70), block(70, 72), block(71, 71)];
        let texts = texts_of_blocks(&rust, &live, Driver::Rust).unwrap();
        assert_eq!(t0(&texts[0]), "  thread 70: l 12 need_return 0 tr 0");
        assert_eq!(t0(&texts[1]), "  thread 71: l 12 need_return 0 tr 0");
        // The other order is caught by the threads...
        let e = texts_of_blocks(&rust, &live, Driver::C).unwrap_err();
        assert!(e.contains("not in the order assumed"), "{e}");
        // ... a pid with a block more or less than its opens too, and an
        // open that has exited gets none.
        assert!(texts_of_blocks(&c[..2], &live, Driver::C).is_err());
        let after_exit = [Some((70, 70)), Some((71, 71)), None];
        let texts =
            texts_of_blocks(&[block(70, 70), block(71, 71)], &after_exit, Driver::C).unwrap();
        assert!(texts[0].is_some() && texts[1].is_some() && texts[2].is_none());
        assert!(texts_of_blocks(&rust, &after_exit, Driver::Rust).is_err());
    }
}
