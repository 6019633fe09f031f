//! The drivers' per-process debug text: debugfs `binder/proc/<pid>` of the
//! C driver (`print_binder_proc`, `print_binder_node_nilocked`,
//! `print_binder_ref_olocked` in `drivers/android/binder.c`) and binderfs
//! `binder_logs/proc/<pid>` of the Rust one (`Process::debug_print`,
//! `Node::full_debug_print`), parsed into the lines this crate needs.
//!
//! The C driver prints, per node, its debug id, pointer, cookie,
//! `has_strong_ref`/`has_weak_ref`, local strong/weak, internal strong
//! counts and the pids holding refs; per ref, its debug id, handle, the
//! node's debug id, strong and weak counts and whether a death
//! notification is set (its pointer, not its cookie). The Rust driver
//! prints the node's two counts as `BINDER_GET_NODE_INFO_FOR_REF` reports
//! them, and per ref no death notification; in 7.3 its ref lines have no
//! newline, so several refs (and what follows them) share one line.

use crate::driver::Driver;

/// A node line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// Its debug id.
    pub debug_id: u32,
    /// `ptr`.
    pub ptr: u64,
    /// `cookie`.
    pub cookie: u64,
    /// `has_strong_ref`.
    pub has_strong: bool,
    /// `has_weak_ref`.
    pub has_weak: bool,
    /// What `BINDER_GET_NODE_INFO_FOR_REF` reports as `strong_count`
    /// (C: `local_strong_refs + internal_strong_refs`; Rust: `cs`).
    pub strong: u32,
    /// ... as `weak_count` (C: `local_weak_refs`; Rust: `cw`).
    pub weak: u32,
    /// The pids holding a ref to it, in the driver's order: one per
    /// process holding one (C `print_binder_node_nilocked`, binder.c, one
    /// `ref->proc->pid` per ref; Rust `Node::full_debug_print`,
    /// node.rs:276-279), so with several opens by one task a pid stands
    /// for each of its processes that holds a ref and cannot tell them
    /// apart. Nothing compares it: the holders are compared through each
    /// process's own ref lines.
    pub procs: Vec<i32>,
}

/// A ref line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefLine {
    /// Its debug id.
    pub debug_id: u32,
    /// Its handle (`desc`).
    pub handle: u32,
    /// Whether its node's owner is dead.
    pub dead_node: bool,
    /// The node's debug id.
    pub node: u32,
    /// Strong count.
    pub strong: u32,
    /// Weak count.
    pub weak: u32,
    /// Whether a death notification is set: `Some` for the C driver (its
    /// pointer is printed), `None` where the driver does not say.
    pub death: Option<bool>,
}

/// One process's debug text, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcText {
    /// The `proc N` line.
    pub pid: Option<i32>,
    /// Its nodes.
    pub nodes: Vec<NodeLine>,
    /// Its refs.
    pub refs: Vec<RefLine>,
    /// Its buffers delivered and not freed (C: `buffer N: ... delivered`,
    /// or `active` when a thread's `incoming transaction N` is its
    /// transaction: a call received and not answered yet; Rust:
    /// `allocated`): what userspace received and holds.
    pub buffers: usize,
    /// Its buffers allocated for transactions not delivered yet (C: `buffer
    /// N: ... active` but not incoming; Rust: `reserved`): one-way
    /// transactions queued behind the one in progress on their node, calls
    /// waiting in a queue.
    pub buffers_pending: usize,
    /// Lines about pending work (`pending transaction`, `has delivered
    /// dead binder`, ...), kept as they are.
    pub pending: Vec<String>,
    /// Lines not recognised (not threads, headers or the above).
    pub unparsed: Vec<String>,
}

fn num<T: std::str::FromStr>(w: Option<&&str>) -> Option<T> {
    w?.trim_end_matches(':').parse().ok()
}

fn hex(w: Option<&&str>, prefix: char) -> Option<u64> {
    u64::from_str_radix(w?.strip_prefix(prefix)?, 16).ok()
}

/// A flag printed as `1`/`0` (C) or `true`/`false` (Rust).
fn flag(words: &[&str], key: &str) -> Option<bool> {
    let i = words.iter().position(|w| *w == key)?;
    match *words.get(i + 1)? {
        "1" | "true" => Some(true),
        "0" | "false" => Some(false),
        _ => None,
    }
}

