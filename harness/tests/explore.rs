//! Seeded exploration: every traceable target runs a few thousand
//! generated inputs, the same ones on every machine (no RNG, no fuzzer),
//! of lengths from a few bytes to a kilobyte. A failure prints the seed and
//! the trace, which `triage repro` replays.
//!
//! The smoke test asks whether random inputs reach the interesting paths;
//! this one asks only that they pass, over more and longer inputs, with
//! the fuzz targets' verdict: a known upstream finding of a historical
//! version ([`history::quiet`]) passes unless `IDPOOL_HISTORY` asks for
//! it. It is
//! part of the test step `ci/mutants/cargo-mutants.sh` scores the harness
//! with.

use idpool_harness::{check, history, seeds, targets};

/// Inputs per target.
const INPUTS: u64 = 2000;
/// Seeds start here, away from the smoke test's and the seed corpus's.
const FIRST_SEED: u64 = 1 << 20;

/// The input of `seed`: its length cycles through short, medium and long.
fn input(seed: u64) -> Vec<u8> {
    const LENGTHS: [usize; 8] = [8, 24, 48, 96, 160, 256, 512, 1024];
    seeds::bytes(seed, LENGTHS[seed as usize % LENGTHS.len()])
}

#[test]
fn every_target_passes_its_seeded_exploration() {
    let mut explored = Vec::new();
    for target in targets::traceable() {
        if let Some(why) = target.unavailable() {
            eprintln!("{}: skipped ({why})", target.name());
            continue;
        }
        for seed in FIRST_SEED..FIRST_SEED + INPUTS {
            let data = input(seed);
            let failure = match check::catching(|| target.run(&data)) {
                Err(failure) if !history::quiet(&failure) => failure,
                _ => continue,
            };
            let trace = target
                .trace_from_bytes(&data)
                .map_or_else(|| "(no trace form)".to_string(), |t| t.to_string());
            panic!(
                "{}: seed {seed} fails: {failure}\ntrace:\n{trace}",
                target.name()
            );
        }
        explored.push(target.name());
    }
    // Every traceable target, the kernel's only when its header is built in.
    let mut expected = vec![
        "pool_ops",
        "dbitmap_ops",
        "handle_table",
        "concurrent_resize",
    ];
    if targets::target("kernel_dbitmap").is_some_and(|t| t.unavailable().is_none()) {
        expected.push("kernel_dbitmap");
    }
    for name in expected {
        assert!(
            explored.contains(&name),
            "{name} not explored: {explored:?}"
        );
    }
}
