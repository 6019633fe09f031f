//! Running a program on both drivers: each step's plan (the failing
//! allocation, the steps that run in its windows), the drivers' own
//! consistency, each driver against its naive model, and the drivers
//! against each other ([`super::compare`]).

use super::compare::{self, Diff, Kind, Rule};
use super::oracle::Oracle;
use super::program::{site_word, CmdProgram, Plan};
use crate::check::{Check, Checked, Detail, Failure, Flavour, OpKind};
use crate::Events;
use idpool::driver::{
    CDriver, Command, FailFirst, Held, Observed, Pid, Ret, RustDriver, Snapshot, Step, Tid, Windows,
};
use idpool::{AllocSite, Gfp, Version};

/// The target's name.
pub const TARGET: &str = "binder_commands";

/// The name a difference between the drivers that no rule of
/// [`compare::RULES`] explains goes under in its failure's flavour.
pub const NO_RULE: &str = "c-vs-rust";

/// The op kind a command is, for failures and the state feedback: its
/// row's `op` (`idpool::driver::Row::op`), of the class of the first row
/// with that op.
pub fn kind(command: &Command) -> OpKind {
    let op = command.row().op;
    let first = idpool::driver::VOCABULARY
        .iter()
        .position(|r| r.op == op)
        .expect("the command's own row has its op");
    OpKind::new(op, 16 + first as u8)
}

/// A driver as the runner drives it.
pub trait Side: Sized {
    /// `c-mainline`, `rust-v1`, ...
    fn version(&self) -> Version;
    /// Runs `step` (see `CDriver::exec`).
    fn exec(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed;
    /// What each process holds.
    fn snapshot(&self) -> Snapshot;
    /// The driver's own consistency (its tables against its counts).
    fn check_tables(&self) -> Result<(), String>;
    /// The locks a command takes that a paused command may keep.
    fn needs(command: &Command) -> Held;
}

impl Side for CDriver {
    fn version(&self) -> Version {
        CDriver::version(self)
    }
    fn exec(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed {
        CDriver::exec(self, step, busy, windows)
    }
    fn snapshot(&self) -> Snapshot {
        CDriver::snapshot(self)
    }
    fn check_tables(&self) -> Result<(), String> {
        CDriver::check_tables(self)
    }
    fn needs(command: &Command) -> Held {
        CDriver::needs(command)
    }
}

impl Side for RustDriver {
    fn version(&self) -> Version {
        RustDriver::version(self)
    }
    fn exec(
        &mut self,
        step: &Step,
        busy: &[(Pid, Tid)],
        windows: &mut dyn Windows<Self>,
    ) -> Observed {
        RustDriver::exec(self, step, busy, windows)
    }
    fn snapshot(&self) -> Snapshot {
        RustDriver::snapshot(self)
    }
    fn check_tables(&self) -> Result<(), String> {
        RustDriver::check_tables(self)
    }
    /// The Rust driver keeps no lock but the process's across an
    /// allocation (`Process::update_ref` clones the manager's `NodeRef`
    /// and lets the context's lock go before inserting it).
    fn needs(_: &Command) -> Held {
        Held::default()
    }
}

/// The plan of one top-level step as the driver runs it: its failing
/// allocation, and the steps that run in its windows, each run once, at
/// the first window of its site.
struct Group<'p> {
    fail: FailFirst,
    /// The paused step's thread.
    outer: (Pid, Tid),
    /// (index, step, site, its observation once run).
    nested: Vec<Nested<'p>>,
}

/// A step of a group run in a window: its index, the step, the site of
/// the window it waits for, and what it showed once it ran.
type Nested<'p> = (usize, &'p Step, AllocSite, Option<(Observed, Snapshot)>);

impl<D: Side> Windows<D> for Group<'_> {
    fn gfp(&mut self, site: AllocSite) -> Gfp {
        self.fail.gfp(site)
    }

    fn window(&mut self, driver: &mut D, site: AllocSite, held: Held) {
        let outer = self.outer;
        let mut waiting: Vec<(Pid, Tid)> = Vec::new();
        for (_, step, at, seen) in &mut self.nested {
            if *at != site || seen.is_some() {
                continue;
            }
            // A step that needs a lock the paused command keeps waits for
            // it, and so do its thread's later steps: they run after. So
            // does a step of the paused thread itself, and its process's
            // exit: the paused ioctl holds the file, whose release runs
            // only once the ioctl returns. Another thread of the paused
            // process runs: the process's lock is dropped.
            let thread = (step.pid, step.tid);
            let own_exit = step.pid == outer.0 && step.command == Command::Exit;
            if thread == outer
                || own_exit
                || waiting.contains(&thread)
                || held.blocks(D::needs(&step.command))
            {
                waiting.push(thread);
                continue;
            }
            let o = driver.exec(step, &[outer], &mut idpool::driver::Sequential);
            *seen = Some((o, driver.snapshot()));
        }
    }
}

