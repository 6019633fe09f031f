//! One thread's drain (`docs/commands.md`, "What userspace does between
//! commands"): it reads everything the driver has for it and answers as
//! libbinder's `IPCThreadState` would, every call from the thread itself.

use super::child::{Shared, ThreadState};
use super::READ_SIZE;
use crate::abi::{self, br_nr, FlatObject, TransactionData};
use crate::sys;
use crate::wire::{WireBr, WireObject};

/// The most `BINDER_WRITE_READ` calls of one drain.
const MAX_READS: usize = 1000;

/// Reads until there is nothing left to read or answer: what thread `tid`
/// read, in order, and anything off. A read is made only when `poll`
/// says there is work (the C driver logs every failed ioctl, `EAGAIN`
/// included); pending answers with no work go in a write-only call.
pub(super) fn thread(
    shared: &Shared,
    state: &mut ThreadState,
    tid: usize,
) -> (Vec<WireBr>, Vec<String>) {
    let mut reads = Vec::new();
    let mut notes = Vec::new();
    for _ in 0..MAX_READS {
        let work = sys::readable_now(&shared.file).unwrap_or_else(|e| {
            notes.push(format!("poll: {e}"));
            false
        });
        if !work && state.answers.is_empty() {
            return (reads, notes);
        }
        let answers = std::mem::take(&mut state.answers);
        let read_size = if work { READ_SIZE } else { 0 };
        let r = sys::write_read(&shared.file, &answers, read_size);
        if let Err(e) = &r.result {
            notes.push(format!(
                "BINDER_WRITE_READ (write {} bytes, read {read_size}): {e}",
                answers.len()
            ));
            if e.raw_os_error() != Some(libc::EAGAIN) {
                return (reads, notes);
            }
        }
        match abi::split_returns(&r.read) {
            Ok(returns) => {
                let mut reader = Reader {
                    shared,
                    state: &mut *state,
                    notes: &mut notes,
                    tid: tid as u8,
                };
                reads.extend(returns.iter().filter_map(|ret| reader.answer(ret)));
            }
            Err(e) => {
                notes.push(e);
                return (reads, notes);
            }
        }
    }
    notes.push(format!("still reading after {MAX_READS} reads"));
    (reads, notes)
}

/// A thread taking in what one read returned.
struct Reader<'a> {
    shared: &'a Shared,
    state: &'a mut ThreadState,
    notes: &'a mut Vec<String>,
    tid: u8,
}

impl Reader<'_> {
    /// Records one return and queues its answer (`BR_NOOP` is neither).
    fn answer(&mut self, ret: &abi::RawReturn) -> Option<WireBr> {
        let code = ret.code;
        let ours = abi::ioc_type(code) == b'r';
        if ours && abi::ioc_nr(code) == br_nr::NOOP {
            return None;
        }
        let mut br = WireBr {
            tid: self.tid,
            br: abi::br_name(code).to_string(),
            code,
            args: Vec::new(),
            objects: None,
        };
        if ours && self.decode(&mut br, &ret.payload).is_none() {
            self.notes.push(format!(
                "{} with a malformed payload {:?}",
                br.br, ret.payload
            ));
        }
        Some(br)
    }

    /// Queues `code` and its payload as an answer to write with the next
    /// read.
    fn reply(&mut self, code: u32, payload: &[u8]) {
        abi::push_cmd(&mut self.state.answers, code, payload);
    }

    /// Decodes a return's payload into `br.args` (and its objects), and
    /// queues what libbinder answers it: `BC_INCREFS_DONE`,
    /// `BC_ACQUIRE_DONE`, `BC_DEAD_BINDER_DONE`,
    /// `BC_FREEZE_NOTIFICATION_DONE`.
    fn decode(&mut self, br: &mut WireBr, p: &[u8]) -> Option<()> {
        match abi::ioc_nr(br.code) {
            br_nr::ERROR => br.args.push(u64::from(abi::u32_at(p, 0)?)),
            nr @ (br_nr::INCREFS | br_nr::ACQUIRE | br_nr::RELEASE | br_nr::DECREFS) => {
                br.args = vec![abi::u64_at(p, 0)?, abi::u64_at(p, 8)?];
                match nr {
                    br_nr::INCREFS => self.reply(abi::BC_INCREFS_DONE, &p[..16]),
                    br_nr::ACQUIRE => self.reply(abi::BC_ACQUIRE_DONE, &p[..16]),
                    _ => {}
                }
            }
            br_nr::DEAD_BINDER => {
                let cookie = abi::u64_at(p, 0)?;
                br.args.push(cookie);
                self.reply(abi::BC_DEAD_BINDER_DONE, &cookie.to_le_bytes());
            }
            br_nr::FROZEN_BINDER => {
                let cookie = abi::u64_at(p, 0)?;
                br.args = vec![cookie, u64::from(abi::u32_at(p, 8)?)];
                self.reply(abi::BC_FREEZE_NOTIFICATION_DONE, &cookie.to_le_bytes());
            }
            br_nr::CLEAR_DEATH_NOTIFICATION_DONE | br_nr::CLEAR_FREEZE_NOTIFICATION_DONE => {
                br.args.push(abi::u64_at(p, 0)?)
            }
            br_nr::TRANSACTION | br_nr::REPLY => self.transaction(br, p)?,
            _ => {
                br.args = p
                    .chunks(8)
                    .map(|c| c.iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
                    .collect()
            }
        }
        Some(())
    }

    /// A `BR_TRANSACTION` or `BR_REPLY`: its fields, its objects (read from
    /// the mapping through its offsets), and its buffer kept for `free`.
    fn transaction(&mut self, br: &mut WireBr, p: &[u8]) -> Option<()> {
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
        let map = &self.shared.map;
        let mut objects = Vec::new();
        for i in 0..(t.offsets_size / 8) {
            let flat = map
                .read(t.offsets + i * 8, 8)
                .and_then(|b| abi::u64_at(&b, 0))
                .and_then(|off| map.read(t.buffer + off, abi::FLAT_OBJECT_SIZE))
                .and_then(|b| FlatObject::decode(&b));
            match flat {
                Some(f) => objects.push(WireObject {
                    kind: f.kind,
                    flags: f.flags,
                    value: f.value,
                    cookie: f.cookie,
                }),
                None => self.notes.push(format!(
                    "object {i} of a transaction (buffer {:#x}, offsets {:#x}) is outside the mapping",
                    t.buffer, t.offsets
                )),
            }
        }
        br.objects = Some(objects);
        self.shared
            .buffers
            .lock()
            .expect("no thread panics holding it")
            .push_back(t.buffer);
        Some(())
    }
}
