//! A trace's task, forked by the executor: it opens the device once per
//! process of the task, as `docs/commands.md` says, then serves the
//! executor's requests for each of them (run a command on one of its
//! threads, drain, exit) until told to exit.
//!
//! A task is one OS process. Each of its opens (a process of the program:
//! one Binder process in both drivers, all with the task's pid) has a
//! serving thread of its own, with its own socket to the executor: the
//! task's main thread serves its first open, another thread each further
//! open. An open's threads are real threads: `t0` is its serving thread
//! (the one that opened the device and serves the requests), `t1` and `t2`
//! are started at their first command and then wait for work. Both
//! drivers key their threads by the thread's pid (C `binder_get_thread`,
//! Rust `Process::get_current_thread`), so each request runs on the thread
//! it names, and the threads of two opens are never the same driver
//! thread.

use super::commands::{self, Outcome};
use super::drain;
use super::{Reply, Request, MAP_SIZE};
use crate::abi;
use crate::sys::{self, Mapping};
use idpool::driver::{Command, MAX_THREADS};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a process's threads share: its Binder file, its mapping and the
/// buffers it received.
pub(super) struct Shared {
    // Field order: the mapping is dropped (unmapped) before the file is
    // closed; the driver releases the process when both are gone.
    /// The mapping, where the driver puts what the process receives.
    pub map: Mapping,
    /// The Binder file.
    pub file: File,
    /// Received transaction and reply buffers not yet freed, oldest first
    /// (one list per process, in the order read).
    pub buffers: Mutex<VecDeque<u64>>,
}

/// What one thread keeps between requests.
#[derive(Default)]
pub(super) struct ThreadState {
    /// Answers to its last read, written with its next one.
    pub answers: Vec<u8>,
}

/// Work for a thread other than `t0`.
type Job = Box<dyn FnOnce(&Shared, &mut ThreadState) + Send>;

/// A thread `t1` or `t2`: it runs the jobs it is sent, in order.
struct Worker {
    jobs: mpsc::Sender<Job>,
    handle: JoinHandle<()>,
}

/// A process of a trace, as its main thread sees it.
struct Proc {
    shared: Arc<Shared>,
    /// `t0`'s state (`t0` is this thread).
    main: ThreadState,
    /// `t1` and `t2`, once started.
    workers: Vec<Option<Worker>>,
    /// Which threads the driver knows: `t0` from the open, the others from
    /// their first ioctl; none after its `thread-exit`.
    known: [bool; MAX_THREADS],
}

/// A trace's task: opens the device once per socket in `socks` (one per
/// process of the task, in process order), each open from the thread that
/// then serves it, one after the other; then sets the task's euid and
/// serves the executor's requests on each socket until told to exit. The
/// OS process exits once every open has.
///
/// The euid is set after every open (C's `proc->cred` and Rust's
/// `Process::cred` are the file's, taken at the open, binder.c:6088,
/// process.rs:1713) and with every serving thread started: `setresuid`
/// must change the credentials of every thread of the process, since the
/// drivers read the calling thread's (`current_euid()` in
/// `BINDER_SET_CONTEXT_MGR`, binder.c:5529, context.rs:119). glibc's
/// `setresuid` (the static executor's libc) makes every thread of a
/// multi-threaded process make the syscall (`INLINE_SETXID_SYSCALL`,
/// `__nptl_setxid`); each serving thread checks its own euid before its
/// first answer, so a libc that did not would stop the trace rather than
/// run it with the wrong euid.
/// What tells another open's serving thread to go on (or why not).
type Go = mpsc::Sender<Result<(), String>>;