/// What the steps of a group showed, in the order they finished: each
/// step's observation, and the state right after it.
struct Ran {
    observed: Vec<(usize, Observed)>,
    states: Vec<(usize, Snapshot)>,
}

/// One top-level step and the steps in its windows, on one driver.
fn run_group<D: Side>(driver: &mut D, program: &CmdProgram, first: usize, end: usize) -> Ran {
    let steps = &program.program.steps;
    let mut group = Group {
        fail: FailFirst::at(program.plans[first].fail),
        outer: (steps[first].pid, steps[first].tid),
        nested: (first + 1..end)
            .map(|i| {
                let site = program.plans[i].window.expect("a nested step has a window");
                (i, &steps[i], site, None)
            })
            .collect(),
    };
    let outer = driver.exec(&steps[first], &[], &mut group);
    let mut ran = Ran {
        observed: Vec::new(),
        states: Vec::new(),
    };
    let mut late = Vec::new();
    for (i, step, _, seen) in group.nested {
        match seen {
            Some((o, state)) => {
                ran.observed.push((i, o));
                ran.states.push((i, state));
            }
            None => late.push((i, step)),
        }
    }
    ran.observed.push((first, outer));
    ran.states.push((first, driver.snapshot()));
    // A window never opened: the step runs after.
    for (i, step) in late {
        let o = driver.exec(step, &[], &mut idpool::driver::Sequential);
        ran.observed.push((i, o));
        ran.states.push((i, driver.snapshot()));
    }
    ran
}

/// A failure of the target.
fn failure(
    program: &CmdProgram,
    step: usize,
    check: Check,
    flavour: Flavour,
    what: impl core::fmt::Display,
) -> Box<Failure> {
    let s = &program.program.steps[step];
    let plan = program.plans[step];
    let plan = match (plan.window, plan.fail) {
        (Some(w), _) => format!(" in-{}", site_word(w)),
        (None, Some(f)) => format!(" fail-{}", site_word(f)),
        (None, None) => String::new(),
    };
    Box::new(Failure {
        target: TARGET,
        step,
        op: kind(&s.command),
        check,
        flavour: Some(flavour),
        phase: None,
        capacity: 0,
        detail: None,
        message: format!("{TARGET}: step {step} `{s}`{plan}: {flavour}: {what}"),
    })
}

/// The known difference a program's run keeps (the first one met, or a
/// later one that `IDPOOL_HISTORY` asks for: [`crate::history::keep_known`]):
/// the failure it becomes at the end when nothing else failed.
struct Known(Option<Box<Failure>>);

impl Known {
    fn keep(&mut self, f: Box<Failure>) {
        crate::history::keep_known(&mut self.0, f);
    }
}

/// Runs `program` on both drivers, each against its naive model `OC` and
/// `OR`, and against each other: the first failure, or the known
/// difference kept ([`Known`]) at the end, or the events.
pub fn run_with<OC: Oracle, OR: Oracle>(program: &CmdProgram) -> Checked<Events> {
    let (events, failure) = run_counting::<OC, OR>(program)?;
    match failure {
        Some(f) => Err(f),
        None => Ok(events),
    }
}

