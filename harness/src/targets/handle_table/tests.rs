//! The `handle_table` runner's unit tests: the model's record of the bits,
//! the bulk insert's hint, tables started from given handles, the whole
//! check, and the known findings retiring their side.

use super::checks::{check_reclaimable, check_whole};
use super::model::{key, Hint, TableModel};
use super::node::Node;
use super::ops::{HandleSel, TableOp};
use super::runner::{run_sides, run_versions};
use super::sides::{sides, Versioned};
use super::start::StartSet;
use crate::bits::{self, Expected, Probe};
use crate::check::{At, Check, Checked};
use crate::domain::Count;
use crate::events::Events;
use crate::history::{self, Versions};
use crate::oracle::Policy;
use crate::text::OpText;
use idpool::{
    AllocSite, AugmentedTree, Corruption, DBitmap, Error, HandleTable, IdPool, Request,
    SharedHandleTable, Shrinker, Version,
};

/// The target these tests run as.
const TARGET: &str = "handle_table";

/// The pool read one id at a time after a corruption, on the C driver
/// as first merged (bit 0 reserved): the table model's record of the
/// bits expects the corrupted bit and the reserved one, so neither is
/// a finding; the live handles alone would flag both.
#[test]
fn corrupted_and_reserved_bits_are_expected_not_findings() {
    let version = Version::C2024_06;
    let mut table = HandleTable::<DBitmap>::with_version(version);
    let mut model = TableModel::new(Some(Policy::C), version);
    let mut events = Events::default();
    for node in 1..=3 {
        let insert = Request::Insert {
            node,
            is_manager: false,
        };
        let h = table.run(insert).unwrap();
        assert_eq!(
            model.insert(node, false, &mut Hint::default(), &mut events),
            Ok(h)
        );
    }
    table.faults().corrupt(Corruption::SetBit(9));
    table.faults().corrupt(Corruption::ClearBit(2));
    model.corruptions.push(Corruption::SetBit(9));
    model.corruptions.push(Corruption::ClearBit(2));
    // The corruptions land at the start of the next critical section.
    assert_eq!(table.run(Request::Increment(1)), model.increment(1));
    let probe = Probe::everything_of(table.capacity(), &model.refs);
    let pool = table.refs().pool();
    // The model knows the pool's bits, and its record holds the
    // reserved bit and both corruptions: the read finds nothing.
    assert!(model.has_bits() && model.knows_bits());
    assert_eq!(model.compare_bits(pool, &probe), Ok(()));
    let record: Vec<u32> = model.bits.iter().map(|b| b as u32).collect();
    assert_eq!(record, [0, 1, 3, 9], "reserved 0, 2 cleared, 9 set");
    let live_only = Expected::exactly(&model.refs);
    assert_eq!(
        bits::compare(pool, live_only, &probe),
        Err(vec![(0, false, true), (2, true, false), (9, false, true)])
    );
}

/// A model holding handles 1 to 20, then `prepare`d, and a bulk insert
/// of 100 fresh nodes into it, the hint carried from insert to insert
/// (`carry`) or a fresh search each time: the ids, and what the model
/// says after (capacity, bits, warnings, events).
fn bulk_insert(
    policy: Policy,
    version: Version,
    prepare: impl Fn(&mut TableModel),
    carry: bool,
) -> (Vec<Result<u32, Error>>, String) {
    let mut model = TableModel::new(Some(policy), version);
    let mut events = Events::default();
    for node in 1..=20 {
        model
            .insert(node, false, &mut Hint::default(), &mut events)
            .unwrap();
    }
    prepare(&mut model);
    let mut hint = Hint::default();
    let ids = (100..200)
        .map(|node| {
            if !carry {
                hint = Hint::default();
            }
            model.insert(node, false, &mut hint, &mut events)
        })
        .collect();
    let after = format!(
        "cap {} bits {:?} warnings {:?} {events:?}",
        model.cap, model.bits, model.warnings
    );
    (ids, after)
}

