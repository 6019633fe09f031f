//! The Binder user ABI on x86-64, as `include/uapi/linux/android/binder.h`
//! defines it: ioctl numbers, `BC_*` and `BR_*` codes, and the byte layout
//! of the structures the executor writes and reads. Pure data, no system
//! calls: the host's tests use it too.

/// `_IOC(dir, type, nr, size)` of `asm-generic/ioctl.h`.
const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}
const NONE: u32 = 0;
const WRITE: u32 = 1;
const READ: u32 = 2;

/// `sizeof(struct binder_write_read)`.
pub const WRITE_READ_SIZE: usize = 48;
/// `sizeof(struct binder_transaction_data)`.
pub const TRANSACTION_DATA_SIZE: usize = 64;
/// `sizeof(struct flat_binder_object)`.
pub const FLAT_OBJECT_SIZE: usize = 24;
/// `sizeof(struct binder_node_info_for_ref)`.
pub const NODE_INFO_SIZE: usize = 24;
/// `sizeof(struct binderfs_device)`: a 256-byte name, major, minor.
pub const BINDERFS_DEVICE_SIZE: usize = 264;
/// `sizeof(struct binder_node_debug_info)`: ptr, cookie, has_strong_ref,
/// has_weak_ref.
pub const NODE_DEBUG_INFO_SIZE: usize = 24;
/// `sizeof(struct binder_freeze_info)`: pid, enable, timeout_ms.
pub const FREEZE_INFO_SIZE: usize = 12;
/// `sizeof(struct binder_frozen_status_info)`: pid, sync_recv, async_recv.
pub const FROZEN_STATUS_INFO_SIZE: usize = 12;
/// `sizeof(struct binder_extended_error)`: id, command, param.
pub const EXTENDED_ERROR_SIZE: usize = 12;
/// `sizeof(struct binder_frozen_state_info)`: cookie, is_frozen, reserved.
pub const FROZEN_STATE_INFO_SIZE: usize = 16;
/// `sizeof(struct binder_handle_cookie)` (packed: a `u32` handle, a `u64`
/// cookie).
pub const HANDLE_COOKIE_SIZE: usize = 12;
/// `sizeof(struct binder_pri_desc)`: priority, desc.
pub const PRI_DESC_SIZE: usize = 8;

/// `BINDER_WRITE_READ`.
pub const BINDER_WRITE_READ: u32 = ioc(READ | WRITE, b'b', 1, WRITE_READ_SIZE);
/// `BINDER_SET_IDLE_TIMEOUT` (an `__s64`): neither driver has it.
pub const BINDER_SET_IDLE_TIMEOUT: u32 = ioc(WRITE, b'b', 3, 8);
/// `BINDER_SET_MAX_THREADS` (a `__u32`).
pub const BINDER_SET_MAX_THREADS: u32 = ioc(WRITE, b'b', 5, 4);
/// `BINDER_SET_IDLE_PRIORITY` (an `__s32`): neither driver has it.
pub const BINDER_SET_IDLE_PRIORITY: u32 = ioc(WRITE, b'b', 6, 4);
/// `BINDER_SET_CONTEXT_MGR`.
pub const BINDER_SET_CONTEXT_MGR: u32 = ioc(WRITE, b'b', 7, 4);
/// `BINDER_THREAD_EXIT` (an `__s32`, not read).
pub const BINDER_THREAD_EXIT: u32 = ioc(WRITE, b'b', 8, 4);
/// `BINDER_VERSION`.
pub const BINDER_VERSION: u32 = ioc(READ | WRITE, b'b', 9, 4);
/// `BINDER_GET_NODE_DEBUG_INFO`.
pub const BINDER_GET_NODE_DEBUG_INFO: u32 = ioc(READ | WRITE, b'b', 11, NODE_DEBUG_INFO_SIZE);
/// `BINDER_GET_NODE_INFO_FOR_REF`.
pub const BINDER_GET_NODE_INFO_FOR_REF: u32 = ioc(READ | WRITE, b'b', 12, NODE_INFO_SIZE);
/// `BINDER_SET_CONTEXT_MGR_EXT` (a `flat_binder_object`).
pub const BINDER_SET_CONTEXT_MGR_EXT: u32 = ioc(WRITE, b'b', 13, FLAT_OBJECT_SIZE);
/// `BINDER_FREEZE`.
pub const BINDER_FREEZE: u32 = ioc(WRITE, b'b', 14, FREEZE_INFO_SIZE);
/// `BINDER_GET_FROZEN_INFO`.
pub const BINDER_GET_FROZEN_INFO: u32 = ioc(READ | WRITE, b'b', 15, FROZEN_STATUS_INFO_SIZE);
/// `BINDER_ENABLE_ONEWAY_SPAM_DETECTION` (a `__u32`).
pub const BINDER_ENABLE_ONEWAY_SPAM_DETECTION: u32 = ioc(WRITE, b'b', 16, 4);
/// `BINDER_GET_EXTENDED_ERROR`.
pub const BINDER_GET_EXTENDED_ERROR: u32 = ioc(READ | WRITE, b'b', 17, EXTENDED_ERROR_SIZE);
/// `BINDER_CTL_ADD` on binderfs's `binder-control`.
pub const BINDER_CTL_ADD: u32 = ioc(READ | WRITE, b'b', 1, BINDERFS_DEVICE_SIZE);
/// The protocol version both drivers report.
pub const BINDER_CURRENT_PROTOCOL_VERSION: i32 = 8;

