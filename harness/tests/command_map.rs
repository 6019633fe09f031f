//! The command-space map of `binder_commands`: a hand-written program
//! reaches exactly the cells its steps are in, read off the driver's state
//! as they run; a program without steps reaches none; and the map's table
//! covers the language.

use idpool_harness::targets;
use idpool_harness::targets::binder_commands::map::{
    self, all_cells, unreachable, Cell, ObjKind, Owner, Part, Rel,
};
use std::collections::BTreeSet;

/// The cells the run of a `binder_commands` trace body reaches.
fn cells_of(body: &str) -> BTreeSet<Cell> {
    let text = format!("idpool-trace v1\ntarget binder_commands\n{body}");
    let trace = targets::parse_trace(&text)
        .unwrap_or_else(|e| panic!("parsing the program: expected a trace, got {e}"));
    let (result, cells) = map::record(|| trace.check());
    if let Err(f) = result {
        panic!(
            "running the program: expected it to pass, got {}",
            f.message
        );
    }
    cells
}

fn cell(command: &'static str, part: Part) -> Cell {
    Cell { command, part }
}

fn object(kind: ObjKind, zero: Option<bool>, owner: Owner) -> Part {
    Part::Object { kind, zero, owner }
}

#[test]
fn a_program_reaches_exactly_the_cells_of_its_steps() {
    let body = "procs 3
p1 set-manager
p0 acquire 0
p0 call 0 node 1 handle 0
p1 reply handle 1
p2 send 0
p2 exit
p0 free
p2 free
p0 frozen-info p1
";
    let expected: BTreeSet<Cell> = [
        // No manager before the first registers.
        cell("set-manager", Part::Manager(Rel::None)),
        // p0 holds no handle 0 yet: it names the living manager.
        cell(
            "acquire",
            Part::Target {
                zero: true,
                names: Rel::Manager,
            },
        ),
        cell(
            "call",
            Part::Target {
                zero: true,
                names: Rel::Manager,
            },
        ),
        cell("call", object(ObjKind::Node, None, Owner::Sender)),
        // p0's handle 0 is on the manager's node, which receives the call.
        cell("call", object(ObjKind::Handle, Some(true), Owner::Receiver)),
        // p1's thread read p0's call; p1's handle 1 is p0's node 1, going
        // back to its owner.
        cell("reply", Part::Caller(Rel::Third)),
        cell(
            "reply",
            object(ObjKind::Handle, Some(false), Owner::Receiver),
        ),
        cell(
            "send",
            Part::Target {
                zero: true,
                names: Rel::Manager,
            },
        ),
        cell("send", Part::NoObject),
        cell("exit", Part::Manager(Rel::Manager)),
        // p0 read the reply's buffer; p2 has exited.
        cell("free", Part::Buffer(true)),
        cell("free", Part::Exited),
        cell("frozen-info", Part::Proc(Rel::Manager)),
    ]
    .into_iter()
    .collect();
    let reached = cells_of(body);
    let missing: Vec<String> = expected
        .difference(&reached)
        .map(|c| c.to_string())
        .collect();
    let extra: Vec<String> = reached
        .difference(&expected)
        .map(|c| c.to_string())
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the program's cells: expected {} cells, missing {missing:?}, unexpected {extra:?}",
        expected.len()
    );
}

#[test]
fn a_program_without_steps_reaches_no_cell() {
    let reached = cells_of("procs 2\n");
    assert!(
        reached.is_empty(),
        "no step: expected no cell, got {reached:?}"
    );
}

#[test]
fn the_recorder_runs_only_inside_record() {
    assert!(!map::recording(), "outside record(): expected no recorder");
    let (inside, cells) = map::record(map::recording);
    assert!(inside, "inside record(): expected a recorder, found none");
    assert!(
        cells.is_empty(),
        "no step run: expected no cell, got {cells:?}"
    );
    assert!(
        !map::recording(),
        "after record(): expected the recorder gone"
    );
}

#[test]
fn the_table_covers_every_command_and_gives_each_unreachable_cell_a_reason() {
    let cells = all_cells();
    for row in idpool::driver::VOCABULARY {
        let exited = cell(row.word, Part::Exited);
        assert!(
            cells.contains(&exited),
            "command `{}`: expected the cell `{exited}`, the table lacks it",
            row.word
        );
    }
    // A node object is always the sender's: its other owners are
    // unreachable, and say so; a handle object's owners are all reachable.
    for kind in ObjKind::ALL {
        for owner in Owner::ALL {
            let zeros: &[Option<bool>] = match kind {
                ObjKind::Handle | ObjKind::WeakHandle => &[Some(true), Some(false)],
                _ => &[None],
            };
            for &zero in zeros {
                let c = cell("send", object(kind, zero, owner));
                let node = matches!(kind, ObjKind::Node | ObjKind::WeakNode | ObjKind::Nodes);
                let expected = node && owner != Owner::Sender;
                assert_eq!(
                    unreachable(&c).is_some(),
                    expected,
                    "cell `{c}`: expected unreachable {expected}, the table says {:?}",
                    unreachable(&c)
                );
            }
        }
    }
}
