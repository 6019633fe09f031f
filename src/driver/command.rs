//! The command language: what userspace asks of a Binder driver, restricted
//! to what creates, counts, looks up or frees references and handles.
//!
//! A [`Program`] is a handful of processes that opened the same Binder
//! device (one context) and a list of [`Step`]s, each one [`Command`]
//! issued by one process. Its text form is one step per line:
//!
//! ```text
//! procs 3
//! p1 set-manager
//! p0 acquire 0
//! p0 send 0 node 1 weak-handle 2
//! p1 free
//! p1 exit
//! ```
//!
//! `docs/commands.md` says which ioctls each command becomes, what
//! userspace does between commands (it reads everything the driver has
//! for it and answers as libbinder does) and what is observed.

use core::fmt;
use core::str::FromStr;

/// The most processes a program has.
pub const MAX_PROCS: usize = 4;
/// The most objects one transaction carries.
pub const MAX_OBJECTS: usize = 4;
/// Node pointers a process sends are `0..NODE_PTRS` (the cookie is the
/// pointer). The context manager's node is pointer 0, as
/// `BINDER_SET_CONTEXT_MGR` creates it.
pub const NODE_PTRS: u64 = 1 << 16;
/// The most nodes one [`Object::Nodes`] sends.
pub const MAX_NODE_RUN: u32 = 256;

/// A process of a program: `p0` to `p3`, in the order they opened the
/// device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(pub u8);

impl Pid {
    /// Its index in the program's processes.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

impl FromStr for Pid {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s
            .strip_prefix('p')
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|&n| usize::from(n) < MAX_PROCS)
            .ok_or_else(|| format!("expected a process p0..p{}, got {s:?}", MAX_PROCS - 1))?;
        Ok(Pid(n))
    }
}

/// The four reference-count commands of `BINDER_WRITE_READ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefCmd {
    /// `BC_INCREFS`: one more weak reference.
    IncRefs,
    /// `BC_ACQUIRE`: one more strong reference.
    Acquire,
    /// `BC_RELEASE`: one strong reference less.
    Release,
    /// `BC_DECREFS`: one weak reference less.
    DecRefs,
}

impl RefCmd {
    /// Every command, in `BC_*` order.
    pub const ALL: [RefCmd; 4] = [
        RefCmd::IncRefs,
        RefCmd::Acquire,
        RefCmd::Release,
        RefCmd::DecRefs,
    ];

    /// Whether it counts strong references.
    pub fn strong(self) -> bool {
        matches!(self, RefCmd::Acquire | RefCmd::Release)
    }

    /// Whether it adds a reference.
    pub fn increment(self) -> bool {
        matches!(self, RefCmd::IncRefs | RefCmd::Acquire)
    }

    /// Its word in traces: `increfs`, `acquire`, `release`, `decrefs`.
    pub fn word(self) -> &'static str {
        match self {
            RefCmd::IncRefs => "increfs",
            RefCmd::Acquire => "acquire",
            RefCmd::Release => "release",
            RefCmd::DecRefs => "decrefs",
        }
    }
}

/// An object a transaction carries (a `flat_binder_object`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Object {
    /// `BINDER_TYPE_BINDER` (`strong`) or `BINDER_TYPE_WEAK_BINDER`: one of
    /// the sender's own nodes, by pointer (the cookie is the pointer too).
    Node {
        /// The node's pointer, `0..NODE_PTRS`.
        ptr: u64,
        /// Strong or weak.
        strong: bool,
    },
    /// `BINDER_TYPE_HANDLE` (`strong`) or `BINDER_TYPE_WEAK_HANDLE`: a
    /// handle of the sender's.
    Handle {
        /// The sender's handle.
        handle: u32,
        /// Strong or weak.
        strong: bool,
    },
    /// `count` `BINDER_TYPE_BINDER` objects, the sender's nodes with
    /// pointers `first`, `first + 1`, ...: a short way to write the many
    /// references it takes to fill a handle table past a resize.
    Nodes {
        /// The first pointer.
        first: u64,
        /// How many, at most [`MAX_NODE_RUN`].
        count: u32,
    },
}

