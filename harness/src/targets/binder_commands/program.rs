//! A `binder_commands` program: the versions, the processes and their
//! steps, each with its plan (an allocation that fails, or the window of
//! the step before it runs in); its decoding from fuzzer bytes and its
//! trace text.
//!
//! # Trace text
//!
//! ```text
//! procs 3                     (or one euid per process: procs 0 0 1000;
//!                              a process pN there: another open by pN's task)
//! version c-2024-06           (optional; mainline otherwise; one per driver)
//! p1 set-manager
//! p0 send 0 node 1 fail-ref   (its first new reference's allocation fails)
//! in-ref p1 exit              (runs while the step before has dropped its
//!                              lock to allocate a new reference)
//! ```

use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::driver::{
    Arg, NodeFlags, Object, Payload, Pid, Procs, Program, Row, Step, Tid, TxnFlags, Value,
    MAX_PROCS, VOCABULARY,
};
use idpool::{AllocSite, Driver, Version};

/// The most steps a program decoded from bytes has.
pub const MAX_STEPS: usize = 48;

/// What the runner decides for one step besides its command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The step runs in the lock-drop window of the closest step before it
    /// that has no window itself: the first time that step drops its lock
    /// to allocate at this site (or right after it, if it never does).
    pub window: Option<AllocSite>,
    /// The step's first allocation at this site fails.
    pub fail: Option<AllocSite>,
}

/// A program and the versions it runs on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CmdProgram {
    /// The C driver's version.
    pub c: Version,
    /// The Rust driver's version.
    pub rust: Version,
    /// The processes and their steps.
    pub program: Program,
    /// One plan per step.
    pub plans: Vec<Plan>,
}

impl Default for CmdProgram {
    fn default() -> Self {
        CmdProgram {
            c: Version::CMainline,
            rust: Version::RustMainline,
            program: Program {
                procs: Procs::new(vec![0, 0]),
                steps: Vec::new(),
            },
            plans: Vec::new(),
        }
    }
}

/// A site's word in traces.
pub fn site_word(site: AllocSite) -> &'static str {
    match site {
        AllocSite::Ref => "ref",
        AllocSite::Grow => "grow",
        AllocSite::Shrink => "shrink",
    }
}

fn site_of(word: &str) -> Option<AllocSite> {
    [AllocSite::Ref, AllocSite::Grow, AllocSite::Shrink]
        .into_iter()
        .find(|&s| site_word(s) == word)
}

const SITES: [AllocSite; 3] = [AllocSite::Ref, AllocSite::Grow, AllocSite::Shrink];

impl CmdProgram {
    /// The steps with their plans.
    pub fn steps(&self) -> impl Iterator<Item = (&Step, Plan)> {
        self.program.steps.iter().zip(self.plans.iter().copied())
    }

    /// Whether any step has a plan (a window or a failing allocation).
    pub fn planned(&self) -> bool {
        self.plans.iter().any(|p| *p != Plan::default())
    }

    /// Whether both versions are mainline.
    pub fn is_mainline(&self) -> bool {
        self.c == Version::CMainline && self.rust == Version::RustMainline
    }

    /// The program raw bytes stand for (see the module's decoding rules).
    pub fn decode(data: &[u8]) -> CmdProgram {
        let mut u = Unstructured::new(data);
        decode(&mut u)
    }

    /// Parses the trace body: a `procs` line, `version` lines, then one
    /// step per line.
    pub fn parse(
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
    ) -> Result<CmdProgram, (usize, String)> {
        let mut p = CmdProgram::default();
        let mut saw_procs = false;
        for (n, w) in lines {
            match w[0] {
                "procs" if saw_procs || !p.program.steps.is_empty() => {
                    return Err((n, "`procs` must come once, before the steps".into()))
                }
                "procs" => {
                    p.program.procs = Procs::parse(&w[1..]).map_err(|e| (n, e))?;
                    saw_procs = true;
                }
                "version" if !p.program.steps.is_empty() => {
                    return Err((n, "`version` after the first step".into()))
                }
                "version" => {
                    let [_, name] = w[..] else {
                        return Err((n, "expected `version <name>`".into()));
                    };
                    let v: Version = name.parse().map_err(|e| (n, format!("{e}")))?;
                    match v.driver() {
                        Driver::C => p.c = v,
                        Driver::Rust => p.rust = v,
                    }
                }
                _ if p.program.steps.len() == crate::text::limits::OPS => {
                    let max = crate::text::limits::OPS;
                    return Err((n, format!("too many steps: allowed 0..={max}")));
                }
                _ => {
                    let (step, plan) = parse_step(&w).map_err(|e| (n, e))?;
                    p.program.steps.push(step);
                    p.plans.push(plan);
                }
            }
        }
        p.program.check().map_err(|e| (0, e))?;
        if p.plans.first().is_some_and(|plan| plan.window.is_some()) {
            return Err((0, "the first step cannot run in a window".into()));
        }
        Ok(p)
    }
}