/// As [`run_with`], but a known difference comes back beside the events
/// of the whole run rather than instead of them.
pub fn run_counting<OC: Oracle, OR: Oracle>(
    program: &CmdProgram,
) -> Checked<(Events, Option<Box<Failure>>)> {
    let p = &program.program;
    let mut c = CDriver::new(&p.procs, program.c);
    let mut rust = RustDriver::new(&p.procs, program.rust);
    let mut oracles = (OC::enabled() && OR::enabled()).then(|| {
        (
            OC::new(&p.procs, program.c),
            OR::new(&p.procs, program.rust),
        )
    });
    let mut comparing = true;
    let mut known = Known(None);
    let mut aftermath = compare::Aftermath::new(&p.procs);
    let mut events = Events::default();
    let mut manager = Manager::None;
    // The command-space map, only when a recorder runs (`triage map`).
    let mut map = super::map::recording().then(|| super::map::Follow::new(&p.procs));
    let mut i = 0;
    while i < p.steps.len() {
        let end = (i + 1..p.steps.len())
            .find(|&j| program.plans[j].window.is_none())
            .unwrap_or(p.steps.len());
        if end > i + 1 {
            // The models run each step whole: a step in another's window
            // has no place in them.
            oracles = None;
            events.interleaved += 1;
        }
        crate::check::begin_step(TARGET, i, &StepOp(&p.steps[i]), 0);
        let before = map.as_ref().map(|_| rust.snapshot());
        let c_alive = !c.crashed();
        let ran_c = if c_alive {
            run_group(&mut c, program, i, end)
        } else {
            Ran {
                observed: Vec::new(),
                states: Vec::new(),
            }
        };
        let ran_rust = run_group(&mut rust, program, i, end);
        if let (Some(map), Some(before)) = (&mut map, &before) {
            map.group(&p.steps, before, &ran_rust.observed);
        }
        let (oc, or) = (&ran_c.observed, &ran_rust.observed);
        narrate_group(program, oc, or);
        let (sc, sr) = (c.snapshot(), rust.snapshot());
        if c_alive {
            tables_hold(program, i, &c)?;
        }
        tables_hold(program, i, &rust)?;
        count(&mut events, program, i, or, &sr);
        manager.follow(program, if c_alive { oc } else { or });
        observe(program, i, &manager, or, &sc, known.0.is_some());
        if c_alive && c.crashed() {
            crashed(program, i, &c, &mut known)?;
            comparing = false;
        } else if c_alive && comparing {
            comparing = compare_group(
                program,
                &ran_c,
                &ran_rust,
                &mut known,
                &mut aftermath,
                &mut events,
            )?;
        }
        if let Some((mc, mr)) = &mut oracles {
            let plan = program.plans[i];
            if c_alive && !c.crashed() {
                against_model(program, i, c.version(), mc, oc, &sc, plan)?;
            }
            against_model(program, i, rust.version(), mr, or, &sr, plan)?;
        }
        i = end;
    }
    Ok((events, known.0))
}

/// A driver's own invariants (its handle table against its bitmap) after
/// step `i`.
fn tables_hold(program: &CmdProgram, i: usize, driver: &impl Side) -> Checked<()> {
    driver.check_tables().map_err(|e| {
        failure(
            program,
            i,
            Check::Invariant,
            Flavour::Driver(driver.version()),
            e,
        )
    })
}

/// The context manager as the program has made it so far, for the state
/// feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Manager {
    /// None registered yet.
    None,
    /// Process `pid` registered and has not exited.
    Alive(usize),
    /// The last one registered has exited and no other has taken over.
    Died,
}

impl Manager {
    /// Follows a group's steps: a successful `set-manager` registers its
    /// process, the manager's `exit` leaves the context without one.
    fn follow(&mut self, program: &CmdProgram, observed: &[(usize, Observed)]) {
        for (j, o) in observed {
            let step = &program.program.steps[*j];
            match (&step.command, o.ret) {
                (Command::SetManager, Some(Ret::Ok)) => *self = Manager::Alive(step.pid.index()),
                (Command::Exit, _) if *self == Manager::Alive(step.pid.index()) => {
                    *self = Manager::Died
                }
                _ => {}
            }
        }
    }

    fn class(self) -> u64 {
        match self {
            Manager::None => 0,
            Manager::Alive(_) => 1,
            Manager::Died => 2,
        }
    }
}