/// The hint only saves work: a bulk insert hands out the same ids with
/// a hint carried from insert to insert as with a fresh search each
/// time, and leaves the model the same.
/// - A corrupted C pool (a bit set that no handle holds) whose map goes
///   away halfway (a failed grow): the slow scan that replaces the map
///   finds the id the set bit hid, below where the map search had got.
/// - Rust's first posting on a pool with a live handle's bit cleared:
///   it takes the bit, logs, and searches on.
/// - Rust mainline after the process died: every insert refused.
///
/// A bulk insert into a corrupted pool once searched from 0 at every
/// insert, which made corpus inputs of thousands of handles quadratic.
#[test]
fn a_bulk_insert_answers_as_fresh_searches_do() {
    let hidden = |m: &mut TableModel| {
        m.corruptions.push(Corruption::SetBit(30));
        m.pending_at.insert(key(AllocSite::Grow), 1);
    };
    let (ids, after) = bulk_insert(Policy::C, Version::CMainline, hidden, true);
    assert_eq!(
        (ids.clone(), after.clone()),
        bulk_insert(Policy::C, Version::CMainline, hidden, false)
    );
    assert!(
        after.starts_with("cap 0 bits {}"),
        "the grow failed: map disabled: {after}"
    );
    assert_eq!(ids[9], Ok(31), "the map search skips the set bit");
    assert_eq!(ids[41], Ok(63), "the map's last id");
    assert_eq!(ids[42], Ok(30), "the slow scan finds what the set bit hid");
    assert_eq!(ids[43], Ok(64));

    let cleared = |m: &mut TableModel| m.corruptions.push(Corruption::ClearBit(5));
    let (ids, after) = bulk_insert(Policy::Rust, Version::RustV1, cleared, true);
    assert_eq!(
        (ids.clone(), after.clone()),
        bulk_insert(Policy::Rust, Version::RustV1, cleared, false)
    );
    assert_eq!(
        ids[0],
        Ok(21),
        "the mismatch at 5 is logged, the search goes on"
    );
    assert!(
        after.contains("Mismatch { id: 5, warn_on: false }"),
        "{after}"
    );

    let dead = |m: &mut TableModel| m.dead = true;
    let (ids, after) = bulk_insert(Policy::Rust, Version::RustMainline, dead, true);
    let fresh = bulk_insert(Policy::Rust, Version::RustMainline, dead, false);
    assert_eq!((ids.clone(), after.clone()), fresh);
    assert!(ids.iter().all(|r| *r == Err(Error::DeadProcess)), "{ids:?}");
}

/// A table built from handles across the 16- and 17-bit boundaries
/// and at the top of the range: every flavour agrees with its model
/// (by_handle, by_node, capacity, every bit), on every version, and
/// the inserts and drops on top keep it so.
#[test]
fn start_from_high_handles_runs_on_every_version() {
    let start =
        StartSet::parse(&["65535=n1", "65536=n2", "131071=n3", "262144=n4", "0=n5"]).unwrap();
    let ops = [
        TableOp::StartFrom(start),
        TableOp::Insert {
            node: Node(2),
            manager: false,
        },
        TableOp::Insert {
            node: Node(9),
            manager: false,
        },
        TableOp::Lookup(Node(4)),
        TableOp::InsertMany(Count(70)),
        TableOp::Decrement(HandleSel::Highest),
        TableOp::DropFrom(HandleSel::Nth(72)),
        TableOp::DropAll { lifo: true },
    ];
    for b in 0..8 {
        let versions = Versions::decode(b);
        let events = run_versions(TARGET, &versions, &ops).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(events.started_above_16_bits, 1);
        assert!(events.shrink_committed > 0, "{events:?}");
    }
}

/// The model of a built table says which capacity the build gives
/// without the allocator's grow loop: one table of cases.
#[test]
fn started_capacity_cases() {
    for (highest, cap) in [
        (0, 64),
        (63, 64),
        (64, 128),
        (65_535, 65_536),
        (65_536, 131_072),
    ] {
        let start = StartSet::new(&[(highest, 1)]).unwrap();
        let model =
            TableModel::new(Some(Policy::Rust), Version::RustMainline).started(Some(&start));
        assert_eq!(model.cap, cap, "highest {highest}");
        let scan = TableModel::new(None, Version::RustMainline).started(Some(&start));
        assert_eq!(scan.cap, 0);
    }
}

