//! The command-space map of `binder_commands`: which cells of the command
//! language a run reached.
//!
//! A **cell** is one command of [`VOCABULARY`] in one situation, read off
//! the Rust driver's state as the step runs (not off the program's text):
//!
//! - a command on a handle (`acquire H`, `death H C`, `send H ...`, ...):
//!   whether `H` is 0, and whose node it names for the sender ([`Rel`]):
//!   the sender's own, the living context manager's, a third process's, a
//!   dead process's, or none (the sender holds no such reference; handle 0
//!   the sender holds no reference on names the living manager's node);
//! - `reply`: who the caller is (the process whose call the replying
//!   thread read last and has not answered), with the same words;
//! - every object a transaction or reply carries, when it has a receiver
//!   that is alive: its kind, whether a handle object is handle 0, and
//!   whose node it is ([`Owner`]): the sender's, the receiver's (a node
//!   going back to its owner), the manager's, a third process's, a dead
//!   process's, or none (no such handle); a transaction with no object is
//!   a cell of its own;
//! - `freeze`, `thaw`, `frozen-info`: which process they name;
//! - `set-manager`, `set-manager-ext`, `exit`: the context manager at the
//!   step (none yet, the sender, another process, a dead one);
//! - `free`: whether the process holds a buffer;
//! - any command of a process that has exited (it does nothing).
//!
//! [`SHAPES`] gives each command its kind of cells, [`UNREACHABLE`] the
//! cells no program can reach and why: this module is the map's one
//! definition. A step run in another's window is classified against the
//! state its group started from. The classification runs only under
//! [`record`] (`triage map`): a fuzzing run pays one thread-local read per
//! step.

use idpool::driver::{Br, Command, Object, Observed, Pid, Ret, Snapshot, Step, Tid, VOCABULARY};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Whose node (or which process) a step addresses, seen from its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rel {
    /// The sender itself.
    Own,
    /// Another open of the device by the sender's task, alive: one pid,
    /// two Binder processes (`docs/commands.md`).
    Sibling,
    /// The context manager (alive, and not the sender).
    Manager,
    /// Another process that is alive and not the manager.
    Third,
    /// A process that has exited.
    Dead,
    /// Nothing: no such reference, no call to answer, no manager.
    None,
}

impl Rel {
    /// Every relation, in the map's order.
    pub const ALL: [Rel; 6] = [
        Rel::Own,
        Rel::Sibling,
        Rel::Manager,
        Rel::Third,
        Rel::Dead,
        Rel::None,
    ];

    fn word(self) -> &'static str {
        match self {
            Rel::Own => "self",
            Rel::Sibling => "sibling",
            Rel::Manager => "manager",
            Rel::Third => "third",
            Rel::Dead => "dead",
            Rel::None => "none",
        }
    }
}

/// Whose node an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The sender's.
    Sender,
    /// The receiver's: the node goes back to its owner.
    Receiver,
    /// The living context manager's (neither sender nor receiver).
    Manager,
    /// A third process's, alive and not the manager.
    Third,
    /// A process's that has exited.
    Dead,
    /// Nobody's: the sender holds no such handle.
    None,
}

impl Owner {
    /// Every owner, in the map's order.
    pub const ALL: [Owner; 6] = [
        Owner::Sender,
        Owner::Receiver,
        Owner::Manager,
        Owner::Third,
        Owner::Dead,
        Owner::None,
    ];

    fn word(self) -> &'static str {
        match self {
            Owner::Sender => "sender's",
            Owner::Receiver => "receiver's",
            Owner::Manager => "manager's",
            Owner::Third => "third's",
            Owner::Dead => "dead's",
            Owner::None => "nobody's",
        }
    }
}

/// The kind of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjKind {
    /// `node K`.
    Node,
    /// `weak-node K`.
    WeakNode,
    /// `nodes K N`.
    Nodes,
    /// `handle J`.
    Handle,
    /// `weak-handle J`.
    WeakHandle,
}

impl ObjKind {
    /// Every kind, in the map's order.
    pub const ALL: [ObjKind; 5] = [
        ObjKind::Node,
        ObjKind::WeakNode,
        ObjKind::Nodes,
        ObjKind::Handle,
        ObjKind::WeakHandle,
    ];

    fn word(self) -> &'static str {
        match self {
            ObjKind::Node => "node",
            ObjKind::WeakNode => "weak-node",
            ObjKind::Nodes => "nodes",
            ObjKind::Handle => "handle",
            ObjKind::WeakHandle => "weak-handle",
        }
    }

    fn is_handle(self) -> bool {
        matches!(self, ObjKind::Handle | ObjKind::WeakHandle)
    }
}