/// Value after `key` among `words`.
fn field<T: std::str::FromStr>(words: &[&str], key: &str) -> Option<T> {
    let i = words.iter().position(|w| *w == key)?;
    num(words.get(i + 1))
}

fn parse_node(words: &[&str], driver: Driver) -> Option<NodeLine> {
    // node N: uPTR cCOOKIE hs . hw . (C: ls . lw . is . iw . tr .)
    // (Rust: cs . cw .) [proc PID...]
    let debug_id = num(words.get(1))?;
    let ptr = hex(words.get(2), 'u')?;
    let cookie = hex(words.get(3), 'c')?;
    let has_strong = flag(words, "hs")?;
    let has_weak = flag(words, "hw")?;
    let (strong, weak) = match driver {
        Driver::C => (
            field::<u32>(words, "ls")? + field::<u32>(words, "is")?,
            field::<u32>(words, "lw")?,
        ),
        Driver::Rust => (field(words, "cs")?, field(words, "cw")?),
    };
    let procs = match words.iter().position(|w| *w == "proc") {
        Some(i) => words[i + 1..]
            .iter()
            .filter_map(|w| w.parse().ok())
            .collect(),
        None => Vec::new(),
    };
    Some(NodeLine {
        debug_id,
        ptr,
        cookie,
        has_strong,
        has_weak,
        strong,
        weak,
        procs,
    })
}

/// Parses a ref at the start of `words`; returns it and how many words it
/// took.
fn parse_ref(words: &[&str]) -> Option<(RefLine, usize)> {
    // ref N: desc H [dead ]node N s S w W [d PTR]
    let debug_id = num(words.get(1))?;
    if words.get(2) != Some(&"desc") {
        return None;
    }
    let handle = num(words.get(3))?;
    let mut i = 4;
    let dead_node = words.get(i) == Some(&"dead");
    if dead_node {
        i += 1;
    }
    if words.get(i) != Some(&"node")
        || words.get(i + 2) != Some(&"s")
        || words.get(i + 4) != Some(&"w")
    {
        return None;
    }
    let node = num(words.get(i + 1))?;
    let strong = num(words.get(i + 3))?;
    let weak = num(words.get(i + 5))?;
    i += 6;
    let death = if words.get(i) == Some(&"d") {
        let p = words.get(i + 1)?;
        i += 2;
        // %pK: zeros (or "(null)") for no notification, a hashed pointer
        // otherwise.
        Some(!(p.chars().all(|c| c == '0') || *p == "(null)"))
    } else {
        None
    };
    Some((
        RefLine {
            debug_id,
            handle,
            dead_node,
            node,
            strong,
            weak,
            death,
        },
        i,
    ))
}

/// Parses one process's debug text.
pub fn parse(text: &str, driver: Driver) -> ProcText {
    let mut out = ProcText::default();
    // C: the debug ids of the `active` buffers and of the transactions
    // threads have received (a buffer's debug id is its transaction's).
    let (mut active, mut incoming) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut rest: &[&str] = &words;
        // A line may hold several refs (the Rust driver's lack of newline)
        // and then another item.
        while !rest.is_empty() {
            match rest[0] {
                "ref" => match parse_ref(rest) {
                    Some((r, n)) => {
                        out.refs.push(r);
                        rest = &rest[n..];
                        continue;
                    }
                    None => out.unparsed.push(rest.join(" ")),
                },
                // The Rust driver's queued node work under a thread.
                "node" if rest.get(1) == Some(&"work") => out.pending.push(rest.join(" ")),
                "node" => match parse_node(rest, driver) {
                    Some(n) => out.nodes.push(n),
                    None => out.unparsed.push(rest.join(" ")),
                },
                "proc" if out.pid.is_none() => out.pid = num(rest.get(1)),
                // C: `delivered`, or `active` (its transaction not done:
                // queued, or a call received and not answered); Rust:
                // `allocated` or `reserved`.
                "buffer" if rest.last() == Some(&"active") => active.push(num::<u32>(rest.get(1))),
                "buffer" | "buffer:" if rest.last() == Some(&"reserved") => {
                    out.buffers_pending += 1
                }
                "buffer" | "buffer:" => out.buffers += 1,
                "binder" | "context" | "thread" | "proc" => {}
                // Work and transactions: `pending transaction`, `has ...`,
                // a thread's `outgoing`/`incoming`/`bad transaction`, a
                // thread's deferred `transaction complete` (Rust:
                // `(skipped) transaction complete` once it is dropped),
                // `transaction error: N`, `unknown work`.
                "pending" | "has" | "outgoing" | "incoming" | "bad" | "transaction"
                | "(skipped)" | "unknown" => {
                    if rest.starts_with(&["incoming", "transaction"]) {
                        incoming.push(num::<u32>(rest.get(2)));
                    }
                    out.pending.push(rest.join(" "))
                }
                _ => out.unparsed.push(rest.join(" ")),
            }
            break;
        }
    }
    for id in active {
        if id.is_some() && incoming.contains(&id) {
            out.buffers += 1;
        } else {
            out.buffers_pending += 1;
        }
    }
    out
}