impl Object {
    /// The single objects it stands for (a [`Object::Nodes`] run expanded).
    pub fn expand(&self) -> impl Iterator<Item = Object> {
        let (single, run) = match *self {
            Object::Nodes { first, count } => (None, first..first + u64::from(count)),
            single => (Some(single), 0..0),
        };
        single
            .into_iter()
            .chain(run.map(|ptr| Object::Node { ptr, strong: true }))
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Object::Node { ptr, strong } => {
                write!(f, "{}node {ptr}", if strong { "" } else { "weak-" })
            }
            Object::Handle { handle, strong } => {
                write!(f, "{}handle {handle}", if strong { "" } else { "weak-" })
            }
            Object::Nodes { first, count } => write!(f, "nodes {first} {count}"),
        }
    }
}

/// One command of one process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `BINDER_SET_CONTEXT_MGR`: become the context manager (a node with
    /// pointer 0).
    SetManager,
    /// `BC_INCREFS`, `BC_ACQUIRE`, `BC_RELEASE` or `BC_DECREFS` on a handle,
    /// 0 included.
    Ref(RefCmd, u32),
    /// `BC_TRANSACTION` with `TF_ONE_WAY` to a handle (0: the context
    /// manager) carrying objects.
    Send {
        /// The target handle.
        to: u32,
        /// The objects, at most [`MAX_OBJECTS`].
        objects: Vec<Object>,
    },
    /// `BC_FREE_BUFFER` on the oldest transaction buffer the process has
    /// received and not freed; nothing when there is none.
    Free,
    /// `BC_REQUEST_DEATH_NOTIFICATION` on a handle.
    RequestDeath {
        /// The handle.
        handle: u32,
        /// The cookie the notification carries.
        cookie: u64,
    },
    /// `BC_CLEAR_DEATH_NOTIFICATION` on a handle.
    ClearDeath {
        /// The handle.
        handle: u32,
        /// The cookie given when it was requested.
        cookie: u64,
    },
    /// `BINDER_GET_NODE_INFO_FOR_REF` on a handle.
    NodeInfo(u32),
    /// The process closes its Binder file and exits: the driver releases
    /// everything it held. Its later commands do nothing.
    Exit,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::SetManager => f.write_str("set-manager"),
            Command::Ref(cmd, handle) => write!(f, "{} {handle}", cmd.word()),
            Command::Send { to, objects } => {
                write!(f, "send {to}")?;
                objects.iter().try_for_each(|o| write!(f, " {o}"))
            }
            Command::Free => f.write_str("free"),
            Command::RequestDeath { handle, cookie } => write!(f, "death {handle} {cookie}"),
            Command::ClearDeath { handle, cookie } => write!(f, "clear-death {handle} {cookie}"),
            Command::NodeInfo(handle) => write!(f, "node-info {handle}"),
            Command::Exit => f.write_str("exit"),
        }
    }
}

fn number<T: FromStr>(word: Option<&&str>, what: &str) -> Result<T, String> {
    let word = word.ok_or_else(|| format!("missing {what}"))?;
    word.parse()
        .map_err(|_| format!("expected {what}, got {word:?}"))
}

