//! The `binder_commands` target in the registry: its bytes, its trace and
//! its minimiser.

use super::program::{CmdProgram, Plan, FAR_HANDLES};
use super::run::TARGET;
use crate::check::Checked;
use crate::history::Finding;
use crate::registry::Target;
use crate::trace::{ParseError, Trace, TraceBody};
use crate::Events;
use arbitrary::Unstructured;
use core::fmt;
use idpool::driver::{Command, Object, RefCmd, Step};
use idpool::{AllocSite, Version};
use std::any::Any;

/// The `binder_commands` target.
pub struct CommandsTarget;

impl CmdProgram {
    /// Runs it (see [`super::run()`]).
    pub fn run(&self) -> Checked<Events> {
        super::run(self)
    }

    /// Its trace.
    pub fn trace(self) -> Trace {
        Trace::new(self)
    }

    /// The bytes that decode to this program, when there are such bytes
    /// (every handle, pointer and count must be one the decoding draws).
    pub fn encode(&self) -> Option<Vec<u8>> {
        encode(self)
    }
}

impl TraceBody for CmdProgram {
    fn target(&self) -> &'static str {
        TARGET
    }
    fn len(&self) -> usize {
        self.program.steps.len()
    }
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
    fn replay(&self) -> Checked<Events> {
        self.run()
    }
    fn shrink(&self, outer: &mut dyn FnMut(&Trace) -> bool) -> Trace {
        let base = self.clone();
        let with = |steps: &[(Step, Plan)]| {
            let mut p = base.clone();
            p.program.steps = steps.iter().map(|(s, _)| s.clone()).collect();
            p.plans = steps.iter().map(|(_, plan)| *plan).collect();
            if let Some(first) = p.plans.first_mut() {
                first.window = None;
            }
            p
        };
        let mut fails = |steps: &[(Step, Plan)]| outer(&with(steps).trace());
        let steps: Vec<(Step, Plan)> = self.steps().map(|(s, p)| (s.clone(), p)).collect();
        let mut steps = crate::shrink::shrink_list(steps, &mut fails);
        crate::shrink::simplify_each(&mut steps, simpler, &mut fails);
        let mut program = with(&steps);
        // The versions back to mainline if it still fails.
        for v in [Version::CMainline, Version::RustMainline] {
            let mut candidate = program.clone();
            match v.driver() {
                idpool::Driver::C => candidate.c = v,
                idpool::Driver::Rust => candidate.rust = v,
            }
            if candidate != program && outer(&candidate.clone().trace()) {
                program = candidate;
            }
        }
        program.trace()
    }
    fn clone_trace(&self) -> Trace {
        self.clone().trace()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn TraceBody) -> bool {
        other.as_any().downcast_ref::<Self>() == Some(self)
    }
}

/// A simpler step: no plan, fewer objects, smaller handles.
fn simpler((step, plan): &(Step, Plan)) -> Option<(Step, Plan)> {
    if plan.fail.is_some() {
        return Some((
            step.clone(),
            Plan {
                fail: None,
                ..*plan
            },
        ));
    }
    let mut s = step.clone();
    match &mut s.command {
        Command::Send { objects, .. } if !objects.is_empty() => {
            objects.pop();
        }
        Command::Ref(_, h) | Command::NodeInfo(h) if *h > 0 => *h = smaller_handle(*h),
        _ => return None,
    }
    Some((s, *plan))
}

/// The next handle the minimiser tries below `h` (above 0): one less up to
/// 65 (the handle map's first word and one past it), and above it the next
/// lower of the decoder's [`FAR_HANDLES`], so that `4294967295` takes a few
/// dozen replays to shrink rather than one per value.
fn smaller_handle(h: u32) -> u32 {
    const WALK: u32 = 65;
    if h <= WALK {
        h - 1
    } else {
        FAR_HANDLES
            .into_iter()
            .rev()
            .find(|&f| f < h)
            .expect("the far handles start below 65")
    }
}