pub(super) fn task_main(socks: Vec<UnixStream>, device: &str, euid: u32) -> ! {
    let mut socks = socks.into_iter();
    let first = socks.next().expect("a task opens the device at least once");
    let mut opened: Vec<(Go, JoinHandle<()>)> = Vec::new();
    let mut setup = Proc::open(device).map(Some);
    if setup.is_ok() {
        for (i, sock) in socks.enumerate() {
            let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
            let (go_tx, go_rx) = mpsc::channel::<Result<(), String>>();
            let device = device.to_string();
            let spawned = std::thread::Builder::new()
                .name(format!("open{}", i + 1))
                .spawn(move || {
                    let proc = Proc::open(&device);
                    let ok = proc.as_ref().map(drop).map_err(Clone::clone);
                    let _ = done_tx.send(ok);
                    let (Ok(proc), Ok(Ok(()))) = (proc, go_rx.recv()) else {
                        // The task stops (the main thread reports why).
                        return;
                    };
                    serve(sock, proc, euid);
                });
            let handle = match spawned {
                Ok(h) => h,
                Err(e) => {
                    setup = Err(format!("start the thread of open {}: {e}", i + 1));
                    break;
                }
            };
            // The opens are made one after the other, in process order.
            match done_rx.recv() {
                Ok(Ok(())) => opened.push((go_tx, handle)),
                Ok(Err(e)) => {
                    setup = Err(format!("open {} of the task: {e}", i + 1));
                    break;
                }
                Err(_) => {
                    setup = Err(format!("the thread of open {} stopped", i + 1));
                    break;
                }
            }
        }
    }
    if setup.is_ok() && euid != 0 {
        if let Err(e) = sys::setresuid(euid, euid, euid) {
            setup = Err(format!("setresuid({euid}): {e}"));
        }
    }
    let proc = match setup {
        Ok(proc) => proc.expect("opened above"),
        Err(e) => {
            // The executor reads the first socket's answer first, then
            // waits for the process.
            answer(&first, &Reply::error(e));
            sys::exit_now(1);
        }
    };
    let mut threads = Vec::new();
    for (go, handle) in opened {
        let _ = go.send(Ok(()));
        threads.push(handle);
    }
    serve(first, proc, euid);
    // This open has exited: the task lives on until its other opens have.
    for t in threads {
        let _ = t.join();
    }
    sys::exit_now(0);
}

/// Writes one answer to the executor; a task whose executor has gone
/// exits.
fn answer(mut sock: &UnixStream, reply: &Reply) {
    let mut line = serde_json::to_string(reply).expect("replies serialise");
    line.push('\n');
    if sock.write_all(line.as_bytes()).is_err() {
        sys::exit_now(3);
    }
}

/// Serves one open on its own thread: checks that the thread has the
/// task's euid, answers with the task's pid and this thread's id, then
/// runs the executor's requests until told to exit (then unmaps and closes
/// the open's file, answers and returns). A closed socket (the executor
/// gave up on the trace) ends the whole task.
fn serve(sock: UnixStream, mut proc: Proc, euid: u32) {
    let thread_euid = sys::geteuid();
    if thread_euid != euid {
        answer(
            &sock,
            &Reply::error(format!(
                "thread {} of the task has euid {thread_euid}, not {euid}: setresuid did not reach every thread",
                sys::gettid()
            )),
        );
        sys::exit_now(1);
    }
    answer(
        &sock,
        &Reply {
            pid: sys::getpid(),
            tid: sys::gettid(),
            ..Reply::default()
        },
    );
    let mut reader = BufReader::new(&sock);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => sys::exit_now(2),
            Ok(_) => {}
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::error(format!("bad request {line:?}: {e}")),
            Ok(Request::Run {
                tid,
                command,
                pids,
                fail_nth,
            }) => proc.run(usize::from(tid), &command, pids, fail_nth),
            Ok(Request::Drain) => proc.drain(),
            Ok(Request::Exit) => {
                proc.close();
                answer(&sock, &Reply::default());
                return;
            }
        };
        answer(&sock, &reply);
    }
}

impl Proc {
    /// Opens the device (`O_NONBLOCK`), maps it, checks `BINDER_VERSION`
    /// and writes `BC_ENTER_LOOPER`, all from this thread (`t0`); the
    /// task sets its euid once all its opens are made ([`task_main`]).
    fn open(device: &str) -> Result<Proc, String> {
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
        let shared = Shared {
            map,
            file,
            buffers: Mutex::new(VecDeque::new()),
        };
        let mut known = [false; MAX_THREADS];
        known[0] = true;
        Ok(Proc {
            shared: Arc::new(shared),
            main: ThreadState::default(),
            workers: (1..MAX_THREADS).map(|_| None).collect(),
            known,
        })
    }