impl Command {
    /// Parses the words after the process (`acquire 0`, `send 0 node 1`).
    pub fn parse_words(words: &[&str]) -> Result<Command, String> {
        let (&head, rest) = words.split_first().ok_or("missing command")?;
        let exact = |n: usize, cmd: Command| {
            if rest.len() == n {
                Ok(cmd)
            } else {
                Err(format!(
                    "`{head}` takes {n} argument(s), got {}",
                    rest.len()
                ))
            }
        };
        match head {
            "set-manager" => exact(0, Command::SetManager),
            "free" => exact(0, Command::Free),
            "exit" => exact(0, Command::Exit),
            "node-info" => exact(1, Command::NodeInfo(number(rest.first(), "a handle")?)),
            "death" | "clear-death" => {
                let handle = number(rest.first(), "a handle")?;
                let cookie = number(rest.get(1), "a cookie")?;
                let cmd = if head == "death" {
                    Command::RequestDeath { handle, cookie }
                } else {
                    Command::ClearDeath { handle, cookie }
                };
                exact(2, cmd)
            }
            "send" => {
                let to = number(rest.first(), "a target handle")?;
                let objects = parse_objects(&rest[1.min(rest.len())..])?;
                Ok(Command::Send { to, objects })
            }
            word => match RefCmd::ALL.into_iter().find(|c| c.word() == word) {
                Some(cmd) => exact(1, Command::Ref(cmd, number(rest.first(), "a handle")?)),
                None => Err(format!(
                    "unknown command {word:?} (known: set-manager, increfs, acquire, release, \
                     decrefs, send, free, death, clear-death, node-info, exit)"
                )),
            },
        }
    }
}

fn parse_objects(words: &[&str]) -> Result<Vec<Object>, String> {
    let mut objects = Vec::new();
    let mut words = words.iter();
    while let Some(&kind) = words.next() {
        let (strong, base) = match kind.strip_prefix("weak-") {
            Some(base) => (false, base),
            None => (true, kind),
        };
        let object = match base {
            "node" => {
                let ptr: u64 = number(words.next(), "a node pointer")?;
                if ptr >= NODE_PTRS {
                    return Err(format!("node pointer {ptr} is not below {NODE_PTRS}"));
                }
                Object::Node { ptr, strong }
            }
            "handle" => Object::Handle {
                handle: number(words.next(), "a handle")?,
                strong,
            },
            "nodes" if strong => {
                let first: u64 = number(words.next(), "a node pointer")?;
                let count: u32 = number(words.next(), "a count")?;
                if count == 0 || count > MAX_NODE_RUN {
                    return Err(format!(
                        "a run of nodes has 1 to {MAX_NODE_RUN}, got {count}"
                    ));
                }
                if first + u64::from(count) > NODE_PTRS {
                    return Err(format!("node pointers end below {NODE_PTRS}"));
                }
                Object::Nodes { first, count }
            }
            _ => {
                return Err(format!(
                "expected an object (node K, weak-node K, handle H, weak-handle H), got {kind:?}"
            ))
            }
        };
        if objects.len() == MAX_OBJECTS {
            return Err(format!(
                "a transaction carries at most {MAX_OBJECTS} objects"
            ));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// One line of a program: a process and its command.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// Who issues it.
    pub pid: Pid,
    /// What.
    pub command: Command,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.pid, self.command)
    }
}

impl Step {
    /// Parses `p0 acquire 0`, split at single spaces.
    pub fn parse_words(words: &[&str]) -> Result<Step, String> {
        let (pid, rest) = words.split_first().ok_or("empty step")?;
        Ok(Step {
            pid: pid.parse()?,
            command: Command::parse_words(rest)?,
        })
    }
}

/// The processes of a program and what they do, in order.
///
/// # Invariants
///
/// `1 <= procs <= MAX_PROCS`, every step's process is below `procs`, and
/// `euids.len() == procs`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// Each process's effective uid (0 or another): `BINDER_SET_CONTEXT_MGR`
    /// compares it with the first manager's.
    pub euids: Vec<u32>,
    /// The steps, in program order.
    pub steps: Vec<Step>,
}

impl Program {
    /// How many processes.
    pub fn procs(&self) -> usize {
        self.euids.len()
    }