/// What distinguishes the cells of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// A command with nothing more to tell.
    Plain,
    /// A command on a handle: whether it is 0, and whose node it names.
    Target {
        /// Handle 0.
        zero: bool,
        /// Whose node.
        names: Rel,
    },
    /// `reply`: the caller.
    Caller(Rel),
    /// A transaction or reply with no object.
    NoObject,
    /// One object a transaction or reply carries to a living receiver.
    Object {
        /// Its kind.
        kind: ObjKind,
        /// For a handle object, whether it is handle 0.
        zero: Option<bool>,
        /// Whose node it is.
        owner: Owner,
    },
    /// `freeze`, `thaw`, `frozen-info`: the process named.
    Proc(Rel),
    /// `freeze`, `thaw`, `frozen-info` naming a pid that more than one
    /// living Binder process has (two opens by one task): the drivers go
    /// through them in their own orders.
    SharedPid,
    /// The context manager at the step (`None`: none registered yet).
    Manager(Rel),
    /// `free`: whether the process holds a buffer.
    Buffer(bool),
    /// A command of a process that has exited.
    Exited,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Part::Plain => f.write_str("-"),
            Part::Target { zero, names } => {
                write!(f, "{} -> {}", if zero { "0" } else { "H>0" }, names.word())
            }
            Part::Caller(rel) => write!(f, "caller {}", rel.word()),
            Part::NoObject => f.write_str("no object"),
            Part::Object { kind, zero, owner } => {
                let h = match zero {
                    Some(true) => " 0",
                    Some(false) => " J>0",
                    None => "",
                };
                write!(f, "carries {}{h} {}", kind.word(), owner.word())
            }
            Part::Proc(rel) => write!(f, "names {}", rel.word()),
            Part::SharedPid => f.write_str("names a pid with two processes"),
            Part::Manager(Rel::None) => f.write_str("no manager yet"),
            Part::Manager(Rel::Own) => f.write_str("sender is manager"),
            Part::Manager(Rel::Manager) => f.write_str("another is manager"),
            Part::Manager(rel) => write!(f, "manager {}", rel.word()),
            Part::Buffer(held) => f.write_str(if held { "a buffer held" } else { "no buffer" }),
            Part::Exited => f.write_str("sender exited"),
        }
    }
}

/// One cell: a command (its word in [`VOCABULARY`]) and its situation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    /// The command's word.
    pub command: &'static str,
    /// Its situation.
    pub part: Part,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.command, self.part)
    }
}

/// The kind of cells a command has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One cell ([`Part::Plain`]).
    Plain,
    /// [`Part::Target`].
    Handle,
    /// [`Part::Target`], [`Part::NoObject`] and [`Part::Object`].
    Transaction,
    /// [`Part::Caller`], [`Part::NoObject`] and [`Part::Object`].
    Reply,
    /// [`Part::Proc`].
    Proc,
    /// [`Part::Manager`].
    Manager,
    /// [`Part::Buffer`].
    Buffer,
}

/// Each command's kind of cells, one row per row of [`VOCABULARY`] (a
/// test holds them to the same words in the same order). Every command
/// also has [`Part::Exited`].
pub static SHAPES: &[(&str, Shape)] = &[
    ("set-manager", Shape::Manager),
    ("set-manager-ext", Shape::Manager),
    ("increfs", Shape::Handle),
    ("acquire", Shape::Handle),
    ("release", Shape::Handle),
    ("decrefs", Shape::Handle),
    ("send", Shape::Transaction),
    ("call", Shape::Transaction),
    ("reply", Shape::Reply),
    ("free", Shape::Buffer),
    ("death", Shape::Handle),
    ("clear-death", Shape::Handle),
    ("freeze-notify", Shape::Handle),
    ("clear-freeze-notify", Shape::Handle),
    ("node-info", Shape::Handle),
    ("node-debug", Shape::Plain),
    ("get-version", Shape::Plain),
    ("extended-error", Shape::Plain),
    ("register-looper", Shape::Plain),
    ("enter-looper", Shape::Plain),
    ("exit-looper", Shape::Plain),
    ("thread-exit", Shape::Plain),
    ("max-threads", Shape::Plain),
    ("freeze", Shape::Proc),
    ("thaw", Shape::Proc),
    ("frozen-info", Shape::Proc),
    ("oneway-spam", Shape::Plain),
    ("idle-timeout", Shape::Plain),
    ("idle-priority", Shape::Plain),
    ("attempt-acquire", Shape::Plain),
    ("acquire-result", Shape::Plain),
    ("exit", Shape::Manager),
];