/// `BC_TRANSACTION`.
pub const BC_TRANSACTION: u32 = ioc(WRITE, b'c', 0, TRANSACTION_DATA_SIZE);
/// `BC_REPLY`.
pub const BC_REPLY: u32 = ioc(WRITE, b'c', 1, TRANSACTION_DATA_SIZE);
/// `BC_ACQUIRE_RESULT` (an `__s32`): neither driver has it.
pub const BC_ACQUIRE_RESULT: u32 = ioc(WRITE, b'c', 2, 4);
/// `BC_FREE_BUFFER`.
pub const BC_FREE_BUFFER: u32 = ioc(WRITE, b'c', 3, 8);
/// `BC_INCREFS`.
pub const BC_INCREFS: u32 = ioc(WRITE, b'c', 4, 4);
/// `BC_ACQUIRE`.
pub const BC_ACQUIRE: u32 = ioc(WRITE, b'c', 5, 4);
/// `BC_RELEASE`.
pub const BC_RELEASE: u32 = ioc(WRITE, b'c', 6, 4);
/// `BC_DECREFS`.
pub const BC_DECREFS: u32 = ioc(WRITE, b'c', 7, 4);
/// `BC_INCREFS_DONE`.
pub const BC_INCREFS_DONE: u32 = ioc(WRITE, b'c', 8, 16);
/// `BC_ACQUIRE_DONE`.
pub const BC_ACQUIRE_DONE: u32 = ioc(WRITE, b'c', 9, 16);
/// `BC_ATTEMPT_ACQUIRE` (a `binder_pri_desc`): neither driver has it.
pub const BC_ATTEMPT_ACQUIRE: u32 = ioc(WRITE, b'c', 10, PRI_DESC_SIZE);
/// `BC_REGISTER_LOOPER`.
pub const BC_REGISTER_LOOPER: u32 = ioc(NONE, b'c', 11, 0);
/// `BC_ENTER_LOOPER`.
pub const BC_ENTER_LOOPER: u32 = ioc(NONE, b'c', 12, 0);
/// `BC_EXIT_LOOPER`.
pub const BC_EXIT_LOOPER: u32 = ioc(NONE, b'c', 13, 0);
/// `BC_REQUEST_DEATH_NOTIFICATION` (a packed handle and cookie, 12 bytes).
pub const BC_REQUEST_DEATH_NOTIFICATION: u32 = ioc(WRITE, b'c', 14, 12);
/// `BC_CLEAR_DEATH_NOTIFICATION`.
pub const BC_CLEAR_DEATH_NOTIFICATION: u32 = ioc(WRITE, b'c', 15, 12);
/// `BC_DEAD_BINDER_DONE`.
pub const BC_DEAD_BINDER_DONE: u32 = ioc(WRITE, b'c', 16, 8);
/// `BC_REQUEST_FREEZE_NOTIFICATION` (a `binder_handle_cookie`).
pub const BC_REQUEST_FREEZE_NOTIFICATION: u32 = ioc(WRITE, b'c', 19, HANDLE_COOKIE_SIZE);
/// `BC_CLEAR_FREEZE_NOTIFICATION`.
pub const BC_CLEAR_FREEZE_NOTIFICATION: u32 = ioc(WRITE, b'c', 20, HANDLE_COOKIE_SIZE);
/// `BC_FREEZE_NOTIFICATION_DONE` (a cookie).
pub const BC_FREEZE_NOTIFICATION_DONE: u32 = ioc(WRITE, b'c', 21, 8);

/// `TF_ONE_WAY`.
pub const TF_ONE_WAY: u32 = 0x01;