    /// The `procs` line of the text form: `procs 3` when every euid is 0,
    /// `procs 0 0 1000` otherwise.
    pub fn procs_line(&self) -> String {
        if self.euids.iter().all(|&e| e == 0) {
            format!("procs {}", self.euids.len())
        } else {
            let euids: Vec<String> = self.euids.iter().map(u32::to_string).collect();
            format!("procs {}", euids.join(" "))
        }
    }

    /// Parses the `procs` line's words after `procs`: a count (`procs 3`,
    /// every euid 0) or one euid per process, more than one
    /// (`procs 0 0 1000`).
    pub fn parse_procs(words: &[&str]) -> Result<Vec<u32>, String> {
        let numbers: Vec<u32> = words
            .iter()
            .map(|w| {
                w.parse()
                    .map_err(|_| format!("expected a number, got {w:?}"))
            })
            .collect::<Result<_, _>>()?;
        let euids = match numbers.as_slice() {
            [n] => vec![0; *n as usize],
            many => many.to_vec(),
        };
        if euids.is_empty() || euids.len() > MAX_PROCS {
            return Err(format!(
                "a program has 1 to {MAX_PROCS} processes, got {}",
                euids.len()
            ));
        }
        Ok(euids)
    }

    /// Checks the invariants: every step names a process the program has.
    pub fn check(&self) -> Result<(), String> {
        if self.euids.is_empty() || self.euids.len() > MAX_PROCS {
            return Err(format!(
                "a program has 1 to {MAX_PROCS} processes, got {}",
                self.euids.len()
            ));
        }
        match self.steps.iter().find(|s| s.pid.index() >= self.procs()) {
            Some(step) => Err(format!(
                "step `{step}` names {}, but the program has {} processes",
                step.pid,
                self.procs()
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) {
        let words: Vec<&str> = line.split(' ').collect();
        let step = Step::parse_words(&words).unwrap();
        assert_eq!(step.to_string(), line);
    }

    #[test]
    fn every_command_round_trips() {
        for line in [
            "p1 set-manager",
            "p0 increfs 0",
            "p0 acquire 7",
            "p2 release 1",
            "p3 decrefs 4294967295",
            "p0 send 0",
            "p0 send 0 node 1 weak-node 0 handle 3 weak-handle 2",
            "p0 send 3 nodes 100 64 node 2",
            "p1 free",
            "p1 death 2 9",
            "p1 clear-death 2 9",
            "p1 node-info 0",
            "p2 exit",
        ] {
            round_trip(line);
        }
    }

    #[test]
    fn bad_lines_say_why() {
        let err = |line: &str| {
            let words: Vec<&str> = line.split(' ').collect();
            Step::parse_words(&words).unwrap_err()
        };
        assert!(err("p4 exit").contains("p0..p3"));
        assert!(err("p0 fly").contains("unknown command"));
        assert!(err("p0 acquire").contains("missing a handle"));
        assert!(err("p0 acquire x").contains("expected a handle"));
        assert!(err("p0 exit 1").contains("takes 0"));
        assert!(err("p0 send 0 node 65536").contains("below 65536"));
        assert!(err("p0 send 0 nodes 1 0").contains("1 to 256"));
        assert!(err("p0 send 0 weak-nodes 1 2").contains("expected an object"));
        assert!(err("p0 send 0 thing 1").contains("expected an object"));
        assert!(err("p0 send 0 node 1 node 1 node 1 node 1 node 1").contains("at most 4"));
    }

    #[test]
    fn procs_line() {
        assert_eq!(Program::parse_procs(&["3"]), Ok(vec![0, 0, 0]));
        assert_eq!(Program::parse_procs(&["0", "1000"]), Ok(vec![0, 1000]));
        assert!(Program::parse_procs(&["5"]).is_err());
        assert!(Program::parse_procs(&["0"]).is_err());
        let p = Program {
            euids: vec![0, 1000],
            steps: vec![],
        };
        assert_eq!(p.procs_line(), "procs 0 1000");
    }
}
