//! Booting a kernel and an initramfs in QEMU (TCG: nested KVM is not
//! available where this runs), with the console on the first serial port
//! and the executor's JSON lines on the second, each written to a file.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to boot.
#[derive(Clone, Debug)]
pub struct Boot {
    /// The QEMU binary (`qemu-system-x86_64`, looked up in `PATH`).
    pub qemu: PathBuf,
    /// The kernel image.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initrd: PathBuf,
    /// The kernel command line.
    pub append: String,
    /// Memory in MiB.
    pub memory_mb: u32,
    /// Virtual time from an instruction counter (`-icount
    /// shift=N,sleep=off`): the guest's sleeps then take no host time.
    pub icount_shift: Option<u32>,
    /// Where the two serial ports' files go.
    pub dir: PathBuf,
    /// When to give up.
    pub timeout: Duration,
}

/// What a boot left.
#[derive(Clone, Debug)]
pub struct Booted {
    /// The first serial port (kernel console, the executor's stderr).
    pub console: String,
    /// The second serial port (the executor's JSON lines).
    pub results: String,
    /// From QEMU's start to its exit.
    pub elapsed: Duration,
    /// QEMU's exit status.
    pub status: std::process::ExitStatus,
}

/// Why a boot failed.
#[derive(Debug)]
pub enum BootError {
    /// QEMU could not be started.
    NoQemu {
        /// The binary tried.
        qemu: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// An input is missing.
    Missing(PathBuf),
    /// QEMU ran past the timeout and was killed.
    Timeout {
        /// The timeout.
        after: Duration,
        /// The console's last lines.
        console_tail: String,
        /// The results so far.
        results: String,
    },
    /// Reading or writing the files around the boot failed.
    Io(String),
}

impl fmt::Display for BootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootError::NoQemu { qemu, error } => write!(
                f,
                "cannot run {} ({error}): install qemu-system-x86 (ci/kernel-vm.sh does)",
                qemu.display()
            ),
            BootError::Missing(p) => write!(f, "{} does not exist", p.display()),
            BootError::Timeout {
                after,
                console_tail,
                ..
            } => write!(
                f,
                "the VM did not power off within {:.0} s; the console's last lines:\n{console_tail}",
                after.as_secs_f64()
            ),
            BootError::Io(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for BootError {}

/// The last `n` lines of a text.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn read_from(path: &Path, offset: &mut u64) -> String {
    let mut out = Vec::new();
    if let Ok(mut f) = File::open(path) {
        if f.seek(SeekFrom::Start(*offset)).is_ok() && f.read_to_end(&mut out).is_ok() {
            *offset += out.len() as u64;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Boot {
    /// QEMU's arguments.
    pub fn args(&self) -> Vec<String> {
        let console = self.dir.join("console.log");
        let results = self.dir.join("results.jsonl");
        let mut a: Vec<String> = vec![
            "-accel".into(),
            "tcg".into(),
            "-cpu".into(),
            "max".into(),
            "-m".into(),
            self.memory_mb.to_string(),
            "-nodefaults".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-serial".into(),
            format!("file:{}", console.display()),
            "-serial".into(),
            format!("file:{}", results.display()),
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-initrd".into(),
            self.initrd.display().to_string(),
            "-append".into(),
            self.append.clone(),
        ];
        if let Some(shift) = self.icount_shift {
            a.push("-icount".into());
            a.push(format!("shift={shift},sleep=off"));
        }
        a
    }

    /// Boots and waits for QEMU to exit; `on_line` sees each JSON line as it
    /// arrives.
    pub fn run(&self, on_line: &mut dyn FnMut(&str)) -> Result<Booted, BootError> {
        for p in [&self.kernel, &self.initrd] {
            if !p.exists() {
                return Err(BootError::Missing(p.clone()));
            }
        }
        let console = self.dir.join("console.log");
        let results = self.dir.join("results.jsonl");
        for p in [&console, &results] {
            File::create(p).map_err(|e| BootError::Io(format!("create {}: {e}", p.display())))?;
        }
        let start = Instant::now();
        let mut child = Command::new(&self.qemu)
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| BootError::NoQemu {
                qemu: self.qemu.clone(),
                error,
            })?;
        let mut offset = 0u64;
        let mut partial = String::new();
        let mut all = String::new();
        let mut feed = |chunk: String, partial: &mut String, all: &mut String| {
            all.push_str(&chunk);
            partial.push_str(&chunk);
            while let Some(i) = partial.find('\n') {
                let line: String = partial.drain(..=i).collect();
                on_line(line.trim_end_matches(['\r', '\n']));
            }
        };
        let status = loop {
            let chunk = read_from(&results, &mut offset);
            feed(chunk, &mut partial, &mut all);
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(BootError::Io(format!("wait for QEMU: {e}"))),
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                let text = std::fs::read_to_string(&console).unwrap_or_default();
                return Err(BootError::Timeout {
                    after: self.timeout,
                    console_tail: tail(&text, 40),
                    results: all,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let elapsed = start.elapsed();
        let chunk = read_from(&results, &mut offset);
        feed(chunk, &mut partial, &mut all);
        if !partial.is_empty() {
            on_line(partial.trim_end_matches('\r'));
        }
        let mut console_text = std::fs::read_to_string(&console).unwrap_or_default();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        if !err.trim().is_empty() {
            console_text.push_str("\n[qemu stderr]\n");
            console_text.push_str(&err);
        }
        Ok(Booted {
            console: console_text,
            results: all,
            elapsed,
            status,
        })
    }
}