const fn pack_chars(c1: u8, c2: u8, c3: u8, c4: u8) -> u32 {
    ((c1 as u32) << 24) | ((c2 as u32) << 16) | ((c3 as u32) << 8) | c4 as u32
}
/// `BINDER_TYPE_BINDER`.
pub const BINDER_TYPE_BINDER: u32 = pack_chars(b's', b'b', b'*', 0x85);
/// `BINDER_TYPE_WEAK_BINDER`.
pub const BINDER_TYPE_WEAK_BINDER: u32 = pack_chars(b'w', b'b', b'*', 0x85);
/// `BINDER_TYPE_HANDLE`.
pub const BINDER_TYPE_HANDLE: u32 = pack_chars(b's', b'h', b'*', 0x85);
/// `BINDER_TYPE_WEAK_HANDLE`.
pub const BINDER_TYPE_WEAK_HANDLE: u32 = pack_chars(b'w', b'h', b'*', 0x85);

/// The `BR_*` names by `_IOC_NR`, as the uapi header numbers them.
pub const BR_NAMES: [&str; 23] = [
    "BR_ERROR",
    "BR_OK",
    "BR_TRANSACTION",
    "BR_REPLY",
    "BR_ACQUIRE_RESULT",
    "BR_DEAD_REPLY",
    "BR_TRANSACTION_COMPLETE",
    "BR_INCREFS",
    "BR_ACQUIRE",
    "BR_RELEASE",
    "BR_DECREFS",
    "BR_ATTEMPT_ACQUIRE",
    "BR_NOOP",
    "BR_SPAWN_LOOPER",
    "BR_FINISHED",
    "BR_DEAD_BINDER",
    "BR_CLEAR_DEATH_NOTIFICATION_DONE",
    "BR_FAILED_REPLY",
    "BR_FROZEN_REPLY",
    "BR_ONEWAY_SPAM_SUSPECT",
    "BR_TRANSACTION_PENDING_FROZEN",
    "BR_FROZEN_BINDER",
    "BR_CLEAR_FREEZE_NOTIFICATION_DONE",
];

/// The `_IOC_NR` of a `BR_*` code.
pub fn ioc_nr(code: u32) -> u8 {
    (code & 0xff) as u8
}
/// The `_IOC_SIZE` of a code: how many payload bytes follow it.
pub fn ioc_size(code: u32) -> usize {
    ((code >> 16) & 0x3fff) as usize
}
/// The `_IOC_TYPE` of a code (`'r'` for returns).
pub fn ioc_type(code: u32) -> u8 {
    ((code >> 8) & 0xff) as u8
}

/// A `BR_*` code's name (`BR_UNKNOWN` for one outside the table or not of
/// type `'r'`).
pub fn br_name(code: u32) -> &'static str {
    if ioc_type(code) != b'r' {
        return "BR_UNKNOWN";
    }
    BR_NAMES
        .get(usize::from(ioc_nr(code)))
        .copied()
        .unwrap_or("BR_UNKNOWN")
}

/// `_IOC_NR` of the returns the executor decodes or answers
/// (`BR_TRANSACTION` and `BR_TRANSACTION_SEC_CTX` share 2, with two
/// sizes).
pub mod br_nr {
    /// `BR_ERROR`.
    pub const ERROR: u8 = 0;
    /// `BR_TRANSACTION` (64 bytes) and `BR_TRANSACTION_SEC_CTX` (72).
    pub const TRANSACTION: u8 = 2;
    /// `BR_REPLY`.
    pub const REPLY: u8 = 3;
    /// `BR_DEAD_REPLY`.
    pub const DEAD_REPLY: u8 = 5;
    /// `BR_TRANSACTION_COMPLETE`.
    pub const TRANSACTION_COMPLETE: u8 = 6;
    /// `BR_INCREFS`.
    pub const INCREFS: u8 = 7;
    /// `BR_ACQUIRE`.
    pub const ACQUIRE: u8 = 8;
    /// `BR_RELEASE`.
    pub const RELEASE: u8 = 9;
    /// `BR_DECREFS`.
    pub const DECREFS: u8 = 10;
    /// `BR_NOOP`.
    pub const NOOP: u8 = 12;
    /// `BR_DEAD_BINDER`.
    pub const DEAD_BINDER: u8 = 15;
    /// `BR_CLEAR_DEATH_NOTIFICATION_DONE`.
    pub const CLEAR_DEATH_NOTIFICATION_DONE: u8 = 16;
    /// `BR_FAILED_REPLY`.
    pub const FAILED_REPLY: u8 = 17;
    /// `BR_SPAWN_LOOPER` (written over the read's leading `BR_NOOP`).
    pub const SPAWN_LOOPER: u8 = 13;
    /// `BR_FROZEN_BINDER`.
    pub const FROZEN_BINDER: u8 = 21;
    /// `BR_CLEAR_FREEZE_NOTIFICATION_DONE`.
    pub const CLEAR_FREEZE_NOTIFICATION_DONE: u8 = 22;
}