/// Cells no program can reach, and why.
pub struct Unreachable {
    /// Whether `cell` is one of them.
    pub cells: fn(&Cell) -> bool,
    /// Why no program reaches them.
    pub why: &'static str,
}

/// Every cell no program can reach, by rule; the first rule that matches
/// gives the reason.
pub static UNREACHABLE: &[Unreachable] = &[Unreachable {
    cells: |c| {
        matches!(c.part, Part::Object { kind, owner, .. }
                if !kind.is_handle() && owner != Owner::Sender)
    },
    why: "a node object (`node`, `weak-node`, `nodes`) is always one of the sender's own nodes",
}];

fn shape(word: &str) -> Shape {
    SHAPES
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("command `{word}`: expected a row in map::SHAPES, found none"))
}

/// Every cell of `command`, in the map's order.
pub fn cells_of(command: &'static str) -> Vec<Cell> {
    let mut parts = Vec::new();
    let targets = || {
        [true, false].into_iter().flat_map(|zero| {
            Rel::ALL
                .into_iter()
                .map(move |names| Part::Target { zero, names })
        })
    };
    let objects = || {
        let mut v = vec![Part::NoObject];
        for kind in ObjKind::ALL {
            let zeros: &[Option<bool>] = if kind.is_handle() {
                &[Some(true), Some(false)]
            } else {
                &[None]
            };
            for &zero in zeros {
                for owner in Owner::ALL {
                    v.push(Part::Object { kind, zero, owner });
                }
            }
        }
        v
    };
    match shape(command) {
        Shape::Plain => parts.push(Part::Plain),
        Shape::Handle => parts.extend(targets()),
        Shape::Transaction => {
            parts.extend(targets());
            parts.extend(objects());
        }
        Shape::Reply => {
            parts.extend(Rel::ALL.map(Part::Caller));
            parts.extend(objects());
        }
        // `pN` always names a process of the program; the context has one
        // manager, which no other process is a third to.
        Shape::Proc => {
            parts.extend(
                [Rel::Own, Rel::Sibling, Rel::Manager, Rel::Third, Rel::Dead].map(Part::Proc),
            );
            parts.push(Part::SharedPid);
        }
        Shape::Manager => parts.extend(
            [Rel::None, Rel::Own, Rel::Sibling, Rel::Manager, Rel::Dead].map(Part::Manager),
        ),
        Shape::Buffer => parts.extend([Part::Buffer(true), Part::Buffer(false)]),
    }
    parts.push(Part::Exited);
    parts
        .into_iter()
        .map(|part| Cell { command, part })
        .collect()
}

/// Every cell of the language, command by command in [`VOCABULARY`]'s
/// order.
pub fn all_cells() -> Vec<Cell> {
    VOCABULARY.iter().flat_map(|r| cells_of(r.word)).collect()
}

/// Why no program reaches `cell`, if none does.
pub fn unreachable(cell: &Cell) -> Option<&'static str> {
    UNREACHABLE.iter().find(|u| (u.cells)(cell)).map(|u| u.why)
}

// ---- recording ----------------------------------------------------------------

thread_local! {
    static RECORDER: RefCell<Option<BTreeSet<Cell>>> = const { RefCell::new(None) };
}

/// Whether a recorder runs on this thread.
pub fn recording() -> bool {
    RECORDER.with(|r| r.borrow().is_some())
}

fn reach(cell: Cell) {
    RECORDER.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.insert(cell);
        }
    });
}

/// Runs `f` and returns its result with every cell reached meanwhile on
/// this thread.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, BTreeSet<Cell>) {
    let outer = RECORDER.with(|r| r.borrow_mut().replace(BTreeSet::new()));
    let result = f();
    let seen = RECORDER.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (result, seen.unwrap_or_default())
}

// ---- classifying --------------------------------------------------------------

/// What the map follows across a run besides the driver's state: the
/// context manager, and the calls each thread owes a reply.
#[derive(Debug, Default)]
pub struct Follow {
    /// The program's processes (`None`: each its own task).
    procs: Option<idpool::driver::Procs>,
    /// The process that registered last, if any.
    manager: Option<Pid>,
    /// Per thread, the callers of the calls it read and has not answered,
    /// the last one last (`None`: a caller the map could not tell).
    owed: BTreeMap<(Pid, Tid), Vec<Option<Pid>>>,
}

impl Follow {
    /// Nothing followed yet, for a program of these processes.
    pub fn new(procs: &idpool::driver::Procs) -> Follow {
        Follow {
            procs: Some(procs.clone()),
            ..Follow::default()
        }
    }