/// Reports the abstract state after step `i` to the state feedback
/// ([`crate::feedback`]):
/// - the C driver's version: a state of June 2024 is not one of mainline;
/// - the command's kind and how it returned (success, `EINVAL`, another
///   error, skipped): the transition, not only the state;
/// - the context manager (none, alive, died), and whether a process holds
///   descriptor 0 on a node that is not the living manager's in the C
///   driver: the path of the one real collision (a stale descriptor 0
///   after the manager changed);
/// - the most references any process holds, bucketed at the handle map's
///   boundaries (one word is 64);
/// - whether a process has died, and whether the drivers have already
///   differed in a known way (a run past its first finding).
fn observe(
    program: &CmdProgram,
    i: usize,
    manager: &Manager,
    observed: &[(usize, Observed)],
    c: &Snapshot,
    differed: bool,
) {
    use crate::feedback::{self, AbstractState};
    use idpool::driver::Errno;
    let version = Version::ALL
        .iter()
        .position(|&v| v == program.c)
        .unwrap_or(0) as u64;
    let step = &program.program.steps[i];
    let ret = observed
        .iter()
        .find(|(j, _)| *j == i)
        .and_then(|(_, o)| o.ret);
    let ret = match ret {
        Some(Ret::Err(Errno::Inval)) => 1,
        Some(Ret::Err(_)) => 2,
        Some(Ret::Skipped) | None => 3,
        Some(_) => 0,
    };
    let refs = c.procs.iter().map(|p| p.refs.len()).max().unwrap_or(0);
    let refs = match refs {
        0 => 0,
        1 => 1,
        2..=4 => 2,
        5..=64 => 3,
        _ => 4,
    };
    // Descriptor 0 on a node that is not the living manager's: left over
    // from an earlier manager.
    let stale_zero = c.procs.iter().any(|p| {
        p.refs
            .get(&0)
            .is_some_and(|r| *manager != Manager::Alive(r.node.owner.index()))
    });
    let flag = |b: bool| u64::from(b);
    feedback::observe(
        AbstractState::new(TARGET)
            .with(version, 8)
            .with(kind(&step.command).class(), 64)
            .with(ret, 4)
            .with(manager.class(), 3)
            .with(flag(stale_zero), 2)
            .with(refs, 5)
            .with(flag(c.procs.iter().any(|p| !p.alive)), 2)
            .with(flag(differed), 2),
    );
}

/// A step as an operation, for failures and narration.
struct StepOp<'a>(&'a Step);

impl core::fmt::Debug for StepOp<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl crate::check::Op for StepOp<'_> {
    fn kind(&self) -> OpKind {
        kind(&self.0.command)
    }
}

/// Each step's observations under both drivers, for `triage repro`.
fn narrate_group(program: &CmdProgram, oc: &[(usize, Observed)], or: &[(usize, Observed)]) {
    let show = |o: &Observed| {
        let reads: Vec<String> = o
            .reads
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_empty())
            .map(|(p, r)| {
                let r: Vec<String> = r.iter().map(ToString::to_string).collect();
                format!("p{p} [{}]", r.join(", "))
            })
            .collect();
        let log: Vec<String> = o.log.iter().map(ToString::to_string).collect();
        let ret = o.ret.map(|r| r.to_string()).unwrap_or_default();
        format!(
            "ret {ret}; reads {}; log [{}]",
            reads.join(" "),
            log.join(", ")
        )
    };
    for (i, o) in or {
        let step = &program.program.steps[*i];
        let c = oc.iter().find(|(j, _)| j == i).map(|(_, o)| show(o));
        crate::check::narrate(|| {
            format!(
                "step {i} `{step}`:\n    C:    {}\n    Rust: {}",
                c.unwrap_or_else(|| "(crashed before)".into()),
                show(o)
            )
        });
    }
}

/// Counts what the smoke test asserts random programs reach (on the Rust
/// driver's observations: the C driver may have crashed).
fn count(
    events: &mut Events,
    program: &CmdProgram,
    i: usize,
    observed: &[(usize, Observed)],
    state: &Snapshot,
) {
    use idpool::driver::{Br, Received};
    for (j, o) in observed {
        let step = &program.program.steps[*j];
        match (&step.command, o.ret) {
            (Command::SetManager, Some(Ret::Ok)) => {
                events.manager_registered += 1;
                let died = program.program.steps[..*j]
                    .iter()
                    .any(|s| s.command == Command::Exit);
                if died {
                    events.manager_replaced += 1;
                }
            }
            (Command::NodeInfo(_), Some(Ret::NodeInfo { .. })) => events.node_info_answered += 1,
            _ => {}
        }
        if program.plans[*j].fail.is_some() {
            events.alloc_failed += 1;
        }
        for read in o.reads.iter().flatten() {
            match &read.br {
                Br::Transaction(objects) | Br::Call(objects) | Br::Reply(objects) => {
                    events.objects_translated += objects.len() as u32;
                    if objects
                        .iter()
                        .any(|o| matches!(o, Received::Handle { handle: 0, .. }))
                    {
                        events.handle_zero_received += 1;
                    }
                }
                Br::DeadBinder(_) => events.death_delivered += 1,
                _ => {}
            }
        }
    }
    let _ = i;
    if state.procs.iter().any(|p| p.refs.len() > 64) {
        events.refs_past_one_word += 1;
    }
}