/// Little-endian readers over a byte slice.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
}
/// See [`u32_at`].
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// `struct binder_transaction_data`, the fields the executor uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransactionData {
    /// `target.handle` (or `target.ptr` as received).
    pub target: u64,
    /// `cookie`.
    pub cookie: u64,
    /// `code`.
    pub code: u32,
    /// `flags`.
    pub flags: u32,
    /// `sender_pid`.
    pub sender_pid: i32,
    /// `sender_euid`.
    pub sender_euid: u32,
    /// `data_size`.
    pub data_size: u64,
    /// `offsets_size`.
    pub offsets_size: u64,
    /// `data.ptr.buffer`.
    pub buffer: u64,
    /// `data.ptr.offsets`.
    pub offsets: u64,
}

impl TransactionData {
    /// Its 64 bytes.
    pub fn encode(&self) -> [u8; TRANSACTION_DATA_SIZE] {
        let mut b = [0u8; TRANSACTION_DATA_SIZE];
        b[0..8].copy_from_slice(&self.target.to_le_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_le_bytes());
        b[16..20].copy_from_slice(&self.code.to_le_bytes());
        b[20..24].copy_from_slice(&self.flags.to_le_bytes());
        b[24..28].copy_from_slice(&self.sender_pid.to_le_bytes());
        b[28..32].copy_from_slice(&self.sender_euid.to_le_bytes());
        b[32..40].copy_from_slice(&self.data_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.offsets_size.to_le_bytes());
        b[48..56].copy_from_slice(&self.buffer.to_le_bytes());
        b[56..64].copy_from_slice(&self.offsets.to_le_bytes());
        b
    }

    /// Reads one from the first 64 bytes of `b`.
    pub fn decode(b: &[u8]) -> Option<TransactionData> {
        Some(TransactionData {
            target: u64_at(b, 0)?,
            cookie: u64_at(b, 8)?,
            code: u32_at(b, 16)?,
            flags: u32_at(b, 20)?,
            sender_pid: u32_at(b, 24)? as i32,
            sender_euid: u32_at(b, 28)?,
            data_size: u64_at(b, 32)?,
            offsets_size: u64_at(b, 40)?,
            buffer: u64_at(b, 48)?,
            offsets: u64_at(b, 56)?,
        })
    }
}

/// `struct flat_binder_object`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlatObject {
    /// `hdr.type`.
    pub kind: u32,
    /// `flags`.
    pub flags: u32,
    /// `binder` (a node's pointer) or `handle` (in its low 32 bits).
    pub value: u64,
    /// `cookie`.
    pub cookie: u64,
}

impl FlatObject {
    /// Its 24 bytes.
    pub fn encode(&self) -> [u8; FLAT_OBJECT_SIZE] {
        let mut b = [0u8; FLAT_OBJECT_SIZE];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.value.to_le_bytes());
        b[16..24].copy_from_slice(&self.cookie.to_le_bytes());
        b
    }

    /// Reads one from the first 24 bytes of `b`.
    pub fn decode(b: &[u8]) -> Option<FlatObject> {
        Some(FlatObject {
            kind: u32_at(b, 0)?,
            flags: u32_at(b, 4)?,
            value: u64_at(b, 8)?,
            cookie: u64_at(b, 16)?,
        })
    }
}

/// Appends a `BC_*` code and its payload to a write buffer.
pub fn push_cmd(buf: &mut Vec<u8>, code: u32, payload: &[u8]) {
    debug_assert_eq!(ioc_size(code), payload.len(), "payload size of {code:#x}");
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(payload);
}

/// A packed `struct binder_handle_cookie`: the handle, then the cookie.
pub fn handle_cookie(handle: u32, cookie: u64) -> [u8; HANDLE_COOKIE_SIZE] {
    let mut b = [0u8; HANDLE_COOKIE_SIZE];
    b[0..4].copy_from_slice(&handle.to_le_bytes());
    b[4..12].copy_from_slice(&cookie.to_le_bytes());
    b
}

/// One `BR_*` return split out of a read buffer: its code and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawReturn {
    /// The code.
    pub code: u32,
    /// The `_IOC_SIZE(code)` bytes after it.
    pub payload: Vec<u8>,
}