/// The augmented tree's record of its ids is compared with the live
/// handles; the linear scan has none, so nothing is compared.
#[test]
fn the_tree_is_read_and_the_linear_scan_is_not() {
    let version = Version::RustMainline;
    let tree_model = TableModel::tree(version);
    let scan_model = TableModel::new(None, version);
    let mut tree = HandleTable::<AugmentedTree>::with_version(version);
    let insert = Request::Insert {
        node: 1,
        is_manager: false,
    };
    assert_eq!(tree.run(insert), Ok(1));
    let probe = Probe::everything_of(64, &tree_model.refs);
    // The model holds no handle: the tree's id 1 is a difference.
    assert_eq!(
        tree_model.compare_bits(tree.refs().pool(), &probe),
        Err(vec![(1, false, true)])
    );
    // Nothing is known of the scan's bits, so even a pool that has
    // some (the tree's) is not compared against it.
    assert!(!scan_model.knows_bits());
    assert_eq!(scan_model.compare_bits(tree.refs().pool(), &probe), Ok(()));
}

/// Where a check outside a run says it failed: step 0, `op`.
fn first_step(op: &TableOp) -> At<'_, TableOp> {
    At {
        target: TARGET,
        step: 0,
        op,
        capacity: 64,
    }
}

/// Each side's whole check holds it to the version its model follows
/// (the rule's own cases are `designs`' unit test): a table of
/// another version fails, naming both.
#[test]
fn the_whole_check_holds_a_table_to_its_models_version() {
    let op = TableOp::Kill;
    let at = first_step(&op);
    let (v3, june) = (Version::CV3, Version::C2024_06);
    let table = Versioned::<HandleTable<DBitmap>>::boxed(v3, None).expect("a new table");
    let own = TableModel::new(Some(Policy::C), v3);
    assert_eq!(check_whole(&at, table.as_ref(), &own), Ok(()));
    let other = TableModel::new(Some(Policy::C), june);
    let failure = check_whole(&at, table.as_ref(), &other).expect_err("another version");
    assert_eq!(failure.check, Check::Version);
    assert!(
        failure
            .message
            .contains("built for c-2024-06, the table reports c-v3 and its pool c-v3"),
        "{}",
        failure.message
    );
}

/// The whole check reads the table's own `is_dead` against the
/// model's: a killed table beside a model that saw no kill fails, and
/// passes once the model has seen it; the shared side (the lock real
/// threads take) is held to it like the owned ones.
#[test]
fn the_whole_check_holds_a_table_to_its_models_death() {
    let op = TableOp::Kill;
    let at = first_step(&op);
    let rust = Version::RustMainline;
    for mut table in [
        Versioned::<SharedHandleTable<IdPool>>::boxed(rust, None).expect("a new table"),
        Versioned::<HandleTable<IdPool>>::boxed(rust, None).expect("a new table"),
    ] {
        let mut model = TableModel::new(Some(Policy::Rust), rust);
        assert_eq!(check_whole(&at, table.as_ref(), &model), Ok(()));
        table.kill();
        let failure = check_whole(&at, table.as_ref(), &model).expect_err("killed, alive");
        assert_eq!(failure.check, Check::Death);
        assert!(
            failure
                .message
                .contains("the table says the process is dead, the model alive"),
            "{}",
            failure.message
        );
        model.dead = true;
        assert_eq!(check_whole(&at, table.as_ref(), &model), Ok(()));
    }
}

/// The boundary checks read the shrinker's `count_objects` against the
/// model's reclaim rule: a model whose pool grew to 256 ids with none
/// used expects 192 back where the fresh table, at 64, counts none.
#[test]
fn the_boundary_checks_hold_the_shrinker_to_its_reclaimable_count() {
    let op = TableOp::Reclaim;
    let at = first_step(&op);
    let rust = Version::RustMainline;
    let table = Versioned::<HandleTable<Shrinker>>::boxed(rust, None).expect("a new table");
    let mut model = TableModel::shrinker(rust);
    assert_eq!(check_reclaimable(&at, table.as_ref(), &model), Ok(()));
    model.cap = 256;
    let failure = check_reclaimable(&at, table.as_ref(), &model).expect_err("256 against 64");
    assert_eq!(failure.check, Check::Reclaimable);
    assert!(
        failure.message.contains(
            "a reclaim would give back Some(192) ids by the model, the table counts Some(0)"
        ),
        "{}",
        failure.message
    );
}

/// Operations from their trace text, one a line.
fn ops(text: &str) -> Vec<TableOp> {
    text.lines()
        .map(|l| TableOp::parse_text(&l.split_whitespace().collect::<Vec<_>>()).unwrap())
        .collect()
}