/// C's `BUG()`: the known collision on the versions that reserve
/// descriptor 0 for the manager (see [`crate::history::Finding`]), a
/// crash anywhere else.
fn crashed(program: &CmdProgram, step: usize, c: &CDriver, known: &mut Known) -> Checked {
    let crash = c.crash().expect("a crashed driver says why");
    let f = failure(
        program,
        step,
        Check::KernelCrash,
        Flavour::Driver(c.version()),
        format_args!(
            "BUG(): descriptor {} already in refs_by_desc (inserting {} node)",
            crash.desc,
            if crash.manager {
                "the context manager's"
            } else {
                "another"
            }
        ),
    )
    .with_detail(Detail::Crash {
        version: c.version(),
        id: crash.desc,
        manager: crash.manager,
    });
    if crate::history::Finding::of(&f).is_some() {
        known.keep(f);
        Ok(())
    } else {
        Err(f)
    }
}

/// The drivers against each other for one group of steps: `Ok(true)` to
/// go on comparing, `Ok(false)` once a known difference made their states
/// diverge.
fn compare_group(
    program: &CmdProgram,
    c: &Ran,
    rust: &Ran,
    known: &mut Known,
    aftermath: &mut compare::Aftermath,
    events: &mut Events,
) -> Checked<bool> {
    let (oc, or) = (&c.observed, &rust.observed);
    for (j, c_obs) in oc {
        if let Some((_, r_obs)) = or.iter().find(|(k, _)| k == j) {
            aftermath.follow(*j, &program.program.steps[*j], c_obs, r_obs);
        }
    }
    let state_diffs = || -> Vec<Diff> {
        c.states
            .iter()
            .zip(&rust.states)
            .flat_map(|((_, a), (_, b))| compare::states(a, b))
            .collect()
    };
    let mut go_on = true;
    let first = oc.iter().map(|(i, _)| *i).min().unwrap_or(0);
    let order = |o: &[(usize, Observed)]| o.iter().map(|(i, _)| *i).collect::<Vec<_>>();
    if order(oc) != order(or) {
        return Ok(!ran_out_of_order(c, rust, state_diffs().is_empty(), events));
    }
    // Every difference of the group, each with the step it is about.
    let mut diffs: Vec<(usize, Diff)> = Vec::new();
    for (i, c_obs) in oc {
        if let Some((_, r_obs)) = or.iter().find(|(j, _)| j == i) {
            diffs.extend(compare::ret(c_obs, r_obs).map(|d| (*i, d)));
        }
    }
    let group = compare::reads_and_logs(oc.iter().map(|(_, o)| o), or.iter().map(|(_, o)| o));
    diffs.extend(
        group
            .into_iter()
            // The states after each step of the group (both drivers ran
            // them in the same order): a later step (an exit) may hide
            // what an earlier one left.
            .chain(state_diffs())
            .map(|d| (first, d)),
    );
    // A step's plan is the group's: a difference of a step run in the
    // window of a step whose allocation failed is that failure's.
    let leader = program.plans[first];
    // A process that exited inside another step's window (finding 0006).
    let exited_in_window = oc
        .iter()
        .any(|(j, _)| *j != first && matches!(program.program.steps[*j].command, Command::Exit));
    let explained: Vec<Option<&'static Rule>> = diffs
        .iter()
        .map(|(i, d)| {
            aftermath
                .explain_first(*i, d)
                .or_else(|| compare::explain(&program.program.steps[*i], leader, d))
                .or_else(|| compare::explain(&program.program.steps[*i], program.plans[*i], d))
                .or_else(|| aftermath.explain(*i, &program.program.steps[*i], d))
                .or_else(|| {
                    // What the processes read and logged, and their states,
                    // are the group's: any of its steps may explain them.
                    let of_group = !matches!(d, Diff::Ret { .. } | Diff::Ee { .. });
                    oc.iter().filter(|_| of_group).find_map(|(j, _)| {
                        let step = &program.program.steps[*j];
                        compare::explain(step, program.plans[*j], d)
                            .or_else(|| aftermath.explain(*j, step, d))
                    })
                })
                .or_else(|| {
                    exited_in_window
                        .then(|| compare::target_died_in_window(d))
                        .flatten()
                })
        })
        .collect();
    // Within a group the steps interleave: once one difference is a finding
    // after which the states diverge, the group's other differences follow
    // from it.
    let mut diverging = explained.iter().flatten().find(|r| r.diverges).copied();
    // A refused BINDER_SET_CONTEXT_MGR(_EXT) that left a node only the
    // Rust driver has (finding 0004): the states have diverged.
    for (j, c_obs) in oc {
        let r_obs = or.iter().find(|(k, _)| k == j).map(|(_, o)| o);
        let (sc, sr) = (&c.states, &rust.states);
        let states = sc.iter().zip(sr).find(|((k, _), _)| k == j);
        if let (Some(r_obs), Some(((_, s_c), (_, s_r)))) = (r_obs, states) {
            let step = &program.program.steps[*j];
            if compare::refused_manager_node(step, c_obs.ret, r_obs.ret, s_c, s_r) {
                let rule = compare::rule("failed-set-manager");
                diverging = diverging.or(Some(rule));
                let what = "the refused call left its node in Rust only".to_string();
                go_on &= settle_difference(
                    program,
                    *j,
                    &Diff::State {
                        pid: step.pid.index(),
                        what,
                        refs: Box::default(),
                    },
                    rule,
                    known,
                    events,
                );
            }
        }
    }
    for ((i, diff), rule) in diffs.iter().zip(explained) {
        match rule.or(diverging) {
            Some(rule) => go_on &= settle_difference(program, *i, diff, rule, known, events),
            None => {
                let what = format!("{diff:?}");
                return Err(failure(
                    program,
                    *i,
                    Check::DriversDiffer,
                    Flavour::Drivers { rule: NO_RULE },
                    what,
                ));
            }
        }
    }
    Ok(go_on)
}

