//! The `binder_commands` target in the registry: its bytes, its trace and
//! its minimiser.

use super::program::{CmdProgram, Plan, FAR_HANDLES, SHARED_TASK};
use super::run::TARGET;
use crate::check::Checked;
use crate::history::Finding;
use crate::registry::Target;
use crate::trace::{ParseError, Trace, TraceBody};
use crate::Events;
use arbitrary::Unstructured;
use core::fmt;
use idpool::driver::{Arg, Command, NodeFlags, Object, Pid, Step, TxnFlags, Value, VOCABULARY};
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

/// A simpler step: no plan, fewer objects, no transaction flags, smaller
/// handles.
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
        Command::Send { payload, .. } | Command::Call { payload, .. } | Command::Reply(payload)
            if !payload.objects.is_empty() || payload.flags != TxnFlags::default() =>
        {
            if payload.objects.pop().is_none() {
                payload.flags = TxnFlags::default();
            }
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
        "the C and the Rust Binder driver at the command level (the context manager, ref counts on any handle, one-way and two-way transactions carrying nodes and handles, replies, threads and loopers, death and freeze notifications, freezing, extended errors, process death), each against its naive model and against each other"
    }
    fn hunt_max_len(&self) -> usize {
        64
    }
    /// Twice [`CORPUS_CAP`](crate::registry::CORPUS_CAP): the command
    /// language has 270 reachable cells of the command-space map
    /// (`triage map`), and the seeds that reach them come on top of the
    /// 449 inputs edge coverage kept before the language grew.
    fn corpus_cap(&self) -> usize {
        2 * crate::registry::CORPUS_CAP
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
        for row in VOCABULARY {
            let slot = super::program::first_slot(row);
            crate::dict::entry(&mut out, row.word, &[0, slot]);
            crate::dict::entry(&mut out, &format!("{} planned", row.word), &[0xc0, slot]);
            crate::dict::entry(&mut out, &format!("t1 {}", row.word), &[0x08, slot]);
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
    let all = &p.program.procs;
    let procs = match all.len() {
        2 => 0,
        3 => 1,
        4 => 2,
        _ => return None,
    };
    let (tasks, last) = (&all.tasks, all.len() - 1);
    let shares_p0 = tasks[last] == Pid(0)
        && tasks[..last]
            .iter()
            .enumerate()
            .all(|(i, t)| t.index() == i);
    let last = match all.euids.split_last() {
        _ if shares_p0 && all.euids.iter().all(|&e| e == 0) => SHARED_TASK,
        _ if all.shares_a_task() => return None,
        Some((&1000, rest)) if rest.iter().all(|&e| e == 0) => 0x20,
        Some((&0, rest)) if rest.iter().all(|&e| e == 0) => 0,
        _ => return None,
    };
    Some(c | rust | procs << 3 | last)
}

fn handle_byte(h: u32) -> Option<u8> {
    use super::program::{HANDLE_ANY, HANDLE_FAR, HANDLE_ONE};
    Some(match h {
        0 => 0,
        1..=3 => HANDLE_ONE + (h as u8 - 1),
        4..=7 => HANDLE_ANY + h as u8,
        _ => HANDLE_FAR | FAR_HANDLES.iter().position(|&x| x == h)? as u8,
    })
}

fn object_byte(o: &Object) -> Option<u8> {
    let handle_value = |h: u32| -> Option<u8> {
        match h {
            0..=3 => Some(h as u8),
            4..=7 => Some(super::program::OBJECT_ANY_HANDLE + h as u8),
            _ => None,
        }
    };
    Some(match *o {
        Object::Node { ptr, strong } if ptr < 4 => (ptr as u8) << 2 | u8::from(!strong),
        Object::Handle { handle, strong } => handle_value(handle)? << 2 | 2 | u8::from(!strong),
        Object::Nodes { first: 16, count } => {
            let i = [32, 63, 64, 65].iter().position(|&c| c == count)? as u8;
            (60 + i) << 2 | 2
        }
        _ => return None,
    })
}

/// The bytes of one argument, the inverse of `program::argument`.
fn argument_bytes(value: &Value, out: &mut Vec<u8>) -> Option<()> {
    let small = |v: u64| (v < 4).then_some(v as u8);
    match value {
        Value::U32(h) => out.push(handle_byte(*h)?),
        Value::U64(v) => out.push(small(*v)?),
        Value::Proc(p) => out.push(p.0),
        Value::Switch(on) => out.push(u8::from(*on)),
        Value::NodeFlags(f) => {
            let prio = f.0 & NodeFlags::PRIORITY_MASK;
            let p = [0, 5, 19].iter().position(|&x| x == prio)?;
            let prio_bits = [0, 2, 3][p] << 1;
            let extra = f.0 & !(NodeFlags::PRIORITY_MASK | NodeFlags::ACCEPTS_FDS);
            if extra != 0 {
                return None;
            }
            out.push(u8::from(f.0 & NodeFlags::ACCEPTS_FDS != 0) | prio_bits);
        }
        Value::Payload(p) => {
            if p.objects.len() > 3 {
                return None;
            }
            let mut first = p.objects.len() as u8;
            let mut left = p.flags.0;
            for (i, flag) in [
                TxnFlags::ACCEPT_FDS,
                TxnFlags::CLEAR_BUF,
                TxnFlags::UPDATE_TXN,
            ]
            .into_iter()
            .enumerate()
            {
                if left & flag != 0 {
                    first |= 4 << i;
                    left &= !flag;
                }
            }
            if left != 0 {
                return None;
            }
            out.push(first);
            for o in &p.objects {
                out.push(object_byte(o)?);
            }
        }
    }
    Some(())
}

fn step_bytes(step: &Step, plan: Plan, out: &mut Vec<u8>) -> Option<()> {
    let (word, values) = step.command.values();
    let row = idpool::driver::command::row(word)?;
    let planned = plan != Plan::default();
    if plan.window.is_some() && plan.fail.is_some() {
        return None;
    }
    let thread_bits = match step.tid.0 {
        0 => 0,
        1 => 2,
        _ => 3,
    };
    // Arguments that decode by value: the counts, timeouts and handles
    // share the handle byte's encoding only where it means the same.
    let mut args = Vec::new();
    for (arg, value) in row.args.iter().zip(&values) {
        match (arg, value) {
            (Arg::Count, Value::U32(n)) => args.push(u8::try_from(*n).ok().filter(|&n| n < 4)?),
            (Arg::Millis, Value::U32(ms)) => {
                args.push(super::program::TIMEOUTS.iter().position(|t| t == ms)? as u8)
            }
            _ => argument_bytes(value, &mut args)?,
        }
    }
    out.push(step.pid.0 | thread_bits << 2 | if planned { 0xc0 } else { 0 });
    out.push(super::program::first_slot(row));
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
    use idpool::driver::{Procs, Program};

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
                procs: Procs::new(vec![0, 0, 0]),
                steps: vec![],
            },
            ..CmdProgram::default()
        };
        assert_eq!(CmdProgram::decode(&p.encode().unwrap()), p);
    }
}