impl Target for CommandsTarget {
    fn name(&self) -> &'static str {
        TARGET
    }
    fn about(&self) -> &'static str {
        "the C and the Rust Binder driver at the command level (context manager, ref counts on any handle, one-way transactions carrying nodes and handles, death notifications, process death), each against its naive model and against each other"
    }
    fn hunt_max_len(&self) -> usize {
        64
    }
    /// The collision through commands (a manager dies, a new one
    /// registers, the stale descriptor 0 collides), and the differences
    /// between mainline's drivers that a real kernel shows too.
    fn hunts(&self) -> &'static [Finding] {
        &[
            Finding::Collision,
            Finding::ManagerHandle,
            Finding::NodeInfo,
            Finding::FailedSetManager,
        ]
    }
    fn real_kernel(&self) -> bool {
        true
    }
    fn run(&self, data: &[u8]) -> Checked<Events> {
        CmdProgram::decode(data).run()
    }
    fn trace_from_bytes(&'static self, data: &[u8]) -> Option<Trace> {
        Some(CmdProgram::decode(data).trace())
    }
    fn parse_body(
        &'static self,
        lines: &mut dyn Iterator<Item = (usize, Vec<&str>)>,
    ) -> Result<Trace, ParseError> {
        CmdProgram::parse(lines)
            .map(CmdProgram::trace)
            .map_err(|(line, message)| ParseError { line, message })
    }
    fn arbitrary_trace(&'static self, u: &mut Unstructured<'_>) -> Option<Trace> {
        let rest = u.bytes(u.len()).unwrap_or_default();
        Some(CmdProgram::decode(rest).trace())
    }
    fn dictionary(&self) -> Option<String> {
        let mut out = String::new();
        for kind in 0..16u8 {
            crate::dict::entry(&mut out, &format!("command {kind}"), &[kind << 2]);
            crate::dict::entry(
                &mut out,
                &format!("command {kind} planned"),
                &[kind << 2 | 0xc0],
            );
        }
        for (what, byte) in [
            ("nodes 64", 0xfa),
            ("handle 0", 0x02),
            ("weak node 1", 0x05),
        ] {
            crate::dict::entry(&mut out, what, &[byte]);
        }
        Some(out)
    }
}

// ---- encoding: the inverse of the decoding in `program.rs` ---------------------

fn encode(p: &CmdProgram) -> Option<Vec<u8>> {
    let mut out = vec![header(p)?];
    for (i, (step, plan)) in p.steps().enumerate() {
        if i == super::program::MAX_STEPS {
            return None;
        }
        step_bytes(step, plan, &mut out)?;
    }
    Some(out)
}

fn header(p: &CmdProgram) -> Option<u8> {
    let c = match p.c {
        Version::CMainline => 0,
        Version::C2024_06 => 2,
        Version::CV3 => 3,
        _ => return None,
    };
    let rust = match p.rust {
        Version::RustMainline => 0,
        Version::RustV1 => 4,
        _ => return None,
    };
    let euids = &p.program.euids;
    let procs = match euids.len() {
        2 => 0,
        3 => 1,
        4 => 2,
        _ => return None,
    };
    let last = match euids.split_last() {
        Some((&1000, rest)) if rest.iter().all(|&e| e == 0) => 0x20,
        Some((&0, rest)) if rest.iter().all(|&e| e == 0) => 0,
        _ => return None,
    };
    Some(c | rust | procs << 3 | last)
}

fn handle_byte(h: u32) -> Option<u8> {
    if h < 8 {
        return Some(h as u8);
    }
    FAR_HANDLES
        .iter()
        .position(|&x| x == h)
        .map(|i| 0xf0 | i as u8)
}

fn object_byte(o: &Object) -> Option<u8> {
    Some(match *o {
        Object::Node { ptr, strong } if ptr < 4 => (ptr as u8) << 2 | u8::from(!strong),
        Object::Handle { handle, strong } if handle < 8 => {
            (handle as u8) << 2 | 2 | u8::from(!strong)
        }
        Object::Nodes { first: 16, count } => {
            let i = [32, 63, 64, 65].iter().position(|&c| c == count)? as u8;
            (60 + i) << 2 | 2
        }
        _ => return None,
    })
}