/// The per-process blocks of a driver's global state file (C debugfs
/// `binder/state`, Rust binderfs `binder_logs/state`) of the device whose
/// context is `context`, in the file's order, each with its pid: a block
/// starts at a `proc <pid>` line (the only lines that start with `proc`;
/// node lines are indented) and runs to the next, its `context` line
/// names its device. What comes before the first block (the header, C's
/// dead nodes) is left out. A block is what a pid's own file prints of
/// that process after its `binder proc state:` line.
pub fn proc_blocks(state: &str, context: &str) -> Vec<(i32, String)> {
    let mut blocks: Vec<(i32, String)> = Vec::new();
    let mut current: Option<(i32, String)> = None;
    for line in state.split_inclusive('\n') {
        let header = line
            .trim_end_matches('\n')
            .strip_prefix("proc ")
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(pid) = header {
            blocks.extend(current.take());
            current = Some((pid, String::new()));
        }
        if let Some((_, text)) = &mut current {
            text.push_str(line);
        }
    }
    blocks.extend(current);
    let context_line = format!("context {context}");
    blocks.retain(|(_, text)| text.lines().nth(1) == Some(context_line.as_str()));
    blocks
}

/// From the C driver's debugfs `stats`: the global "proc: active N" count.
pub fn active_procs(stats: &str) -> Option<usize> {
    stats
        .lines()
        .find_map(|l| l.strip_prefix("proc: active "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_refs_without_newlines_are_split() {
        let text = "proc 70\ncontext b0\n  thread 70: l 12 need_return 0\n  ref 5: desc 0 node 3 s 1 w 1  ref 9: desc 1 dead node 7 s 0 w 1  buffer 4: 0 size 24:8:0 delivered\n";
        // The Rust driver's buffer lines, one allocated (delivered), one
        // reserved (queued), after a ref on the same line.
        let rust = "  ref 1: desc 1 node 4 s 0 w 9  buffer: 0 size 32 pid 21 oneway allocated\n  buffer: 32 size 32 pid 21 oneway reserved\n";
        let r = parse(rust, Driver::Rust);
        assert_eq!(
            (r.buffers, r.buffers_pending, r.refs.len()),
            (1, 1, 1),
            "{r:?}"
        );
        let p = parse(text, Driver::Rust);
        assert_eq!(p.pid, Some(70));
        assert_eq!(p.refs.len(), 2);
        assert_eq!(
            (p.refs[1].handle, p.refs[1].dead_node, p.refs[1].node),
            (1, true, 7)
        );
        assert_eq!(p.refs[0].death, None);
        assert_eq!(p.buffers, 1);
        assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
    }

    #[test]
    fn thread_work_lines_are_pending_work() {
        // A caller's thread in C, with its deferred completion; the Rust
        // driver's dropped completion.
        let c = "proc 7\ncontext b0\n  thread 7: l 12 need_return 0 tr 0\n    outgoing transaction 21: 0000000000000000 from 7:7 to 6:0 code 0 flags 0 pri 0 r1 elapsed 0ms node 1 size 0:0 offset 0\n    transaction complete\n";
        let p = parse(c, Driver::C);
        assert_eq!(p.pending.len(), 2, "{p:?}");
        assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
        let r = parse("    (skipped) transaction complete\n", Driver::Rust);
        assert_eq!((r.pending.len(), r.unparsed.len()), (1, 0));
    }

    #[test]
    fn a_c_call_received_and_not_answered_is_a_delivered_buffer() {
        // Captured from 7.3.4 (vm/examples/18-call-reply.trace, step 1):
        // the callee's buffer is `active` while its thread owes the reply.
        let callee = "proc 94\ncontext b0\n  thread 94: l 22 need_return 0 tr 0\n    incoming transaction 2: 000000000cdf4f75 from 95:95 to 94:94 code 0 flags 0 pri 0 a0 r0 elapsed 4ms node 1 size 24:8 offset 0\n  node 1: u0000000000000000 c0000000000000000 hs 1 hw 1 ls 2 lw 1 is 0 iw 0 tr 1\n  buffer 2: 0 size 24:8:0 active\n  buffer 3: 40 size 0:0:0 active\n";
        let p = parse(callee, Driver::C);
        assert_eq!((p.buffers, p.buffers_pending), (1, 1), "{p:?}");
        assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
    }

    #[test]
    fn state_files_are_cut_into_the_blocks_of_one_device() {
        // C's state: a header, dead nodes, then every process of every
        // device, the last opened first, with no line between them.
        let c = "binder state:\ndead nodes:\n  node 9: u0000000000000000 c0000000000000000 hs 0 hw 0 ls 0 lw 0 is 1 iw 1 tr 1 proc 71\nproc 71\ncontext b3\n  thread 72: l 12 need_return 0 tr 0\n  node 4: u0000000000000005 c0000000000000005 hs 1 hw 1 ls 0 lw 0 is 1 iw 1 tr 1 proc 70\nproc 70\ncontext b3\n  thread 70: l 12 need_return 0 tr 0\n  ref 3: desc 1 node 4 s 1 w 1 d 0000000000000000\nproc 71\ncontext b3\n  thread 71: l 12 need_return 0 tr 0\nproc 60\ncontext b2\n  thread 60: l 12 need_return 0 tr 0\n";
        let blocks = proc_blocks(c, "b3");
        let pids: Vec<i32> = blocks.iter().map(|(p, _)| *p).collect();
        assert_eq!(pids, [71, 70, 71]);
        assert!(blocks[0].1.starts_with("proc 71\ncontext b3\n  thread 72:"));
        // The node line ending in "proc 70" does not start a block.
        let p = parse(&format!("binder proc state:\n{}", blocks[0].1), Driver::C);
        assert_eq!((p.pid, p.nodes.len(), p.refs.len()), (Some(71), 1, 0));
        assert_eq!(p.nodes[0].procs, [70]);
        assert!(p.unparsed.is_empty(), "{:?}", p.unparsed);
        let p = parse(&format!("binder proc state:\n{}", blocks[1].1), Driver::C);
        assert_eq!((p.pid, p.nodes.len(), p.refs.len()), (Some(70), 0, 1));
        // Rust's: a blank line after each process, ref lines without
        // their newline.
        let rust = "binder state:\nproc 80\ncontext b0\n  thread 80: l 12 need_return false\n\nproc 81\ncontext b1\n  thread 81: l 12 need_return false\n  ref 2: desc 0 node 1 s 1 w 1\nproc 81\ncontext b1\n  thread 83: l 12 need_return false\n\n";
        let blocks = proc_blocks(rust, "b1");
        assert_eq!(blocks.len(), 2);
        assert_eq!(
            blocks[0].1,
            "proc 81\ncontext b1\n  thread 81: l 12 need_return false\n  ref 2: desc 0 node 1 s 1 w 1\n"
        );
        assert_eq!(
            blocks[1].1,
            "proc 81\ncontext b1\n  thread 83: l 12 need_return false\n\n"
        );
        assert!(proc_blocks("binder state:\n", "b1").is_empty());
    }

    #[test]
    fn rust_node_counts_are_cs_cw() {
        let p = parse(
            "  node 3: u0000000000000000 c0000000000000000 hs true hw false cs 2 cw 1 proc 71 72\n",
            Driver::Rust,
        );
        assert_eq!(p.nodes[0].strong, 2);
        assert_eq!(p.nodes[0].weak, 1);
        assert_eq!(p.nodes[0].procs, [71, 72]);
        assert!(p.nodes[0].has_strong && !p.nodes[0].has_weak);
    }
}