    /// Runs `f` on thread `tid` and returns what it returned: `t0` is this
    /// thread; `t1` and `t2` are started on their first job.
    fn on_thread<R: Send + 'static>(
        &mut self,
        tid: usize,
        f: impl FnOnce(&Shared, &mut ThreadState) -> R + Send + 'static,
    ) -> Result<R, String> {
        if tid == 0 {
            return Ok(f(&self.shared, &mut self.main));
        }
        let worker = self.worker(tid)?;
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |shared, state| {
            let _ = tx.send(f(shared, state));
        });
        worker
            .jobs
            .send(job)
            .map_err(|_| format!("thread t{tid} has stopped"))?;
        rx.recv()
            .map_err(|_| format!("thread t{tid} stopped during its work (a panic?)"))
    }

    /// Thread `tid` (1 or 2), started if it was not.
    fn worker(&mut self, tid: usize) -> Result<&Worker, String> {
        let slot = self
            .workers
            .get_mut(tid - 1)
            .ok_or_else(|| format!("no thread t{tid}"))?;
        if slot.is_none() {
            let (jobs, rx) = mpsc::channel::<Job>();
            let shared = Arc::clone(&self.shared);
            let handle = std::thread::Builder::new()
                .name(format!("t{tid}"))
                .spawn(move || {
                    let mut state = ThreadState::default();
                    while let Ok(job) = rx.recv() {
                        job(&shared, &mut state);
                    }
                })
                .map_err(|e| format!("start thread t{tid}: {e}"))?;
            *slot = Some(Worker { jobs, handle });
        }
        Ok(slot.as_ref().expect("started above"))
    }

    /// Runs a command (its text form) on thread `tid`, with the pids of
    /// the trace's processes (for the commands that name one), then the
    /// thread's extended error; with `fail_nth`, the command's ioctl
    /// fails that allocation.
    fn run(&mut self, tid: usize, text: &str, pids: Vec<i32>, fail_nth: Option<u32>) -> Reply {
        let words: Vec<&str> = text.split_whitespace().collect();
        let command = match Command::parse_words(&words) {
            Ok(Command::Exit) => return Reply::error("exit is a request of its own".into()),
            Ok(c) => c,
            Err(e) => return Reply::error(format!("bad command {text:?}: {e}")),
        };
        if tid >= MAX_THREADS {
            return Reply::error(format!("no thread t{tid}"));
        }
        let thread_exit = command == Command::ThreadExit;
        let outcome = self.on_thread(tid, move |shared, _| {
            commands::run(shared, &command, &pids, fail_nth)
        });
        match outcome {
            Ok(Outcome {
                ret,
                ee,
                notes,
                fault_injected,
            }) => {
                if ret != crate::wire::WireRet::Skipped {
                    self.known[tid] = !thread_exit;
                }
                Reply {
                    ret: Some(ret),
                    ee,
                    notes,
                    fault_injected,
                    ..Reply::default()
                }
            }
            Err(e) => Reply::error(e),
        }
    }

    /// Each thread the driver knows, in order `t0` to `t2`, reads and
    /// answers everything the driver has for it (`drain::thread`).
    fn drain(&mut self) -> Reply {
        let mut reply = Reply::default();
        for tid in 0..MAX_THREADS {
            if !self.known[tid] {
                continue;
            }
            match self.on_thread(tid, move |shared, state| drain::thread(shared, state, tid)) {
                Ok((reads, notes)) => {
                    reply.reads.extend(reads);
                    reply
                        .notes
                        .extend(notes.into_iter().map(|n| format!("t{tid}: {n}")));
                }
                Err(e) => return Reply::error(e),
            }
        }
        reply
    }

    /// Stops `t1` and `t2`, then unmaps and closes the Binder file.
    fn close(self) {
        let Proc {
            shared, workers, ..
        } = self;
        for w in workers.into_iter().flatten() {
            drop(w.jobs);
            let _ = w.handle.join();
        }
        // The last reference: the mapping is unmapped, then the file closed.
        drop(shared);
    }
}
