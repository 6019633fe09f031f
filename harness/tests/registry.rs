//! A target's identity comes from its registry entry, everywhere: a second
//! op-list target over an existing op type (`pool_ops`' operations, another
//! pool and model) reports its failures, signatures, traces and abstract
//! states under its own name, never under `pool_ops`'.

use idpool_harness::check::{self, Failure};
use idpool_harness::feedback;
use idpool_harness::oracle::Policy;
use idpool_harness::registry::{OpsTarget, Target};
use idpool_harness::targets::pool_ops::{self, PoolOp, POOL_OPS};
use idpool_harness::text::OpText;

/// The Rust driver's `IdPool` held to the C driver's model: an op-list
/// target over `pool_ops`' op type whose runner fails where the two
/// drivers differ (a pool built with failing flags: Rust builds 64 ids
/// inline, C starts disabled).
static IDPOOL_AS_C: OpsTarget<PoolOp> = OpsTarget::new(
    "idpool_as_c",
    "IdPool against the C model",
    |target, ops| pool_ops::run::<idpool::IdPool>(target, Policy::C, ops),
);

/// Operations from their trace lines.
fn ops(lines: &[&str]) -> Vec<PoolOp> {
    (lines.iter())
        .map(|l| PoolOp::parse_text(&l.split(' ').collect::<Vec<_>>()).unwrap())
        .collect()
}

/// The failure, which must be this target's and no one else's.
fn assert_its_own(failure: &Failure) {
    assert_eq!(failure.target, "idpool_as_c", "{failure}");
    assert_eq!(failure.signature().target, "idpool_as_c");
    let signature = failure.signature().to_string();
    assert!(signature.starts_with("idpool_as_c/"), "{signature}");
    assert!(
        failure.message.starts_with("idpool_as_c: step 0 "),
        "{}",
        failure.message
    );
}

#[test]
fn a_second_target_over_an_op_type_fails_under_its_own_name() {
    let program = ops(&["reset 0 fail", "acquire 1"]);
    // `pool_ops` passes the program; the new target fails it.
    assert!(POOL_OPS.run_ops(&program).is_ok());
    let failure = IDPOOL_AS_C
        .run_ops(&program)
        .expect_err("C starts disabled");
    assert_its_own(&failure);
    // Through its trace, as `triage repro` replays it, and its minimised
    // form: the same name.
    let trace = IDPOOL_AS_C.trace(program.clone());
    assert_eq!(trace.target(), "idpool_as_c");
    assert!(
        trace.to_string().contains("\ntarget idpool_as_c\n"),
        "{trace}"
    );
    let replayed = check::catching(|| trace.check()).expect_err("fails");
    assert_its_own(&replayed);
    let signature = replayed.signature();
    let shorter = trace.shrink(&mut |t| matches!(t.check(), Err(f) if f.signature() == signature));
    assert_eq!((shorter.target(), shorter.len()), ("idpool_as_c", 1));
    // From raw bytes, as a fuzz engine runs it: bytes that decode to the
    // failing reset alone.
    let reset = ops(&["reset 0 fail"]);
    let bytes = (0..=u16::MAX)
        .map(|b| [(b >> 8) as u8, b as u8])
        .find(|bytes| idpool_harness::registry::decode::<PoolOp>(bytes) == reset)
        .expect("a selector byte decodes to a failing reset");
    assert_its_own(&IDPOOL_AS_C.run(&bytes).expect_err("from bytes"));
}

#[test]
fn a_second_target_over_an_op_type_has_its_own_abstract_states() {
    let program = ops(&["acquire 0", "prepare grow", "commit 0", "release 0"]);
    let (ours, theirs) = (
        feedback::record(|| POOL_OPS.run_ops(&program)),
        feedback::record(|| IDPOOL_AS_C.run_ops(&program)),
    );
    assert!(ours.0.is_ok() && theirs.0.is_ok(), "both pass this program");
    assert!(!ours.1.is_empty() && !theirs.1.is_empty());
    assert!(
        ours.1.is_disjoint(&theirs.1),
        "{:?} and {:?} share a state",
        ours.1,
        theirs.1
    );
}