/// The drivers ran a group in different orders (a lock one keeps across
/// its window): what follows may differ, and legitimately. True when
/// anything differs, after which the group's states are not compared.
fn ran_out_of_order(c: &Ran, rust: &Ran, same_states: bool, events: &mut Events) -> bool {
    let (oc, or) = (&c.observed, &rust.observed);
    let order = |o: &[(usize, Observed)]| o.iter().map(|(i, _)| *i).collect::<Vec<_>>();
    let rule = compare::rule("lock-order");
    let what = format!("C ran steps {:?}, Rust {:?}", order(oc), order(or));
    let any = !compare::reads_and_logs(oc.iter().map(|(_, o)| o), or.iter().map(|(_, o)| o))
        .is_empty()
        || !same_states
        || oc
            .iter()
            .zip(or)
            .any(|((_, a), (_, b))| a.ret != b.ret || a.ee != b.ee);
    if any {
        events.drivers_differ += 1;
        crate::check::narrate(|| format!("{}: {what}", rule.name));
    }
    any
}

/// A difference a rule explains: counted; a finding is kept as the run's
/// known failure (a log line's is not); whether to go on comparing.
fn settle_difference(
    program: &CmdProgram,
    i: usize,
    diff: &Diff,
    rule: &'static Rule,
    known: &mut Known,
    events: &mut Events,
) -> bool {
    events.drivers_differ += 1;
    if matches!(rule.kind, Kind::Finding(_)) && !matches!(diff, Diff::Log { .. }) {
        known.keep(difference(program, i, rule, format!("{diff:?}")));
    }
    !rule.diverges
}

/// The failure a known difference between the drivers is.
fn difference(program: &CmdProgram, i: usize, rule: &'static Rule, what: String) -> Box<Failure> {
    let doc = match rule.kind {
        Kind::Finding(doc) => format!("finding docs/findings/{doc}.md"),
        Kind::Intended(line) => format!("intended: {line}"),
    };
    failure(
        program,
        i,
        Check::DriversDiffer,
        Flavour::Drivers { rule: rule.name },
        format_args!("{}; {doc}: {what}", rule.title),
    )
    .with_detail(Detail::Drivers { rule: rule.name })
}

