//! The executor's system calls, each wrapped once with its `unsafe` block
//! and the reason it is sound. Nothing else in the crate uses `unsafe`.
#![allow(unsafe_code)]

use crate::abi;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

/// `mount(2)`.
pub fn mount(source: &str, target: &str, fstype: &str, data: Option<&str>) -> io::Result<()> {
    let (s, t, f) = (cstr(source)?, cstr(target)?, cstr(fstype)?);
    let d = data.map(cstr).transpose()?;
    let dptr = d
        .as_ref()
        .map_or(std::ptr::null(), |d| d.as_ptr().cast::<libc::c_void>());
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // call (or NULL for no data), as mount(2) expects.
    check(unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), 0, dptr) }).map(drop)
}

/// `finit_module(2)` with these parameters and flags.
pub fn finit_module(fd: RawFd, params: &str, flags: libc::c_int) -> io::Result<()> {
    let p = cstr(params)?;
    // SAFETY: finit_module takes an fd, a NUL-terminated string that
    // outlives the call and flags; it writes no user memory.
    let ret = unsafe { libc::syscall(libc::SYS_finit_module, fd, p.as_ptr(), flags) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A fault for the calling thread's next Binder ioctl: its file
/// `/proc/thread-self/fail-nth`, opened beforehand, and the count to write
/// to it, as text.
struct Armed {
    file: std::fs::File,
    nth: Vec<u8>,
}

thread_local! {
    /// The fault [`arm_fail_nth`] set for this thread's next ioctl.
    static ARMED: std::cell::RefCell<Option<Armed>> = const { std::cell::RefCell::new(None) };
    /// What became of it: whether it was injected.
    static INJECTED: std::cell::RefCell<Option<io::Result<bool>>> =
        const { std::cell::RefCell::new(None) };
}

/// Makes the calling thread's next Binder ioctl fail its `nth` allocation
/// (slab or page; `fail-nth`, which counts every allocation of the task).
/// Everything that allocates is done here, before the count starts: the
/// file is opened and the number written out now; the ioctl then only
/// writes the count right before it and reads it back right after, with
/// `pwrite` and `pread` on that file, which allocate nothing.
pub fn arm_fail_nth(nth: u32) -> io::Result<()> {
    if nth == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "fail-nth counts allocations from 1",
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/thread-self/fail-nth")?;
    let armed = Armed {
        file,
        nth: nth.to_string().into_bytes(),
    };
    ARMED.with(|a| *a.borrow_mut() = Some(armed));
    INJECTED.with(|i| *i.borrow_mut() = None);
    Ok(())
}

/// Whether the fault [`arm_fail_nth`] set was injected (the ioctl made at
/// least that many allocations), `None` when no ioctl ran; the fault is
/// cleared either way.
pub fn disarm_fail_nth() -> Option<io::Result<bool>> {
    ARMED.with(|a| a.borrow_mut().take());
    INJECTED.with(|i| i.borrow_mut().take())
}

/// Runs `call` with the armed fault, if any: the count written just
/// before, read back and cleared just after.
fn with_fault<T>(call: impl FnOnce() -> T) -> T {
    use std::os::unix::fs::FileExt;
    let Some(armed) = ARMED.with(|a| a.borrow_mut().take()) else {
        return call();
    };
    if let Err(e) = armed.file.write_at(&armed.nth, 0) {
        INJECTED.with(|i| *i.borrow_mut() = Some(Err(e)));
        return call();
    }
    let out = call();
    let mut buf = [0u8; 16];
    let left = armed.file.read_at(&mut buf, 0).and_then(|n| {
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("").trim();
        text.parse::<u32>()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{text:?}: {e}")))
    });
    let cleared = armed.file.write_at(b"0", 0);
    let injected = left.and_then(|left| cleared.map(|_| left == 0));
    INJECTED.with(|i| *i.borrow_mut() = Some(injected));
    out
}

/// `/dev/kmsg`, read without blocking from its end: each read returns a
/// log record printed after the open, or `EAGAIN`. Reading it takes
/// nothing from what `klog_read_clear` reads.
pub fn open_kmsg_at_end() -> io::Result<std::fs::File> {
    use std::io::Seek;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")?;
    f.seek(io::SeekFrom::End(0))?;
    Ok(f)
}

/// Waits until `kmsg` (from [`open_kmsg_at_end`]) has had no new record
/// for `quiet`, or `max` passed; returns how long it waited. Without a
/// `kmsg`, sleeps `quiet`.
pub fn wait_log_quiet(kmsg: Option<&std::fs::File>, quiet: Duration, max: Duration) -> Duration {
    use std::io::Read;
    let start = std::time::Instant::now();
    let Some(mut kmsg) = kmsg else {
        std::thread::sleep(quiet);
        return quiet;
    };
    let mut last = start;
    let mut buf = [0u8; 8192];
    loop {
        // One record a read; drain what is there.
        while let Ok(n) = kmsg.read(&mut buf) {
            if n == 0 || start.elapsed() >= max {
                break;
            }
            last = std::time::Instant::now();
        }
        let now = std::time::Instant::now();
        if now - last >= quiet || now - start >= max {
            return now - start;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `syslog(2)` action 4 (read all and clear): the kernel log since the
/// last clear, as text.
pub fn klog_read_clear() -> io::Result<String> {
    // SAFETY: action 10 (SYSLOG_ACTION_SIZE_BUFFER) ignores the buffer.
    let size = check(unsafe { libc::klogctl(10, std::ptr::null_mut(), 0) })?;
    let mut buf = vec![0u8; size.max(4096) as usize];
    // SAFETY: the buffer is valid for writes of its whole length, which is
    // the length passed; the kernel writes at most that many bytes.
    let n = check(unsafe {
        libc::klogctl(
            4,
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len() as libc::c_int,
        )
    })?;
    buf.truncate(n as usize);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `reboot(2)`: only returns on failure.
pub fn reboot(cmd: libc::c_int) -> io::Error {
    // SAFETY: reboot(2) takes a command number; it touches no user memory.
    unsafe { libc::reboot(cmd) };
    io::Error::last_os_error()
}

/// `sync(2)`.
pub fn sync() {
    // SAFETY: sync(2) has no arguments.
    unsafe { libc::sync() }
}

/// `fork(2)`: `Ok(0)` in the child. The executor (PID 1) is
/// single-threaded, so the child may run any code. (A trace's process
/// starts threads of its own, but never forks.)
pub fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: PID 1 never starts a thread, so the child inherits no lock
    // held by another thread.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// `waitpid(pid, 0)`: its wait status.
pub fn waitpid(pid: libc::pid_t) -> io::Result<libc::c_int> {
    let mut status = 0;
    // SAFETY: status is a valid int to write.
    check(unsafe { libc::waitpid(pid, &mut status, 0) })?;
    Ok(status)
}

/// `_exit(2)`, without running destructors or flushing anything that the
/// parent also holds.
pub fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// `setresuid(2)`.
pub fn setresuid(ruid: u32, euid: u32, suid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresuid(ruid, euid, suid) }).map(drop)
}

/// `getpid(2)`.
pub fn getpid() -> libc::pid_t {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getpid() }
}

/// `gettid(2)`: the calling thread's id, by which both drivers know their
/// threads.
pub fn gettid() -> libc::pid_t {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::gettid() }
}

/// `geteuid(2)`: the calling thread's effective uid (each thread has its
/// own credentials in the kernel).
pub fn geteuid() -> libc::uid_t {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// `CLOCK_BOOTTIME` in microseconds.
pub fn boottime_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// `poll(2)` of one fd for input with a zero timeout: whether it is
/// readable now.
pub fn readable_now(fd: &impl AsRawFd) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1.
    check(unsafe { libc::poll(&mut p, 1, 0) })?;
    Ok(p.revents & libc::POLLIN != 0)
}

/// `ioctl(2)` with a pointer argument.
///
/// # Safety
///
/// `arg` points to a buffer valid for reads and writes of what the driver
/// reads and writes for `request` (`_IOC_SIZE(request)` bytes, and for
/// `BINDER_WRITE_READ` the buffers its `binder_write_read` names), for the
/// whole call.
unsafe fn ioctl(fd: &impl AsRawFd, request: u32, arg: *mut u8) -> io::Result<()> {
    // SAFETY: the caller guarantees the buffer, as above.
    with_fault(|| check(unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) })).map(drop)
}