fn parse_step(words: &[&str]) -> Result<(Step, Plan), String> {
    let mut plan = Plan::default();
    let mut words = words;
    if let Some(site) = words.first().and_then(|w| w.strip_prefix("in-")) {
        plan.window = Some(site_of(site).ok_or_else(|| format!("unknown window `in-{site}`"))?);
        words = &words[1..];
    }
    if let Some(site) = words.last().and_then(|w| w.strip_prefix("fail-")) {
        plan.fail = Some(site_of(site).ok_or_else(|| format!("unknown failure `fail-{site}`"))?);
        words = &words[..words.len() - 1];
    }
    Ok((Step::parse_words(words)?, plan))
}

impl fmt::Display for CmdProgram {
    /// The trace body.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.program.procs_line())?;
        if self.c != Version::CMainline {
            writeln!(f, "version {}", self.c)?;
        }
        if self.rust != Version::RustMainline {
            writeln!(f, "version {}", self.rust)?;
        }
        for (step, plan) in self.steps() {
            if let Some(site) = plan.window {
                write!(f, "in-{} ", site_word(site))?;
            }
            write!(f, "{step}")?;
            if let Some(site) = plan.fail {
                write!(f, " fail-{}", site_word(site))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

// ---- decoding -----------------------------------------------------------------

/// The header byte: bits 0-1 the C version (0 and 1 mainline, 2 June
/// 2024, 3 v3), bit 2 the Rust version (0 mainline, 1 the first posting),
/// bits 3-4 the number of processes (2, 3, 4, 3), bit 5 a different euid
/// for the last process; bits 6 and 7 both set, the last process is
/// instead another open by `p0`'s task (with its euid, 0).
fn decode_header(b: u8) -> (Version, Version, Procs) {
    let c = match b & 3 {
        2 => Version::C2024_06,
        3 => Version::CV3,
        _ => Version::CMainline,
    };
    let rust = if b & 4 == 0 {
        Version::RustMainline
    } else {
        Version::RustV1
    };
    let procs = [2, 3, 4, 3][usize::from((b >> 3) & 3)];
    let mut euids = vec![0; procs];
    if b & SHARED_TASK == SHARED_TASK {
        let last = euids.len() - 1;
        let mut procs = Procs::new(euids);
        procs.tasks[last] = Pid(0);
        return (c, rust, procs);
    }
    if b & 0x20 != 0 {
        euids[procs - 1] = 1000;
    }
    (c, rust, Procs::new(euids))
}

/// The header bits that make the last process another open by `p0`'s
/// task.
pub const SHARED_TASK: u8 = 0xc0;

/// The far handles a handle argument may take: the handle map's word
/// boundaries and beyond, in increasing order.
pub const FAR_HANDLES: [u32; 8] = [8, 63, 64, 65, 127, 1000, 1 << 31, u32::MAX];

/// How a handle byte decodes: below [`HANDLE_ONE`], handle 0 (the context
/// manager's, which every command on handle 0 needs); below
/// [`HANDLE_ANY`], handles 1 to 3 (the ones a process is likely to hold:
/// each new reference takes the smallest free handle); below
/// [`HANDLE_FAR`], handles 0 to 7; from there, one of [`FAR_HANDLES`].
pub const HANDLE_ONE: u8 = 0x40;
/// See [`HANDLE_ONE`].
pub const HANDLE_ANY: u8 = 0xc0;
/// See [`HANDLE_ONE`].
pub const HANDLE_FAR: u8 = 0xf0;

/// A handle argument: 0 for a quarter of the bytes, 1 to 3 for half,
/// sometimes 0 to 7 or one of [`FAR_HANDLES`] ([`HANDLE_ONE`]).
fn handle(u: &mut Unstructured) -> arbitrary::Result<u32> {
    let b = u8::arbitrary(u)?;
    Ok(if b < HANDLE_ONE {
        0
    } else if b < HANDLE_ANY {
        1 + u32::from(b - HANDLE_ONE) % 3
    } else if b < HANDLE_FAR {
        u32::from(b - HANDLE_ANY) % 8
    } else {
        FAR_HANDLES[usize::from(b & 7)]
    })
}

/// The object values (bits 2-7 of an object's byte) from this one on name
/// handles 0 to 7; below it, handles 0 to 3, the likely ones.
pub const OBJECT_ANY_HANDLE: u8 = 48;

/// An object: bits 0-1 its kind (a strong or weak node, a strong or weak
/// handle), bits 2-7 a value `v`: a node's pointer `v % 4`; a handle
/// `v % 4` below [`OBJECT_ANY_HANDLE`], else `v % 8`; from 60, a strong
/// handle's value is instead a run of nodes ([`Object::Nodes`]).
fn object(u: &mut Unstructured) -> arbitrary::Result<Object> {
    let b = u8::arbitrary(u)?;
    let v = b >> 2;
    let handle = u32::from(if v < OBJECT_ANY_HANDLE { v % 4 } else { v % 8 });
    Ok(match b & 3 {
        0 => Object::Node {
            ptr: u64::from(v % 4),
            strong: true,
        },
        1 => Object::Node {
            ptr: u64::from(v % 4),
            strong: false,
        },
        2 if v >= 60 => Object::Nodes {
            first: 16,
            count: [32, 63, 64, 65][usize::from(v - 60)],
        },
        2 => Object::Handle {
            handle,
            strong: true,
        },
        _ => Object::Handle {
            handle,
            strong: false,
        },
    })
}

/// The transaction flags a payload's first byte gives (bits 2 to 4).
const PAYLOAD_FLAGS: [u32; 3] = [
    TxnFlags::ACCEPT_FDS,
    TxnFlags::CLEAR_BUF,
    TxnFlags::UPDATE_TXN,
];

/// A payload: a byte with the number of objects (bits 0-1) and the flags
/// (bits 2-4), then one byte per object.
fn payload(u: &mut Unstructured) -> arbitrary::Result<Payload> {
    let b = u8::arbitrary(u)?;
    let flags = PAYLOAD_FLAGS
        .iter()
        .enumerate()
        .filter(|(i, _)| b & (4 << i) != 0)
        .fold(0, |f, (_, &flag)| f | flag);
    let objects = (0..b % 4)
        .map(|_| object(u))
        .collect::<arbitrary::Result<_>>()?;
    Ok(Payload {
        objects,
        flags: TxnFlags(flags),
    })
}

/// The priorities a node's flags byte picks (bits 1-2).
const PRIORITIES: [u32; 4] = [0, 0, 5, 19];

/// A node's flags: bit 0 `accepts-fds`, bits 1-2 a priority.
fn node_flags(u: &mut Unstructured) -> arbitrary::Result<NodeFlags> {
    let b = u8::arbitrary(u)?;
    let accepts = if b & 1 != 0 {
        NodeFlags::ACCEPTS_FDS
    } else {
        0
    };
    Ok(NodeFlags(accepts | PRIORITIES[usize::from((b >> 1) & 3)]))
}

/// The freeze timeouts a byte picks (bit 0).
pub(super) const TIMEOUTS: [u32; 2] = [0, 10];

/// One argument of the kind `arg`, from one byte (a payload: more).
fn argument(u: &mut Unstructured, arg: Arg, procs: usize) -> arbitrary::Result<Value> {
    let small = |u: &mut Unstructured| -> arbitrary::Result<u8> { Ok(u8::arbitrary(u)? % 4) };
    Ok(match arg {
        Arg::Handle => Value::U32(handle(u)?),
        Arg::Cookie | Arg::Ptr => Value::U64(u64::from(small(u)?)),
        Arg::Count => Value::U32(u32::from(small(u)?)),
        Arg::Millis => Value::U32(TIMEOUTS[usize::from(u8::arbitrary(u)? & 1)]),
        Arg::Proc => Value::Proc(Pid(u8::arbitrary(u)? % procs as u8)),
        Arg::Switch => Value::Switch(u8::arbitrary(u)? & 1 == 1),
        Arg::NodeFlags => Value::NodeFlags(node_flags(u)?),
        Arg::Payload => Value::Payload(payload(u)?),
    })
}

/// The row of [`VOCABULARY`] that the decoder's command slot `slot` picks:
/// each row takes `weight` consecutive slots, in the table's order.
pub fn row_of_slot(slot: u8) -> &'static Row {
    let mut end = 0u32;
    for row in VOCABULARY {
        end += u32::from(row.weight);
        if u32::from(slot) < end {
            return row;
        }
    }
    unreachable!("the weights fill the 256 slots")
}

/// The first slot of `row`.
pub fn first_slot(row: &Row) -> u8 {
    let before: u32 = VOCABULARY
        .iter()
        .take_while(|r| !std::ptr::eq(*r, row))
        .map(|r| u32::from(r.weight))
        .sum();
    u8::try_from(before).expect("a row starts below slot 256")
}

/// The thread the step byte's bits 2-3 name: `t0` half the time.
const THREADS: [Tid; 4] = [Tid(0), Tid(0), Tid(1), Tid(2)];

/// One step: a byte with the process (bits 0-1, modulo the processes), the
/// thread (bits 2-3, [`THREADS`]) and whether a plan byte follows (bits
/// 4-7 at 12 or more), a byte with the command's slot
/// ([`row_of_slot`]), the command's arguments, then the plan byte if any.
fn decode_step(u: &mut Unstructured, procs: usize) -> arbitrary::Result<(Step, Plan)> {
    let b = u8::arbitrary(u)?;
    let pid = Pid((b & 3) % procs as u8);
    let tid = THREADS[usize::from((b >> 2) & 3)];
    let row = row_of_slot(u8::arbitrary(u)?);
    let values = row
        .args
        .iter()
        .map(|&arg| argument(u, arg, procs))
        .collect::<arbitrary::Result<Vec<_>>>()?;
    let command = (row.make)(&values);
    let mut plan = Plan::default();
    if b >> 4 >= 12 {
        let p = u8::arbitrary(u)?;
        let site = SITES[usize::from(p & 3) % 3];
        if p & 4 == 0 {
            plan.fail = Some(site);
        } else {
            plan.window = Some(site);
        }
    }
    Ok((Step { pid, tid, command }, plan))
}

fn decode(u: &mut Unstructured) -> CmdProgram {
    let Ok(b) = u8::arbitrary(u) else {
        return CmdProgram::default();
    };
    let (c, rust, procs) = decode_header(b);
    debug_assert!(procs.len() <= MAX_PROCS);
    let mut program = CmdProgram {
        c,
        rust,
        program: Program {
            procs,
            steps: Vec::new(),
        },
        plans: Vec::new(),
    };
    while program.program.steps.len() < MAX_STEPS && !u.is_empty() {
        match decode_step(u, program.program.procs()) {
            Ok((step, mut plan)) => {
                if program.plans.is_empty() {
                    plan.window = None;
                }
                program.program.steps.push(step);
                program.plans.push(plan);
            }
            Err(_) => break,
        }
    }
    program
}

impl<'a> Arbitrary<'a> for CmdProgram {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(decode(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CmdProgram, (usize, String)> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.split(' ').collect::<Vec<_>>()));
        CmdProgram::parse(&mut lines)
    }

    #[test]
    fn text_round_trips() {
        let text = "procs 0 0 1000\nversion c-2024-06\np1 set-manager\np0 send 0 node 1 fail-ref\nin-ref p1 exit\np2 acquire 0\n";
        let p = parse(text).unwrap();
        assert_eq!(p.c, Version::C2024_06);
        assert_eq!(p.plans[2].window, Some(AllocSite::Ref));
        assert_eq!(p.plans[1].fail, Some(AllocSite::Ref));
        assert_eq!(p.to_string(), text);
    }

    #[test]
    fn bad_programs_say_why() {
        assert!(parse("procs 2\np2 exit")
            .unwrap_err()
            .1
            .contains("names p2"));
        assert!(parse("procs 2\nin-ref p0 exit")
            .unwrap_err()
            .1
            .contains("first step"));
        assert!(parse("procs 2\np0 exit fail-disk")
            .unwrap_err()
            .1
            .contains("fail-disk"));
        assert!(parse("procs 2\np0 exit\nversion c-v3")
            .unwrap_err()
            .1
            .contains("after"));
    }

    #[test]
    fn decoded_programs_print_and_parse_back() {
        for seed in 0..500 {
            let bytes = crate::seeds::bytes(seed, 64);
            let p = CmdProgram::decode(&bytes);
            let text = p.to_string();
            assert_eq!(parse(&text).unwrap(), p, "{text}");
        }
    }
}