/// June 2024 with the collision at step 1, then more work: the
/// collision is the run's failure, but only at the end, and every
/// other side ran and was checked to the last step.
/// `program` run on `versions`, and what the harness narrated.
fn narrated(versions: &Versions, program: &str) -> (Checked<Events>, Vec<String>) {
    crate::check::start_narrating();
    let result = run_versions(TARGET, versions, &ops(program));
    let narration = crate::check::take_narration();
    crate::check::stop_narrating();
    (result, narration)
}

/// The narration from step `step` on.
fn from_step(narration: &[String], step: usize) -> Vec<&String> {
    let start = format!("step {step}:");
    narration
        .iter()
        .skip_while(|l| !l.starts_with(&start))
        .collect()
}

const COLLISION_THEN_MORE: &str = "insert n1 manager\ninsert n6 manager\n\
                                   insert-many 65\ndrop-all lifo\nlookup n1";

#[test]
fn a_known_finding_retires_its_side_and_the_others_run_on() {
    let versions = Versions {
        c: Version::C2024_06,
        ..Versions::MAINLINE
    };
    let (result, narration) = narrated(&versions, COLLISION_THEN_MORE);
    let failure = result.expect_err("the collision");
    assert_eq!(
        history::Finding::of(&failure),
        Some(history::Finding::Collision)
    );
    assert_eq!(failure.step, 1);
    // After the crash the C side is gone and the others are checked.
    let after = from_step(&narration, 2);
    let said = |prefix: &str| after.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(said("dbitmap c-2024-06:"), 0, "{after:#?}");
    for flavour in ["idpool:", "linear:", "fastpool:", "augmented:", "shrinker:"] {
        // 65 inserts and 66 drops at least, each compared.
        assert!(
            said(&format!("{flavour} outcome")) >= 131,
            "{flavour} {after:#?}"
        );
        assert!(
            said(&format!("{flavour} lookup of node 1")) == 1,
            "{flavour}"
        );
    }
}

#[test]
fn a_mainline_divergence_after_a_known_finding_is_reported() {
    let versions = Versions {
        c: Version::C2024_06,
        ..Versions::MAINLINE
    };
    // Planted: the fast pool's model does not shrink on release (as
    // the shrinker's does not), so the fast pool, a mainline side,
    // diverges from its model at the drop-all of step 3, after the
    // collision.
    let mut tables = sides(&versions, None).unwrap();
    tables[3].1.shrinks_on_release = false;
    let failure = run_sides(TARGET, &versions, tables, &ops(COLLISION_THEN_MORE))
        .expect_err("the planted divergence");
    assert_eq!(history::Finding::of(&failure), None, "{failure}");
    let flavour = failure.flavour.map(|f| f.to_string());
    assert_eq!(
        (failure.step, flavour.as_deref()),
        (3, Some("fastpool")),
        "{failure}"
    );
    assert!(!history::quiet(&failure), "{failure}");
    // Unplanted, the same program fails with the collision alone.
    let unplanted = run_versions(TARGET, &versions, &ops(COLLISION_THEN_MORE)).unwrap_err();
    assert_eq!(
        (history::Finding::of(&unplanted), unplanted.step),
        (Some(history::Finding::Collision), 1)
    );
}

/// v3 beside June 2024 differ at step 1 (the `<=` threshold): only
/// the comparison retires; both tables are still run and checked
/// against their own models to the end, and so is everyone else.
#[test]
fn a_known_difference_retires_only_the_comparison() {
    let versions = Versions {
        c: Version::CV3,
        c_versus: Some(Version::C2024_06),
        ..Versions::MAINLINE
    };
    let program = "insert-many 65\ndrop-all lifo\ninsert-many 3\nlookup n1";
    let (result, narration) = narrated(&versions, program);
    let failure = result.expect_err("the threshold");
    assert_eq!(
        history::Finding::of(&failure),
        Some(history::Finding::V3Threshold)
    );
    assert_eq!(failure.step, 1);
    let after = from_step(&narration, 2);
    let said = |prefix: &str| after.iter().filter(|l| l.starts_with(prefix)).count();
    for side in ["dbitmap c-v3:", "dbitmap c-2024-06:", "idpool:", "linear:"] {
        assert!(said(&format!("{side} outcome")) >= 3, "{side} {after:#?}");
        assert_eq!(said(&format!("{side} lookup of node 1")), 1, "{side}");
    }
}
