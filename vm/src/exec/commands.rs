//! Each command of the language as the ioctl (or `BC_` command) it becomes
//! (`docs/commands.md`), run by the thread the step names, then that
//! thread's `BINDER_GET_EXTENDED_ERROR`.

use super::child::Shared;
use crate::abi::{self, FlatObject, TransactionData};
use crate::sys;
use crate::wire::{WireEe, WireRet};
use idpool::driver::{Command, LooperCmd, Object, Payload, Pid, RefCmd, Refused};
use std::io;

/// What a command did.
pub(super) struct Outcome {
    /// Its ioctl's result.
    pub ret: WireRet,
    /// The thread's extended error right after it.
    pub ee: Option<WireEe>,
    /// Anything off.
    pub notes: Vec<String>,
    /// With a `fail_nth`: whether the allocation failed (the command made
    /// that many); `None` when it could not be set.
    pub fault_injected: Option<bool>,
}

/// Runs `command` on the calling thread, then reads the thread's extended
/// error when the command made an ioctl and left the thread in the driver
/// (not after `thread-exit`). `pids` are the VM pids of the trace's
/// processes. `exit` is not a command of this module (the process closes
/// its file and exits). With `fail_nth`, the `nth` allocation of the
/// command's first ioctl fails (`fail-nth`, set right before it and
/// cleared right after, before the extended error is read).
pub(super) fn run(
    shared: &Shared,
    command: &Command,
    pids: &[i32],
    fail_nth: Option<u32>,
) -> Outcome {
    let mut armed_notes = Vec::new();
    if let Some(Err(e)) = fail_nth.map(sys::arm_fail_nth) {
        armed_notes.push(format!("fail-nth could not be set: {e}"));
    }
    let (ret, mut notes) = execute(shared, command, pids);
    let fault_injected = match sys::disarm_fail_nth() {
        Some(Ok(injected)) => Some(injected),
        Some(Err(e)) => {
            notes.push(format!("fail-nth: {e}"));
            None
        }
        None => None,
    };
    notes.extend(armed_notes);
    let ee = if ret == WireRet::Skipped || *command == Command::ThreadExit {
        None
    } else {
        match sys::extended_error(&shared.file) {
            Ok((id, command, param)) => Some(WireEe { id, command, param }),
            Err(e) => {
                notes.push(format!("BINDER_GET_EXTENDED_ERROR after the command: {e}"));
                None
            }
        }
    };
    Outcome {
        ret,
        ee,
        notes,
        fault_injected,
    }
}

type Done = (WireRet, Vec<String>);

/// One row per command: the ioctl it makes.
fn execute(sh: &Shared, command: &Command, pids: &[i32]) -> Done {
    let f = &sh.file;
    match *command {
        Command::SetManager => status(sys::set_context_mgr(f)),
        Command::SetManagerExt { ptr, cookie, flags } => {
            let object = FlatObject {
                kind: abi::BINDER_TYPE_BINDER,
                flags: flags.0,
                value: ptr,
                cookie,
            };
            status(sys::set_context_mgr_ext(f, &object))
        }
        Command::Ref(cmd, handle) => write_one(sh, ref_code(cmd), &handle.to_le_bytes()),
        Command::Send { to, ref payload } => {
            transaction(sh, abi::BC_TRANSACTION, to, payload, true)
        }
        Command::Call { to, ref payload } => {
            transaction(sh, abi::BC_TRANSACTION, to, payload, false)
        }
        Command::Reply(ref payload) => transaction(sh, abi::BC_REPLY, 0, payload, false),
        Command::Free => free(sh),
        Command::RequestDeath { handle, cookie } => {
            handle_cookie(sh, abi::BC_REQUEST_DEATH_NOTIFICATION, handle, cookie)
        }
        Command::ClearDeath { handle, cookie } => {
            handle_cookie(sh, abi::BC_CLEAR_DEATH_NOTIFICATION, handle, cookie)
        }
        Command::RequestFreeze { handle, cookie } => {
            handle_cookie(sh, abi::BC_REQUEST_FREEZE_NOTIFICATION, handle, cookie)
        }
        Command::ClearFreeze { handle, cookie } => {
            handle_cookie(sh, abi::BC_CLEAR_FREEZE_NOTIFICATION, handle, cookie)
        }
        Command::NodeInfo(h) => answer(sys::node_info_for_ref(f, h), |(strong, weak)| {
            WireRet::NodeInfo { strong, weak }
        }),
        Command::NodeDebug(ptr) => answer(sys::node_debug_info(f, ptr), |i| WireRet::NodeDebug {
            ptr: i.ptr,
            cookie: i.cookie,
            has_strong: i.has_strong_ref,
            has_weak: i.has_weak_ref,
        }),
        Command::Version => answer(sys::binder_version(f), WireRet::Version),
        Command::ExtendedError => answer(sys::extended_error(f), |(id, command, param)| {
            WireRet::Extended(WireEe { id, command, param })
        }),
        Command::Looper(l) => write_one(sh, looper_code(l), &[]),
        Command::ThreadExit => status(sys::ioctl_u32(f, abi::BINDER_THREAD_EXIT, 0)),
        Command::MaxThreads(n) => status(sys::ioctl_u32(f, abi::BINDER_SET_MAX_THREADS, n)),
        Command::Freeze { target, timeout_ms } => {
            status(sys::freeze(f, pid_of(pids, target), true, timeout_ms))
        }
        Command::Thaw(target) => status(sys::freeze(f, pid_of(pids, target), false, 0)),
        Command::FrozenInfo(target) => answer(
            sys::frozen_info(f, pid_of(pids, target)),
            |(sync_recv, async_recv)| WireRet::FrozenInfo {
                sync_recv,
                async_recv,
            },
        ),
        Command::OnewaySpam(on) => status(sys::ioctl_u32(
            f,
            abi::BINDER_ENABLE_ONEWAY_SPAM_DETECTION,
            u32::from(on),
        )),
        Command::Refused(r) => refused(sh, r),
        Command::Exit => (WireRet::Skipped, vec!["exit is not run on a thread".into()]),
    }
}