/// An ioctl of the Binder device whose argument is one structure of
/// `_IOC_SIZE(request)` bytes, `arg`, that the driver reads or writes and
/// nothing else: every Binder ioctl but `BINDER_WRITE_READ` (whose
/// structure names buffers of its own; see [`write_read`]).
///
/// # Panics
///
/// When `arg` is not `_IOC_SIZE(request)` bytes, or `request` is
/// `BINDER_WRITE_READ`.
pub fn ioctl_struct(fd: &impl AsRawFd, request: u32, arg: &mut [u8]) -> io::Result<()> {
    assert_eq!(
        arg.len(),
        abi::ioc_size(request),
        "argument of {request:#x}"
    );
    assert_ne!(request, abi::BINDER_WRITE_READ, "write_read names buffers");
    // SAFETY: both drivers read and write at most `_IOC_SIZE(request)`
    // bytes at the argument for these requests (C: one copy_from_user or
    // copy_to_user of the structure; Rust: a UserSlice of _IOC_SIZE bytes),
    // and `arg` is that long and lives across the call.
    unsafe { ioctl(fd, request, arg.as_mut_ptr()) }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    abi::u32_at(b, at).expect("inside the structure")
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    abi::u64_at(b, at).expect("inside the structure")
}

/// `BINDER_VERSION`: the protocol version.
pub fn binder_version(fd: &impl AsRawFd) -> io::Result<i32> {
    let mut v = [0u8; 4];
    ioctl_struct(fd, abi::BINDER_VERSION, &mut v)?;
    Ok(i32::from_le_bytes(v))
}