    fn same_task(&self, a: Pid, b: Pid) -> bool {
        self.procs.as_ref().map_or(a == b, |p| p.same_task(a, b))
    }

    /// Whether more than one living process has `pid`'s task.
    fn shared_pid(&self, state: &Snapshot, pid: Pid) -> bool {
        let alive = |q: Pid| Self::alive(state, q);
        self.procs
            .as_ref()
            .is_some_and(|p| p.opens_alive(pid, alive) > 1)
    }
    /// Classifies the steps of one group (`observed`, in the order they
    /// finished) against `before`, the Rust driver's state when the group
    /// started, and records their cells; then follows what they did.
    pub fn group(&mut self, steps: &[Step], before: &Snapshot, observed: &[(usize, Observed)]) {
        for (j, o) in observed {
            let step = &steps[*j];
            for cell in self.classify(step, before) {
                reach(cell);
            }
            self.after(step, before, o);
        }
    }

    fn alive(state: &Snapshot, pid: Pid) -> bool {
        state.procs.get(pid.index()).is_some_and(|p| p.alive)
    }

    /// `pid` seen from `sender`.
    fn rel(&self, state: &Snapshot, sender: Pid, pid: Pid) -> Rel {
        if !Self::alive(state, pid) {
            Rel::Dead
        } else if pid == sender {
            Rel::Own
        } else if self.same_task(pid, sender) {
            Rel::Sibling
        } else if self.manager == Some(pid) {
            Rel::Manager
        } else {
            Rel::Third
        }
    }

    /// The owner of the node `handle` names for `pid`: its reference's
    /// node, or for handle 0 without one, the living manager.
    fn owner_of(&self, state: &Snapshot, pid: Pid, handle: u32) -> Option<Pid> {
        let refs = &state.procs[pid.index()].refs;
        match refs.get(&handle) {
            Some(r) => Some(r.node.owner),
            None if handle == 0 => self.manager.filter(|&m| Self::alive(state, m)),
            None => None,
        }
    }

    fn target(&self, state: &Snapshot, sender: Pid, handle: u32) -> (Part, Option<Pid>) {
        let owner = self.owner_of(state, sender, handle);
        let names = owner.map_or(Rel::None, |o| self.rel(state, sender, o));
        let part = Part::Target {
            zero: handle == 0,
            names,
        };
        (part, owner)
    }

    fn object(&self, state: &Snapshot, sender: Pid, receiver: Pid, object: &Object) -> Part {
        let (kind, zero, owner) = match *object {
            Object::Node { strong, .. } => {
                let kind = if strong {
                    ObjKind::Node
                } else {
                    ObjKind::WeakNode
                };
                (kind, None, Some(sender))
            }
            Object::Nodes { .. } => (ObjKind::Nodes, None, Some(sender)),
            Object::Handle { handle, strong } => {
                let kind = if strong {
                    ObjKind::Handle
                } else {
                    ObjKind::WeakHandle
                };
                let owner = state.procs[sender.index()]
                    .refs
                    .get(&handle)
                    .map(|r| r.node.owner);
                (kind, Some(handle == 0), owner)
            }
        };
        let owner = match owner {
            None => Owner::None,
            Some(o) if !kind.is_handle() && o == sender => Owner::Sender,
            Some(o) if !Self::alive(state, o) => Owner::Dead,
            Some(o) if o == receiver => Owner::Receiver,
            Some(o) if o == sender => Owner::Sender,
            Some(o) if self.manager == Some(o) => Owner::Manager,
            Some(_) => Owner::Third,
        };
        Part::Object { kind, zero, owner }
    }

