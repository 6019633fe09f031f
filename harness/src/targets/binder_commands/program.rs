//! A `binder_commands` program: the versions, the processes and their
//! steps, each with its plan (an allocation that fails, or the window of
//! the step before it runs in); its decoding from fuzzer bytes and its
//! trace text.
//!
//! # Trace text
//!
//! ```text
//! procs 3                     (or one euid per process: procs 0 0 1000)
//! version c-2024-06           (optional; mainline otherwise; one per driver)
//! p1 set-manager
//! p0 send 0 node 1 fail-ref   (its first new reference's allocation fails)
//! in-ref p1 exit              (runs while the step before has dropped its
//!                              lock to allocate a new reference)
//! ```

use arbitrary::{Arbitrary, Unstructured};
use core::fmt;
use idpool::driver::{Command, Object, Pid, Program, RefCmd, Step, MAX_PROCS};
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
                euids: vec![0, 0],
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
                    p.program.euids = Program::parse_procs(&w[1..]).map_err(|e| (n, e))?;
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
/// for the last process.
fn decode_header(b: u8) -> (Version, Version, Vec<u32>) {
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
    if b & 0x20 != 0 {
        euids[procs - 1] = 1000;
    }
    (c, rust, euids)
}

/// The far handles a handle argument may take: the handle map's word
/// boundaries and beyond, in increasing order.
pub const FAR_HANDLES: [u32; 8] = [8, 63, 64, 65, 127, 1000, 1 << 31, u32::MAX];

/// A handle argument: mostly 0 to 7, sometimes one of [`FAR_HANDLES`].
fn handle(u: &mut Unstructured) -> arbitrary::Result<u32> {
    let b = u8::arbitrary(u)?;
    Ok(if b < 0xf0 {
        u32::from(b % 8)
    } else {
        FAR_HANDLES[usize::from(b & 7)]
    })
}

fn object(u: &mut Unstructured) -> arbitrary::Result<Object> {
    let b = u8::arbitrary(u)?;
    let v = b >> 2;
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
            handle: u32::from(v % 8),
            strong: true,
        },
        _ => Object::Handle {
            handle: u32::from(v % 8),
            strong: false,
        },
    })
}

fn objects(u: &mut Unstructured) -> arbitrary::Result<Vec<Object>> {
    let n = u8::arbitrary(u)? % 4;
    (0..n).map(|_| object(u)).collect()
}

/// One step: a byte with the process (bits 0-1, modulo the processes),
/// the command (bits 2-5) and whether a plan byte follows (bits 6-7 = 3),
/// then the command's arguments.
fn decode_step(u: &mut Unstructured, procs: usize) -> arbitrary::Result<(Step, Plan)> {
    let b = u8::arbitrary(u)?;
    let pid = Pid((b & 3) % procs as u8);
    let cookie =
        |u: &mut Unstructured| -> arbitrary::Result<u64> { Ok(u64::from(u8::arbitrary(u)? % 4)) };
    let command = match (b >> 2) & 15 {
        0 => Command::SetManager,
        1 => Command::Ref(RefCmd::IncRefs, handle(u)?),
        2 => Command::Ref(RefCmd::Acquire, handle(u)?),
        3 | 15 => Command::Ref(RefCmd::Release, handle(u)?),
        4 => Command::Ref(RefCmd::DecRefs, handle(u)?),
        5 | 6 => Command::Send {
            to: handle(u)?,
            objects: objects(u)?,
        },
        7 => Command::Free,
        8 => Command::RequestDeath {
            handle: handle(u)?,
            cookie: cookie(u)?,
        },
        9 => Command::ClearDeath {
            handle: handle(u)?,
            cookie: cookie(u)?,
        },
        10 => Command::NodeInfo(handle(u)?),
        11 => Command::Exit,
        12 => Command::Ref(RefCmd::Acquire, 0),
        13 => Command::Ref(RefCmd::IncRefs, 0),
        _ => Command::Send {
            to: 0,
            objects: objects(u)?,
        },
    };
    let mut plan = Plan::default();
    if b >> 6 == 3 {
        let p = u8::arbitrary(u)?;
        let site = SITES[usize::from(p & 3) % 3];
        if p & 4 == 0 {
            plan.fail = Some(site);
        } else {
            plan.window = Some(site);
        }
    }
    Ok((Step { pid, command }, plan))
}

fn decode(u: &mut Unstructured) -> CmdProgram {
    let Ok(b) = u8::arbitrary(u) else {
        return CmdProgram::default();
    };
    let (c, rust, euids) = decode_header(b);
    debug_assert!(euids.len() <= MAX_PROCS);
    let procs = euids.len();
    let mut program = CmdProgram {
        c,
        rust,
        program: Program {
            euids,
            steps: Vec::new(),
        },
        plans: Vec::new(),
    };
    while program.program.steps.len() < MAX_STEPS && !u.is_empty() {
        match decode_step(u, procs) {
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