/// `BINDER_SET_CONTEXT_MGR` (with 0, as libbinder passes).
pub fn set_context_mgr(fd: &impl AsRawFd) -> io::Result<()> {
    ioctl_struct(fd, abi::BINDER_SET_CONTEXT_MGR, &mut [0u8; 4])
}

/// `BINDER_SET_CONTEXT_MGR_EXT` with this object.
pub fn set_context_mgr_ext(fd: &impl AsRawFd, object: &abi::FlatObject) -> io::Result<()> {
    ioctl_struct(fd, abi::BINDER_SET_CONTEXT_MGR_EXT, &mut object.encode())
}

/// `BINDER_GET_NODE_INFO_FOR_REF` on `handle`, every other field 0: the
/// strong and weak counts.
pub fn node_info_for_ref(fd: &impl AsRawFd, handle: u32) -> io::Result<(u32, u32)> {
    let mut v = [0u8; abi::NODE_INFO_SIZE];
    v[0..4].copy_from_slice(&handle.to_le_bytes());
    ioctl_struct(fd, abi::BINDER_GET_NODE_INFO_FOR_REF, &mut v)?;
    Ok((u32_at(&v, 4), u32_at(&v, 8)))
}

/// What `BINDER_GET_NODE_DEBUG_INFO` fills in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeDebugInfo {
    /// `ptr`.
    pub ptr: u64,
    /// `cookie`.
    pub cookie: u64,
    /// `has_strong_ref`.
    pub has_strong_ref: u32,
    /// `has_weak_ref`.
    pub has_weak_ref: u32,
}

/// `BINDER_GET_NODE_DEBUG_INFO` from `ptr` (every other field 0).
pub fn node_debug_info(fd: &impl AsRawFd, ptr: u64) -> io::Result<NodeDebugInfo> {
    let mut v = [0u8; abi::NODE_DEBUG_INFO_SIZE];
    v[0..8].copy_from_slice(&ptr.to_le_bytes());
    ioctl_struct(fd, abi::BINDER_GET_NODE_DEBUG_INFO, &mut v)?;
    Ok(NodeDebugInfo {
        ptr: u64_at(&v, 0),
        cookie: u64_at(&v, 8),
        has_strong_ref: u32_at(&v, 16),
        has_weak_ref: u32_at(&v, 20),
    })
}

/// `BINDER_FREEZE` of the processes with this pid.
pub fn freeze(fd: &impl AsRawFd, pid: i32, enable: bool, timeout_ms: u32) -> io::Result<()> {
    let mut v = [0u8; abi::FREEZE_INFO_SIZE];
    v[0..4].copy_from_slice(&pid.to_le_bytes());
    v[4..8].copy_from_slice(&u32::from(enable).to_le_bytes());
    v[8..12].copy_from_slice(&timeout_ms.to_le_bytes());
    ioctl_struct(fd, abi::BINDER_FREEZE, &mut v)
}

/// `BINDER_GET_FROZEN_INFO` of the processes with this pid: `sync_recv`,
/// `async_recv`.
pub fn frozen_info(fd: &impl AsRawFd, pid: i32) -> io::Result<(u32, u32)> {
    let mut v = [0u8; abi::FROZEN_STATUS_INFO_SIZE];
    v[0..4].copy_from_slice(&pid.to_le_bytes());
    ioctl_struct(fd, abi::BINDER_GET_FROZEN_INFO, &mut v)?;
    Ok((u32_at(&v, 4), u32_at(&v, 8)))
}