    /// The cells `step` reaches on `state`, the state before it.
    pub fn classify(&self, step: &Step, state: &Snapshot) -> Vec<Cell> {
        let command = step.command.row().word;
        let cell = |part| Cell { command, part };
        let sender = step.pid;
        if !Self::alive(state, sender) {
            return vec![cell(Part::Exited)];
        }
        let objects = |receiver: Option<Pid>, cells: &mut Vec<Cell>| {
            let Some(receiver) = receiver.filter(|&r| Self::alive(state, r)) else {
                return;
            };
            let payload = step.command.payload().expect("a transaction has a payload");
            if payload.objects.is_empty() {
                cells.push(cell(Part::NoObject));
            }
            for o in &payload.objects {
                cells.push(cell(self.object(state, sender, receiver, o)));
            }
        };
        let mut cells = Vec::new();
        match &step.command {
            Command::Send { to, .. } | Command::Call { to, .. } => {
                let (part, receiver) = self.target(state, sender, *to);
                cells.push(cell(part));
                objects(receiver, &mut cells);
            }
            Command::Reply(_) => {
                let caller = self
                    .owed
                    .get(&(sender, step.tid))
                    .and_then(|v| v.last().copied().flatten());
                let rel = caller.map_or(Rel::None, |c| self.rel(state, sender, c));
                cells.push(cell(Part::Caller(rel)));
                objects(caller, &mut cells);
            }
            Command::Ref(_, h)
            | Command::NodeInfo(h)
            | Command::RequestDeath { handle: h, .. }
            | Command::ClearDeath { handle: h, .. }
            | Command::RequestFreeze { handle: h, .. }
            | Command::ClearFreeze { handle: h, .. } => {
                cells.push(cell(self.target(state, sender, *h).0));
            }
            Command::Freeze { target: p, .. } | Command::Thaw(p) | Command::FrozenInfo(p) => {
                cells.push(cell(Part::Proc(self.rel(state, sender, *p))));
                if self.shared_pid(state, *p) {
                    cells.push(cell(Part::SharedPid));
                }
            }
            Command::SetManager | Command::SetManagerExt { .. } | Command::Exit => {
                let rel = self
                    .manager
                    .map_or(Rel::None, |m| self.rel(state, sender, m));
                cells.push(cell(Part::Manager(rel)));
            }
            Command::Free => {
                cells.push(cell(Part::Buffer(state.procs[sender.index()].buffers > 0)));
            }
            _ => cells.push(cell(Part::Plain)),
        }
        cells
    }

    /// Follows what `step` did: a registered manager, the calls read and
    /// the replies written.
    fn after(&mut self, step: &Step, before: &Snapshot, o: &Observed) {
        match (&step.command, o.ret) {
            (Command::SetManager | Command::SetManagerExt { .. }, Some(Ret::Ok)) => {
                self.manager = Some(step.pid);
            }
            (Command::Reply(_), Some(r)) if r != Ret::Skipped => {
                if let Some(v) = self.owed.get_mut(&(step.pid, step.tid)) {
                    v.pop();
                }
            }
            (Command::Exit, _) => self.owed.retain(|(p, _), _| *p != step.pid),
            (Command::ThreadExit, _) => {
                self.owed.remove(&(step.pid, step.tid));
            }
            _ => {}
        }
        // The calls read while draining: from the step's sender when it
        // is a call that reached them, else from a caller the map cannot
        // tell.
        let caller = matches!(step.command, Command::Call { .. }) && Self::alive(before, step.pid);
        for (pid, reads) in o.reads.iter().enumerate() {
            for read in reads {
                if matches!(read.br, Br::Call(_)) {
                    let pid = Pid(pid as u8);
                    let from = caller.then_some(step.pid);
                    self.owed.entry((pid, read.tid)).or_default().push(from);
                }
            }
        }
    }
}

/// How many inputs reached each cell.
#[derive(Clone, Debug, Default)]
pub struct Map {
    /// Inputs replayed.
    pub inputs: usize,
    /// Per cell reached, how many inputs reached it.
    pub reached: BTreeMap<Cell, usize>,
}

impl Map {
    /// Counts one input's cells.
    pub fn add(&mut self, cells: &BTreeSet<Cell>) {
        self.inputs += 1;
        for &c in cells {
            *self.reached.entry(c).or_default() += 1;
        }
    }

    /// Every cell of the language with its count (0: never reached) and,
    /// for an unreachable one, why.
    pub fn rows(&self) -> Vec<(Cell, usize, Option<&'static str>)> {
        all_cells()
            .into_iter()
            .map(|c| {
                (
                    c,
                    self.reached.get(&c).copied().unwrap_or(0),
                    unreachable(&c),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_vocabulary() {
        let words: Vec<&str> = VOCABULARY.iter().map(|r| r.word).collect();
        let shaped: Vec<&str> = SHAPES.iter().map(|(w, _)| *w).collect();
        assert_eq!(
            shaped, words,
            "map::SHAPES: expected one row per VOCABULARY row, in order"
        );
    }

    #[test]
    fn every_rule_names_some_cell() {
        let cells = all_cells();
        for u in UNREACHABLE {
            assert!(
                cells.iter().any(|c| (u.cells)(c)),
                "unreachable rule `{}`: expected it to match a cell, matched none",
                u.why
            );
        }
        let distinct: BTreeSet<_> = cells.iter().collect();
        assert_eq!(distinct.len(), cells.len(), "every cell once");
    }
}