fn errno_of(e: &io::Error) -> WireRet {
    WireRet::Errno(e.raw_os_error().unwrap_or(-1))
}

/// 0 or the errno.
fn status(r: io::Result<()>) -> Done {
    answer(r, |()| WireRet::Ok)
}

/// What the ioctl filled in, or the errno.
fn answer<T>(r: io::Result<T>, ok: impl FnOnce(T) -> WireRet) -> Done {
    (r.map_or_else(|e| errno_of(&e), ok), Vec::new())
}

/// The VM pid of process `p` of the trace (after its `exit`, the pid it
/// had: no Binder process has it any more).
fn pid_of(pids: &[i32], p: Pid) -> i32 {
    pids.get(p.index()).copied().unwrap_or(-1)
}

fn ref_code(cmd: RefCmd) -> u32 {
    match cmd {
        RefCmd::IncRefs => abi::BC_INCREFS,
        RefCmd::Acquire => abi::BC_ACQUIRE,
        RefCmd::Release => abi::BC_RELEASE,
        RefCmd::DecRefs => abi::BC_DECREFS,
    }
}

fn looper_code(cmd: LooperCmd) -> u32 {
    match cmd {
        LooperCmd::Register => abi::BC_REGISTER_LOOPER,
        LooperCmd::Enter => abi::BC_ENTER_LOOPER,
        LooperCmd::Exit => abi::BC_EXIT_LOOPER,
    }
}

/// `BINDER_WRITE_READ` writing `w`, reading nothing.
fn write(sh: &Shared, w: &[u8]) -> Done {
    let r = sys::write_read(&sh.file, w, 0);
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

/// `BINDER_WRITE_READ` writing one `BC_*` command and its payload.
fn write_one(sh: &Shared, code: u32, payload: &[u8]) -> Done {
    let mut w = Vec::new();
    abi::push_cmd(&mut w, code, payload);
    write(sh, &w)
}

/// A command whose payload is a `struct binder_handle_cookie`.
fn handle_cookie(sh: &Shared, code: u32, handle: u32, cookie: u64) -> Done {
    write_one(sh, code, &abi::handle_cookie(handle, cookie))
}

/// `BC_FREE_BUFFER` of the oldest buffer the process received; no ioctl
/// when there is none.
fn free(sh: &Shared) -> Done {
    let buffer = sh
        .buffers
        .lock()
        .expect("no thread panics holding it")
        .pop_front();
    match buffer {
        None => (WireRet::Skipped, Vec::new()),
        Some(buffer) => write_one(sh, abi::BC_FREE_BUFFER, &buffer.to_le_bytes()),
    }
}

/// The `flat_binder_object` of one object (flags 0, a node's cookie its
/// pointer).
fn flat(o: Object) -> FlatObject {
    let (kind, value, cookie) = match o {
        Object::Node { ptr, strong: true } => (abi::BINDER_TYPE_BINDER, ptr, ptr),
        Object::Node { ptr, strong: false } => (abi::BINDER_TYPE_WEAK_BINDER, ptr, ptr),
        Object::Handle {
            handle,
            strong: true,
        } => (abi::BINDER_TYPE_HANDLE, u64::from(handle), 0),
        Object::Handle {
            handle,
            strong: false,
        } => (abi::BINDER_TYPE_WEAK_HANDLE, u64::from(handle), 0),
        Object::Nodes { .. } => unreachable!("runs are expanded"),
    };
    FlatObject {
        kind,
        flags: 0,
        value,
        cookie,
    }
}

/// `BC_TRANSACTION` (one-way or not) or `BC_REPLY` to `to`, code 0,
/// carrying the payload's objects, with its flags.
fn transaction(sh: &Shared, code: u32, to: u32, payload: &Payload, one_way: bool) -> Done {
    let mut data = Vec::new();
    let mut offsets = Vec::new();
    for o in payload.objects.iter().flat_map(Object::expand) {
        offsets.extend_from_slice(&(data.len() as u64).to_le_bytes());
        data.extend_from_slice(&flat(o).encode());
    }
    let one_way = if one_way { abi::TF_ONE_WAY } else { 0 };
    let tr = TransactionData {
        target: u64::from(to),
        flags: one_way | payload.flags.0,
        data_size: data.len() as u64,
        offsets_size: offsets.len() as u64,
        buffer: data.as_ptr() as u64,
        offsets: offsets.as_ptr() as u64,
        ..TransactionData::default()
    };
    // `data` and `offsets` live until after the ioctl.
    let r = write_one(sh, code, &tr.encode());
    drop((data, offsets));
    r
}

/// The commands neither driver has, with zeroed arguments.
fn refused(sh: &Shared, r: Refused) -> Done {
    let f = &sh.file;
    match r {
        Refused::IdleTimeout => status(sys::ioctl_struct(
            f,
            abi::BINDER_SET_IDLE_TIMEOUT,
            &mut [0; 8],
        )),
        Refused::IdlePriority => status(sys::ioctl_u32(f, abi::BINDER_SET_IDLE_PRIORITY, 0)),
        Refused::AttemptAcquire => write_one(sh, abi::BC_ATTEMPT_ACQUIRE, &[0; abi::PRI_DESC_SIZE]),
        Refused::AcquireResult => write_one(sh, abi::BC_ACQUIRE_RESULT, &[0; 4]),
    }
}