/// `BINDER_GET_EXTENDED_ERROR` of the calling thread: `id`, `command`,
/// `param`.
pub fn extended_error(fd: &impl AsRawFd) -> io::Result<(u32, u32, i32)> {
    let mut v = [0u8; abi::EXTENDED_ERROR_SIZE];
    ioctl_struct(fd, abi::BINDER_GET_EXTENDED_ERROR, &mut v)?;
    Ok((u32_at(&v, 0), u32_at(&v, 4), u32_at(&v, 8) as i32))
}

/// An ioctl whose argument is one `u32` (or `__s32`) written to the
/// driver: `BINDER_SET_MAX_THREADS`, `BINDER_THREAD_EXIT`,
/// `BINDER_ENABLE_ONEWAY_SPAM_DETECTION`, `BINDER_SET_IDLE_PRIORITY`.
pub fn ioctl_u32(fd: &impl AsRawFd, request: u32, value: u32) -> io::Result<()> {
    ioctl_struct(fd, request, &mut value.to_le_bytes())
}

/// `BINDER_CTL_ADD` on binderfs's `binder-control`: makes device `name`.
pub fn binderfs_add(control: &impl AsRawFd, name: &str) -> io::Result<()> {
    let mut v = [0u8; abi::BINDERFS_DEVICE_SIZE];
    if name.len() > 255 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
    }
    v[..name.len()].copy_from_slice(name.as_bytes());
    ioctl_struct(control, abi::BINDER_CTL_ADD, &mut v)
}

/// What one `BINDER_WRITE_READ` did.
#[derive(Debug)]
pub struct WriteRead {
    /// The ioctl's result.
    pub result: io::Result<()>,
    /// `write_consumed`.
    pub write_consumed: u64,
    /// The bytes read (`read_consumed` of them).
    pub read: Vec<u8>,
}

/// `BINDER_WRITE_READ` writing `write` and reading up to `read_size` bytes.
pub fn write_read(fd: &impl AsRawFd, write: &[u8], read_size: usize) -> WriteRead {
    let mut read = vec![0u8; read_size];
    let mut bwr = [0u64; 6];
    bwr[0] = write.len() as u64;
    bwr[2] = write.as_ptr() as u64;
    bwr[3] = read_size as u64;
    bwr[5] = read.as_mut_ptr() as u64;
    // SAFETY: bwr is the 48-byte `struct binder_write_read`; the buffers it
    // names, `write` (read by the kernel, `write.len()` bytes) and `read`
    // (written, at most `read_size` bytes), outlive the call. Pointers
    // inside `write` (a transaction's data and offsets) are only read by
    // the kernel, with copy_from_user: a bad one is EFAULT, never a write
    // to this process's memory.
    let result = unsafe { ioctl(fd, abi::BINDER_WRITE_READ, bwr.as_mut_ptr().cast::<u8>()) };
    read.truncate((bwr[4] as usize).min(read_size));
    WriteRead {
        result,
        write_consumed: bwr[1],
        read,
    }
}

/// A read-only shared mapping of a Binder file: where the driver puts the
/// transactions this process receives.
pub struct Mapping {
    addr: usize,
    len: usize,
}

impl Mapping {
    /// `mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)`.
    pub fn new(fd: &impl AsRawFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address the kernel chooses; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: p as usize,
            len,
        })
    }

    /// A copy of `len` bytes at user address `at`, if they lie inside the
    /// mapping.
    pub fn read(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        let start = usize::try_from(at).ok()?.checked_sub(self.addr)?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        let mut out = vec![0u8; len];
        // SAFETY: [addr + start, addr + start + len) lies inside the live
        // mapping (checked above); it is only read, with a byte copy, into
        // a distinct buffer. The driver writes a buffer before handing it
        // to us and not while we hold it, so the bytes are stable.
        unsafe {
            std::ptr::copy_nonoverlapping((self.addr + start) as *const u8, out.as_mut_ptr(), len)
        };
        Some(out)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this address and
        // length and nothing refers to it any more (`read` copies out).
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// A connected pair of Unix stream sockets (parent's end, child's end).
pub fn socketpair() -> io::Result<(
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
)> {
    std::os::unix::net::UnixStream::pair()
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `tcdrain(3)`: waits until a terminal has sent what was written to it
/// (a no-op error on other files).
pub fn tcdrain(f: &impl AsRawFd) {
    // SAFETY: tcdrain takes an fd and touches no user memory.
    unsafe { libc::tcdrain(f.as_raw_fd()) };
}