/// One driver against its naive model, for one top-level step.
fn against_model<O: Oracle>(
    program: &CmdProgram,
    i: usize,
    version: Version,
    model: &mut O,
    observed: &[(usize, Observed)],
    snapshot: &Snapshot,
    plan: Plan,
) -> Checked {
    let step = &program.program.steps[i];
    let expected = model.step(step, plan.fail);
    let (_, actual) = observed
        .iter()
        .find(|(j, _)| *j == i)
        .expect("the step was run");
    let flavour = Flavour::Driver(version);
    if expected.ret != actual.ret {
        let what = format!("ret: model {:?}, driver {:?}", expected.ret, actual.ret);
        return Err(failure(program, i, Check::Outcome, flavour, what));
    }
    if expected.ee != actual.ee {
        let what = format!(
            "extended error: model {:?}, driver {:?}",
            expected.ee, actual.ee
        );
        return Err(failure(program, i, Check::Outcome, flavour, what));
    }
    if expected.reads != actual.reads {
        let what = format!(
            "reads: model {:?}, driver {:?}",
            expected.reads, actual.reads
        );
        return Err(failure(program, i, Check::Reads, flavour, what));
    }
    // Which no-op work a driver queues (a node's work that finds nothing
    // to say) is not in the naive models: the read `poll` announced and
    // that failed with EAGAIN is left to the real drivers to check.
    let noop = |l: &&idpool::driver::Log| {
        **l != idpool::driver::Log::IoctlFailed(idpool::driver::Errno::Again)
    };
    let (el, al): (Vec<_>, Vec<_>) = (
        expected.log.iter().filter(noop).collect(),
        actual.log.iter().filter(noop).collect(),
    );
    if el != al {
        let what = format!("log: model {:?}, driver {:?}", expected.log, actual.log);
        return Err(failure(program, i, Check::KernelLog, flavour, what));
    }
    let model_state = model.snapshot();
    if model_state != *snapshot {
        let what = state_diff(&model_state, snapshot);
        return Err(failure(program, i, Check::ByHandle, flavour, what));
    }
    Ok(())
}

/// The first process whose state differs, in words.
fn state_diff(model: &Snapshot, driver: &Snapshot) -> String {
    for (pid, (m, d)) in model.procs.iter().zip(&driver.procs).enumerate() {
        if m != d {
            return format!("p{pid}: model {m:?}, driver {d:?}");
        }
    }
    format!("model {model:?}, driver {driver:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{keep_known_preferring, Finding};

    /// The known finding a trace body's run ends with.
    fn known_of(body: &str) -> Box<Failure> {
        let text = format!("idpool-trace v1\ntarget binder_commands\n{body}");
        let trace = crate::targets::parse_trace(&text).unwrap();
        let program = trace.body().downcast_ref::<CmdProgram>().unwrap();
        let (_, known) = super::super::run_counting(program).unwrap();
        known.expect("a known difference")
    }

    const NODE_INFO: &str = "procs 2
p0 set-manager
p0 node-info 0
";
    const MANAGER_HANDLE: &str = "procs 2
p1 set-manager
p0 send 0 node 1
p1 acquire 1
p1 free
p1 send 1 node 0
";

    /// The finding kept after meeting these, in this order.
    fn kept(bodies: &[&str], wanted: fn(Finding) -> bool) -> Option<Finding> {
        let mut kept = None;
        for body in bodies {
            keep_known_preferring(&mut kept, known_of(body), wanted);
        }
        kept.as_deref().and_then(Finding::of)
    }

    #[test]
    fn a_hunted_finding_is_kept_over_an_earlier_one() {
        assert_eq!(kept(&[NODE_INFO], |_| false), Some(Finding::NodeInfo));
        assert_eq!(
            kept(&[MANAGER_HANDLE], |_| false),
            Some(Finding::ManagerHandle)
        );
        let hunting = |f| f == Finding::ManagerHandle;
        // Nothing asked for, or everything: the first one met.
        let order = [NODE_INFO, MANAGER_HANDLE, NODE_INFO];
        assert_eq!(kept(&order, |_| false), Some(Finding::NodeInfo));
        assert_eq!(kept(&order, |_| true), Some(Finding::NodeInfo));
        // The hunted one, although it came second; once kept, it stays.
        assert_eq!(kept(&order, hunting), Some(Finding::ManagerHandle));
        let order = [MANAGER_HANDLE, NODE_INFO];
        assert_eq!(kept(&order, hunting), Some(Finding::ManagerHandle));
    }
}
