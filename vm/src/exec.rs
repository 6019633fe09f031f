//! The executor: PID 1 of the VM. It mounts what it needs, makes one Binder
//! device per trace (the C module's `devices=`, or binderfs), then runs
//! every trace on its own device, as `docs/commands.md` says: one forked
//! process per program process, each told by the executor over a socket
//! which command to run, when to drain its work and when to close. After
//! every command it records the ioctl's result, every `BR_*` each process
//! read, the kernel log lines and each process's state in the driver's
//! debug files, and prints them as JSON lines ([`crate::wire::Record`]).

use crate::abi::{self, br_nr, FlatObject, TransactionData};
use crate::klog::{self, Class, Limit, RateLimits, Window};
use crate::program;
use crate::sys::{self, Mapping};
use crate::wire::{
    Config, Driver, Pace, Record, Release, TraceFile, WireBr, WireObject, WireProc, WireRet,
};
use idpool::driver::{Command, Object, RefCmd};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

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
    /// Run this command (its text form).
    Run(String),
    /// Read and answer everything the driver has for it.
    Drain,
    /// Unmap and close the Binder file, then exit.
    Exit,
}

/// A process's answer.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Reply {
    /// Its pid (in the first answer, after opening the device).
    pid: i32,
    /// The command's result.
    ret: Option<WireRet>,
    /// What a drain read.
    reads: Vec<WireBr>,
    /// Anything off.
    notes: Vec<String>,
    /// Set when it could not do what it was asked at all.
    error: Option<String>,
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
        match cfg.driver {
            Driver::C => {
                let module = cfg.module.as_deref().ok_or("the C driver needs a module")?;
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
            Driver::Rust => {
                let control = File::open("/dev/binderfs/binder-control")
                    .map_err(|e| format!("open /dev/binderfs/binder-control: {e}"))?;
                for n in &names {
                    sys::binderfs_add(&control, n)
                        .map_err(|e| format!("BINDER_CTL_ADD {n}: {e}"))?;
                }
                Ok(Devices {
                    driver: Driver::Rust,
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
    if cfg.driver == Driver::Rust {
        mount_all(Driver::Rust)?;
    }
    let devices = Devices::make(&cfg)?;
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

/// One process of the running trace, seen from the executor.
struct Child {
    pid: i32,
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
    children: Vec<Child>,
}

type StepError = (String, Option<usize>);

impl TraceRun<'_> {
    fn run(&mut self, tf: &TraceFile) -> Result<(), StepError> {
        let t0 = sys::boottime_us();
        self.pacer.incomplete = false;
        let text = std::fs::read_to_string(&tf.path)
            .map_err(|e| (format!("read {}: {e}", tf.path), None))?;
        let program = program::parse(&text).map_err(|e| (e, None))?;
        let device = self.devices.paths[self.index].clone();
        let _ = klog_lines();
        for &euid in &program.euids {
            let child = spawn(&device, euid).map_err(|e| (e, None))?;
            self.children.push(child);
        }
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
            let record = self
                .step(s, &step.command, step.pid.index())
                .map_err(|e| (e, Some(s)))?;
            self.out.emit(&record);
        }
        let flush = self.flush().map_err(|e| (e, None))?;
        for k in 0..self.children.len() {
            if self.children[k].alive {
                self.close(k).map_err(|e| (e, None))?;
            }
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
        self.children.push(spawn(&device, 0)?);
        let k = self.children.len() - 1;
        let probe = &mut self.children[k];
        let reply = probe.ask(&Request::Run("send 1".into()))?;
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
                // Closing its socket makes it exit (the kernel then closes
                // its Binder file).
                let _ = self.children[k].writer.shutdown(std::net::Shutdown::Both);
                let _ = sys::waitpid(pid);
                self.children[k].alive = false;
                let _ = self.wait_release(pid);
            }
        }
        let _ = klog_lines();
    }

    fn step(&mut self, s: usize, command: &Command, k: usize) -> Result<Record, String> {
        // An exit prints a line per piece of work it drops (one-way
        // transactions queued on its nodes, ...): as many as its debug
        // text has pending lines, and a few more.
        let expect = match (command, &self.children[k].last_state) {
            (Command::Exit, Some(text)) => {
                2 + text.lines().filter(|l| l.contains("pending")).count() as u32
            }
            _ => 0,
        };
        let paced_us = self.pacer.before_command(expect);
        let t0 = sys::boottime_us();
        let mut notes = Vec::new();
        let mut release = None;
        let ret = if !self.children[k].alive {
            WireRet::Skipped
        } else if *command == Command::Exit {
            release = Some(self.close(k)?);
            WireRet::Ok
        } else {
            let reply = self.children[k].ask(&Request::Run(command.to_string()))?;
            notes.extend(reply.notes.into_iter().map(|n| format!("p{k}: {n}")));
            reply.ret.ok_or("no result for a command")?
        };
        let mut reads = vec![Vec::new(); self.children.len()];
        for (j, child) in self.children.iter_mut().enumerate() {
            if child.alive {
                let reply = child.ask(&Request::Drain)?;
                reads[j] = reply.reads;
                notes.extend(reply.notes.into_iter().map(|n| format!("p{j} drain: {n}")));
            }
        }
        let log = klog_lines();
        self.pacer.observe(&log);
        let full_limits = self.pacer.full();
        let mut procs = Vec::new();
        for child in &mut self.children {
            let state = if child.alive {
                let path = self.devices.proc_state_path(child.pid);
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| format!("binder-exec: read {path}: {e}\n"));
                if child.last_state.as_deref() == Some(text.as_str()) {
                    Some("=".to_string())
                } else {
                    child.last_state = Some(text.clone());
                    Some(text)
                }
            } else {
                None
            };
            procs.push(WireProc {
                pid: child.pid,
                alive: child.alive,
                state,
            });
        }
        Ok(Record::Step {
            trace: self.index,
            step: s,
            ret,
            reads,
            log,
            procs,
            release,
            paced_ms: paced_us / 1000,
            us: sys::boottime_us() - t0,
            full_limits,
            notes,
        })
    }

    /// Process `k` unmaps and closes its Binder file and exits; then the
    /// driver's deferred release is waited for.
    fn close(&mut self, k: usize) -> Result<Release, String> {
        let child = &mut self.children[k];
        child.ask(&Request::Exit)?;
        sys::waitpid(child.pid).map_err(|e| format!("waitpid {}: {e}", child.pid))?;
        child.alive = false;
        child.last_state = None;
        let pid = child.pid;
        self.wait_release(pid)
    }

    /// Waits until the driver has run the deferred release of `pid`.
    ///
    /// C: `binder_deferred_release` ends with `binder_proc_dec_tmpref`,
    /// which frees the proc (`binder_free_proc`, counted as a deleted
    /// `proc` in debugfs `stats`) once nothing else holds it; the release
    /// is over when the global "proc: active N" line counts only the files
    /// still open. Rust: the process leaves binderfs's `binder_logs/state`
    /// at the start of `deferred_release`; its end is not visible, so the
    /// executor waits for that and then for a short settle time.
    fn wait_release(&mut self, pid: i32) -> Result<Release, String> {
        let open = self.children.iter().filter(|c| c.alive).count();
        let t0 = sys::boottime_us();
        let deadline = t0 + self.cfg.release_timeout_ms * 1000;
        let (signal, done) = match self.devices.driver {
            Driver::C => loop {
                let active = std::fs::read_to_string("/sys/kernel/debug/binder/stats")
                    .ok()
                    .and_then(|s| crate::debugfs::active_procs(&s));
                if active == Some(open) {
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
                    if !state.contains(&needle) {
                        std::thread::sleep(Duration::from_millis(20));
                        break (
                            format!("binder_logs/state without proc {pid}, then 20 ms"),
                            true,
                        );
                    }
                    if sys::boottime_us() > deadline {
                        break (format!("binder_logs/state still lists proc {pid}"), false);
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

/// Forks process `euid` of a trace: it opens `device` and answers its
/// first [`Reply`] once it is set up.
fn spawn(device: &str, euid: u32) -> Result<Child, String> {
    let (parent_end, child_end) = sys::socketpair().map_err(|e| format!("socketpair: {e}"))?;
    let pid = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if pid == 0 {
        drop(parent_end);
        child_main(child_end, device, euid);
    }
    drop(child_end);
    let reader = BufReader::new(
        parent_end
            .try_clone()
            .map_err(|e| format!("dup a socket: {e}"))?,
    );
    let mut child = Child {
        pid,
        writer: parent_end,
        reader,
        alive: true,
        last_state: None,
    };
    let mut first = String::new();
    child
        .reader
        .read_line(&mut first)
        .map_err(|e| format!("pid {pid}: {e}"))?;
    let reply: Reply = serde_json::from_str(&first)
        .map_err(|e| format!("pid {pid} did not start: {first:?} ({e})"))?;
    if let Some(e) = reply.error {
        let _ = sys::waitpid(pid);
        return Err(format!("pid {pid}: {e}"));
    }
    Ok(child)
}

/// A trace's process: set up as `docs/commands.md` says, then serve the
/// executor's requests until told to exit.
fn child_main(sock: UnixStream, device: &str, euid: u32) -> ! {
    let mut writer = sock.try_clone().expect("dup a socket");
    let mut reader = BufReader::new(sock);
    let mut send = |reply: &Reply| {
        let mut line = serde_json::to_string(reply).expect("replies serialise");
        line.push('\n');
        if writer.write_all(line.as_bytes()).is_err() {
            sys::exit_now(3);
        }
    };
    let mut proc = match Proc::open(device, euid) {
        Ok(p) => p,
        Err(e) => {
            send(&Reply {
                error: Some(e),
                ..Reply::default()
            });
            sys::exit_now(1);
        }
    };
    send(&Reply {
        pid: sys::getpid(),
        ..Reply::default()
    });
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => sys::exit_now(2),
            Ok(_) => {}
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply {
                error: Some(format!("bad request {line:?}: {e}")),
                ..Reply::default()
            },
            Ok(Request::Run(text)) => proc.run(&text),
            Ok(Request::Drain) => proc.drain(),
            Ok(Request::Exit) => {
                drop(proc);
                send(&Reply::default());
                sys::exit_now(0);
            }
        };
        send(&reply);
    }
}

/// A process's Binder file, its mapping and what it keeps between
/// commands.
struct Proc {
    // Field order: the mapping is dropped (unmapped) before the file is
    // closed; the driver releases the process when both are gone.
    map: Mapping,
    file: File,
    /// Answers to the last read, written with the next one.
    answers: Vec<u8>,
    /// Received transaction buffers not yet freed, oldest first.
    buffers: VecDeque<u64>,
}

fn errno_of(e: &io::Error) -> WireRet {
    WireRet::Errno(e.raw_os_error().unwrap_or(-1))
}

impl Proc {
    fn open(device: &str, euid: u32) -> Result<Proc, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(device)
            .map_err(|e| format!("open {device}: {e}"))?;
        let map = Mapping::new(&file, MAP_SIZE).map_err(|e| format!("mmap {device}: {e}"))?;
        let version = sys::binder_version(&file).map_err(|e| format!("BINDER_VERSION: {e}"))?;
        if version != abi::BINDER_CURRENT_PROTOCOL_VERSION {
            return Err(format!("BINDER_VERSION says {version}"));
        }
        let mut w = Vec::new();
        abi::push_cmd(&mut w, abi::BC_ENTER_LOOPER, &[]);
        sys::write_read(&file, &w, 0)
            .result
            .map_err(|e| format!("BC_ENTER_LOOPER: {e}"))?;
        if euid != 0 {
            sys::setresuid(euid, euid, euid).map_err(|e| format!("setresuid({euid}): {e}"))?;
        }
        Ok(Proc {
            map,
            file,
            answers: Vec::new(),
            buffers: VecDeque::new(),
        })
    }

    fn write(&self, w: &[u8]) -> (WireRet, Vec<String>) {
        let r = sys::write_read(&self.file, w, 0);
        let mut notes = Vec::new();
        if r.result.is_ok() && r.write_consumed != w.len() as u64 {
            notes.push(format!(
                "write_consumed {} of {} bytes",
                r.write_consumed,
                w.len()
            ));
        }
        let ret = match &r.result {
            Ok(()) => WireRet::Ok,
            Err(e) => errno_of(e),
        };
        (ret, notes)
    }

    fn run(&mut self, text: &str) -> Reply {
        let words: Vec<&str> = text.split_whitespace().collect();
        let command = match Command::parse_words(&words) {
            Ok(c) => c,
            Err(e) => {
                return Reply {
                    error: Some(format!("bad command {text:?}: {e}")),
                    ..Reply::default()
                }
            }
        };
        let mut w = Vec::new();
        let (ret, notes) = match command {
            Command::SetManager => (
                sys::set_context_mgr(&self.file).map_or_else(|e| errno_of(&e), |()| WireRet::Ok),
                Vec::new(),
            ),
            Command::NodeInfo(h) => (
                sys::node_info_for_ref(&self.file, h).map_or_else(
                    |e| errno_of(&e),
                    |(strong, weak)| WireRet::NodeInfo { strong, weak },
                ),
                Vec::new(),
            ),
            Command::Ref(cmd, h) => {
                let code = match cmd {
                    RefCmd::IncRefs => abi::BC_INCREFS,
                    RefCmd::Acquire => abi::BC_ACQUIRE,
                    RefCmd::Release => abi::BC_RELEASE,
                    RefCmd::DecRefs => abi::BC_DECREFS,
                };
                abi::push_cmd(&mut w, code, &h.to_le_bytes());
                self.write(&w)
            }
            Command::RequestDeath { handle, cookie } | Command::ClearDeath { handle, cookie } => {
                let code = if matches!(command, Command::RequestDeath { .. }) {
                    abi::BC_REQUEST_DEATH_NOTIFICATION
                } else {
                    abi::BC_CLEAR_DEATH_NOTIFICATION
                };
                let mut p = handle.to_le_bytes().to_vec();
                p.extend_from_slice(&cookie.to_le_bytes());
                abi::push_cmd(&mut w, code, &p);
                self.write(&w)
            }
            Command::Free => match self.buffers.pop_front() {
                None => (WireRet::Skipped, Vec::new()),
                Some(buffer) => {
                    abi::push_cmd(&mut w, abi::BC_FREE_BUFFER, &buffer.to_le_bytes());
                    self.write(&w)
                }
            },
            Command::Send { to, ref objects } => {
                let mut data = Vec::new();
                let mut offsets = Vec::new();
                for o in objects.iter().flat_map(Object::expand) {
                    offsets.extend_from_slice(&(data.len() as u64).to_le_bytes());
                    let flat = match o {
                        Object::Node { ptr, strong } => FlatObject {
                            kind: if strong {
                                abi::BINDER_TYPE_BINDER
                            } else {
                                abi::BINDER_TYPE_WEAK_BINDER
                            },
                            flags: 0,
                            value: ptr,
                            cookie: ptr,
                        },
                        Object::Handle { handle, strong } => FlatObject {
                            kind: if strong {
                                abi::BINDER_TYPE_HANDLE
                            } else {
                                abi::BINDER_TYPE_WEAK_HANDLE
                            },
                            flags: 0,
                            value: u64::from(handle),
                            cookie: 0,
                        },
                        Object::Nodes { .. } => unreachable!("runs are expanded"),
                    };
                    data.extend_from_slice(&flat.encode());
                }
                let tr = TransactionData {
                    target: u64::from(to),
                    flags: abi::TF_ONE_WAY,
                    data_size: data.len() as u64,
                    offsets_size: offsets.len() as u64,
                    buffer: data.as_ptr() as u64,
                    offsets: offsets.as_ptr() as u64,
                    ..TransactionData::default()
                };
                abi::push_cmd(&mut w, abi::BC_TRANSACTION, &tr.encode());
                // `data` and `offsets` live until after the ioctl.
                let r = self.write(&w);
                drop((data, offsets));
                r
            }
            Command::Exit => {
                return Reply {
                    error: Some("exit is a request of its own".into()),
                    ..Reply::default()
                }
            }
        };
        Reply {
            ret: Some(ret),
            notes,
            ..Reply::default()
        }
    }

    /// Reads until there is nothing left to read or answer. A read is made
    /// only when `poll` says there is work (the C driver logs every failed
    /// ioctl, `EAGAIN` included); pending answers with no work go in a
    /// write-only call.
    fn drain(&mut self) -> Reply {
        let mut reply = Reply::default();
        for _ in 0..1000 {
            let work = match sys::readable_now(&self.file) {
                Ok(w) => w,
                Err(e) => {
                    reply.notes.push(format!("poll: {e}"));
                    false
                }
            };
            if !work && self.answers.is_empty() {
                return reply;
            }
            let answers = std::mem::take(&mut self.answers);
            let r = sys::write_read(&self.file, &answers, if work { READ_SIZE } else { 0 });
            if let Err(e) = &r.result {
                reply.notes.push(format!(
                    "BINDER_WRITE_READ (write {} bytes, read {}): {e}",
                    answers.len(),
                    if work { READ_SIZE } else { 0 }
                ));
                if e.raw_os_error() != Some(libc::EAGAIN) {
                    return reply;
                }
            }
            match abi::split_returns(&r.read) {
                Ok(returns) => {
                    for ret in returns {
                        if let Some(br) = self.answer(&ret, &mut reply.notes) {
                            reply.reads.push(br);
                        }
                    }
                }
                Err(e) => {
                    reply.notes.push(e);
                    return reply;
                }
            }
        }
        reply.notes.push("still reading after 1000 reads".into());
        reply
    }

    /// Records one return and queues its answer (`BR_NOOP` is neither).
    fn answer(&mut self, ret: &abi::RawReturn, notes: &mut Vec<String>) -> Option<WireBr> {
        let code = ret.code;
        if abi::ioc_type(code) == b'r' && abi::ioc_nr(code) == br_nr::NOOP {
            return None;
        }
        let mut br = WireBr {
            br: abi::br_name(code).to_string(),
            code,
            args: Vec::new(),
            objects: None,
        };
        if abi::ioc_type(code) == b'r' && self.decode(&mut br, &ret.payload, notes).is_none() {
            notes.push(format!(
                "{} with a malformed payload {:?}",
                br.br, ret.payload
            ));
        }
        Some(br)
    }

    fn decode(&mut self, br: &mut WireBr, p: &[u8], notes: &mut Vec<String>) -> Option<()> {
        let code = br.code;
        match abi::ioc_nr(code) {
            br_nr::ERROR => br.args.push(u64::from(abi::u32_at(p, 0)?)),
            br_nr::INCREFS | br_nr::ACQUIRE | br_nr::RELEASE | br_nr::DECREFS => {
                let (ptr, cookie) = (abi::u64_at(p, 0)?, abi::u64_at(p, 8)?);
                br.args = vec![ptr, cookie];
                let done = match abi::ioc_nr(code) {
                    br_nr::INCREFS => Some(abi::BC_INCREFS_DONE),
                    br_nr::ACQUIRE => Some(abi::BC_ACQUIRE_DONE),
                    _ => None,
                };
                if let Some(done) = done {
                    abi::push_cmd(&mut self.answers, done, &p[..16]);
                }
            }
            br_nr::DEAD_BINDER => {
                let cookie = abi::u64_at(p, 0)?;
                br.args.push(cookie);
                abi::push_cmd(
                    &mut self.answers,
                    abi::BC_DEAD_BINDER_DONE,
                    &cookie.to_le_bytes(),
                );
            }
            br_nr::CLEAR_DEATH_NOTIFICATION_DONE => br.args.push(abi::u64_at(p, 0)?),
            br_nr::TRANSACTION | br_nr::REPLY => {
                let t = TransactionData::decode(p)?;
                br.args = vec![
                    t.target,
                    t.cookie,
                    u64::from(t.code),
                    u64::from(t.flags),
                    u64::from(t.sender_euid),
                    t.data_size,
                    t.offsets_size,
                ];
                let mut objects = Vec::new();
                for i in 0..(t.offsets_size / 8) {
                    let flat = self
                        .map
                        .read(t.offsets + i * 8, 8)
                        .and_then(|b| abi::u64_at(&b, 0))
                        .and_then(|off| self.map.read(t.buffer + off, abi::FLAT_OBJECT_SIZE))
                        .and_then(|b| FlatObject::decode(&b));
                    match flat {
                        Some(f) => objects.push(WireObject {
                            kind: f.kind,
                            flags: f.flags,
                            value: f.value,
                            cookie: f.cookie,
                        }),
                        None => notes.push(format!(
                            "object {i} of a transaction (buffer {:#x}, offsets {:#x}) is outside the mapping",
                            t.buffer, t.offsets
                        )),
                    }
                }
                br.objects = Some(objects);
                if abi::ioc_nr(code) == br_nr::TRANSACTION {
                    self.buffers.push_back(t.buffer);
                }
            }
            _ => {
                br.args = p
                    .chunks(8)
                    .map(|c| c.iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
                    .collect()
            }
        }
        Some(())
    }
}
