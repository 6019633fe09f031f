//! Writes the seed corpus: for each target, the pseudo-random inputs (see
//! `idpool_harness::seeds`) whose event shape no earlier input had.
//!
//! ```text
//! cargo run -p idpool-harness --bin seed-corpus -- corpus [inputs per target]
//! ```
//!
//! Files are named by a hash of their content, so running it twice adds
//! nothing; existing files are never overwritten.

use idpool_harness::{check, registry, seeds};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: seed-corpus <corpus dir> [inputs per target, default 5000]");
        return ExitCode::from(2);
    };
    let inputs: u64 = match args.next().map(|n| n.parse()) {
        None => 5000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("seed-corpus: inputs per target must be a number: {e}");
            return ExitCode::from(2);
        }
    };
    for target in registry::traceable() {
        if let Some(reason) = target.unavailable() {
            println!("{}: skipped: {reason}", target.name());
            continue;
        }
        let out = dir.join(target.name());
        if let Err(e) = std::fs::create_dir_all(&out) {
            eprintln!("seed-corpus: cannot create {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
        let mut shapes = BTreeSet::new();
        let mut written = 0;
        let crafted = seeds::crafted(target.name());
        for seed in 0..inputs + crafted.len() as u64 {
            // The hand-written inputs first: each is kept for its shape.
            let data = match crafted.get(seed as usize) {
                Some(data) => data.clone(),
                None => seeds::input(seed - crafted.len() as u64),
            };
            // A seed must pass: one that fails is a finding, not a seed.
            let events = match check::catching(|| target.run(&data)) {
                Ok(events) => events,
                Err(failure) => {
                    println!(
                        "{}: seed {seed} fails, not written: {}",
                        target.name(),
                        failure.message.lines().next().unwrap_or_default()
                    );
                    continue;
                }
            };
            if !shapes.insert(seeds::shape(&events)) {
                continue;
            }
            let path = out.join(format!("seed-{:016x}", fnv1a(&data)));
            if path.exists() {
                continue;
            }
            if let Err(e) = std::fs::write(&path, &data) {
                eprintln!("seed-corpus: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            written += 1;
        }
        println!(
            "{}: {} shapes, {written} new files in {}",
            target.name(),
            shapes.len(),
            out.display()
        );
    }
    ExitCode::SUCCESS
}