/// Splits a read buffer (`read_consumed` bytes) into its returns. An error
/// names the offset of a return whose payload runs past the end.
pub fn split_returns(buf: &[u8]) -> Result<Vec<RawReturn>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let code = u32_at(buf, at)
            .ok_or_else(|| format!("a truncated BR code at offset {at} of {}", buf.len()))?;
        let size = ioc_size(code);
        let payload = buf
            .get(at + 4..at + 4 + size)
            .ok_or_else(|| {
                format!(
                    "{} ({code:#x}) at offset {at} needs {size} payload bytes, the read has {}",
                    br_name(code),
                    buf.len() - at - 4
                )
            })?
            .to_vec();
        out.push(RawReturn { code, payload });
        at += 4 + size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_uapi_header() {
        // The values strace and the kernel print for these ioctls.
        assert_eq!(BINDER_WRITE_READ, 0xc030_6201);
        assert_eq!(BINDER_SET_CONTEXT_MGR, 0x4004_6207);
        assert_eq!(BINDER_VERSION, 0xc004_6209);
        assert_eq!(BINDER_GET_NODE_INFO_FOR_REF, 0xc018_620c);
        assert_eq!(BINDER_CTL_ADD, 0xc108_6201);
        assert_eq!(BC_TRANSACTION, 0x4040_6300);
        assert_eq!(BC_ENTER_LOOPER, 0x630c);
        assert_eq!(BC_REQUEST_DEATH_NOTIFICATION, 0x400c_630e);
        assert_eq!(BINDER_SET_IDLE_TIMEOUT, 0x4008_6203);
        assert_eq!(BINDER_SET_MAX_THREADS, 0x4004_6205);
        assert_eq!(BINDER_SET_IDLE_PRIORITY, 0x4004_6206);
        assert_eq!(BINDER_THREAD_EXIT, 0x4004_6208);
        assert_eq!(BINDER_GET_NODE_DEBUG_INFO, 0xc018_620b);
        assert_eq!(BINDER_SET_CONTEXT_MGR_EXT, 0x4018_620d);
        assert_eq!(BINDER_FREEZE, 0x400c_620e);
        assert_eq!(BINDER_GET_FROZEN_INFO, 0xc00c_620f);
        assert_eq!(BINDER_ENABLE_ONEWAY_SPAM_DETECTION, 0x4004_6210);
        assert_eq!(BINDER_GET_EXTENDED_ERROR, 0xc00c_6211);
        assert_eq!(BC_REPLY, 0x4040_6301);
        assert_eq!(BC_ACQUIRE_RESULT, 0x4004_6302);
        assert_eq!(BC_ATTEMPT_ACQUIRE, 0x4008_630a);
        assert_eq!(BC_REGISTER_LOOPER, 0x630b);
        assert_eq!(BC_EXIT_LOOPER, 0x630d);
        assert_eq!(BC_REQUEST_FREEZE_NOTIFICATION, 0x400c_6313);
        assert_eq!(BC_CLEAR_FREEZE_NOTIFICATION, 0x400c_6314);
        assert_eq!(BC_FREEZE_NOTIFICATION_DONE, 0x4008_6315);
        assert_eq!(BINDER_TYPE_BINDER, 0x7362_2a85);
        assert_eq!(BINDER_TYPE_WEAK_HANDLE, 0x7768_2a85);
    }

    #[test]
    fn returns_split_by_their_encoded_size() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&0x720cu32.to_le_bytes()); // BR_NOOP
        buf.extend_from_slice(&0x8010_7207u32.to_le_bytes()); // BR_INCREFS
        buf.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        buf.extend_from_slice(&0x8008_720fu32.to_le_bytes()); // BR_DEAD_BINDER
        buf.extend_from_slice(&9u64.to_le_bytes());
        let r = split_returns(&buf).unwrap();
        let names: Vec<_> = r.iter().map(|r| br_name(r.code)).collect();
        assert_eq!(names, ["BR_NOOP", "BR_INCREFS", "BR_DEAD_BINDER"]);
        assert_eq!(u64_at(&r[2].payload, 0), Some(9));
        assert!(split_returns(&buf[..buf.len() - 1])
            .unwrap_err()
            .contains("BR_DEAD_BINDER"));
    }

    #[test]
    fn transaction_data_round_trips() {
        let t = TransactionData {
            target: 3,
            flags: TF_ONE_WAY,
            data_size: 48,
            offsets_size: 16,
            buffer: 0x7f00_0000_1000,
            offsets: 0x7f00_0000_1030,
            sender_pid: 42,
            ..Default::default()
        };
        assert_eq!(TransactionData::decode(&t.encode()), Some(t));
    }
}