fn step_bytes(step: &Step, plan: Plan, out: &mut Vec<u8>) -> Option<()> {
    let (kind, args): (u8, Vec<u8>) = match &step.command {
        Command::SetManager => (0, vec![]),
        Command::Ref(RefCmd::IncRefs, h) => (1, vec![handle_byte(*h)?]),
        Command::Ref(RefCmd::Acquire, h) => (2, vec![handle_byte(*h)?]),
        Command::Ref(RefCmd::Release, h) => (3, vec![handle_byte(*h)?]),
        Command::Ref(RefCmd::DecRefs, h) => (4, vec![handle_byte(*h)?]),
        Command::Send { to, objects } => {
            if objects.len() > 3 {
                return None;
            }
            let mut args = vec![handle_byte(*to)?, objects.len() as u8];
            for o in objects {
                args.push(object_byte(o)?);
            }
            (5, args)
        }
        Command::Free => (7, vec![]),
        Command::RequestDeath { handle, cookie } if *cookie < 4 => {
            (8, vec![handle_byte(*handle)?, *cookie as u8])
        }
        Command::ClearDeath { handle, cookie } if *cookie < 4 => {
            (9, vec![handle_byte(*handle)?, *cookie as u8])
        }
        Command::NodeInfo(h) => (10, vec![handle_byte(*h)?]),
        Command::Exit => (11, vec![]),
        _ => return None,
    };
    let planned = plan != Plan::default();
    if plan.window.is_some() && plan.fail.is_some() {
        return None;
    }
    let pid = step.pid.0;
    out.push(pid | kind << 2 | if planned { 0xc0 } else { 0 });
    out.extend(args);
    if planned {
        let (site, window) = match (plan.window, plan.fail) {
            (Some(s), _) => (s, 4),
            (None, Some(s)) => (s, 0),
            (None, None) => unreachable!(),
        };
        let s = match site {
            AllocSite::Ref => 0,
            AllocSite::Grow => 1,
            AllocSite::Shrink => 2,
        };
        out.push(s | window);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use idpool::driver::Program;

    #[test]
    fn encoding_decodes_back() {
        let mut encoded = 0;
        for seed in 0..2000 {
            let bytes = crate::seeds::bytes(seed, 48);
            let p = CmdProgram::decode(&bytes);
            if let Some(again) = p.encode() {
                assert_eq!(CmdProgram::decode(&again), p);
                encoded += 1;
            }
        }
        assert!(encoded > 1500, "only {encoded} of 2000 programs encode");
    }

    #[test]
    fn far_handles_shrink_in_few_steps() {
        let mut h = u32::MAX;
        let mut steps = 0;
        while h > 0 {
            let next = smaller_handle(h);
            assert!(next < h, "{h} shrank to {next}");
            h = next;
            steps += 1;
        }
        assert_eq!(steps, 4 + 65);
        assert_eq!(smaller_handle(66), 65);
        assert_eq!(smaller_handle(1000), 127);
    }

    /// A node-info on handle 4294967295 fails from any handle no process
    /// holds. The minimiser once tried every handle below it, one replay
    /// each: `triage minimize` ran for hours on a 9-byte input that a
    /// node-info hunt found.
    #[test]
    fn minimising_a_far_handle_ends_soon() {
        let text = "idpool-trace v1\ntarget binder_commands\nprocs 2\np0 acquire 0\np0 set-manager\np1 release 4294967295\np0 node-info 4294967295\n";
        let trace = crate::targets::parse_trace(text).unwrap();
        let signature = trace.check().unwrap_err().signature();
        let mut replays = 0;
        let mut best = trace;
        loop {
            let next = best.shrink(&mut |t| {
                replays += 1;
                assert!(
                    replays < 500,
                    "still minimising after {replays} replays: {t}"
                );
                matches!(t.check(), Err(f) if f.signature() == signature)
            });
            if next == best {
                break;
            }
            best = next;
        }
        let body = best.body().downcast_ref::<CmdProgram>().unwrap();
        assert_eq!(
            body.to_string(),
            "procs 2\np0 set-manager\np0 node-info 0\n"
        );
    }

    #[test]
    fn a_program_with_euids_zero_encodes() {
        let p = CmdProgram {
            program: Program {
                euids: vec![0, 0, 0],
                steps: vec![],
            },
            ..CmdProgram::default()
        };
        assert_eq!(CmdProgram::decode(&p.encode().unwrap()), p);
    }
}
