//! Writes one target's seed corpus: the pseudo-random inputs (see
//! `idpool_harness::seeds`) whose event shape no earlier input had, or
//! that reach a cell of the command-space map no earlier input reached
//! (`binder_commands`), after the target's hand-written ones
//! (`Target::crafted`). The inputs already in the corpus count as earlier
//! inputs: a run adds only what they lack.
//!
//! ```text
//! cargo run -p idpool-harness --bin seed-corpus -- <target> [--corpus DIR] [--inputs N]
//! ```
//!
//! Writes into `DIR/<target>` (`DIR` defaults to `corpus`), and nowhere
//! else. Files are named by a hash of their content, so running it twice
//! adds nothing; existing files are never overwritten.

use idpool_harness::targets::binder_commands::map;
use idpool_harness::{check, history, seeds, targets, Events, Target};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: seed-corpus <target> [--corpus DIR] [--inputs N, default 5000]";

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The command line: the target, the corpus root and how many
/// pseudo-random inputs to try.
fn parse_args() -> Result<(&'static dyn Target, PathBuf, u64), String> {
    let (mut target, mut dir, mut inputs) = (None, PathBuf::from("corpus"), 5000);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--corpus" => {
                dir = args
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--corpus needs a directory")?
            }
            "--inputs" => {
                let n = args.next().unwrap_or_default();
                inputs = n.parse().map_err(|e| format!("--inputs {n:?}: {e}"))?;
            }
            name if target.is_none() && !name.starts_with('-') => {
                let found = targets::traceable().find(|t| t.name() == name);
                let known = targets::traceable_names();
                target = Some(
                    found.ok_or(format!("no target {name:?} with a corpus (known: {known})"))?,
                );
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok((target.ok_or("which target?")?, dir, inputs))
}

/// Writes the seeds of `target` into `out`; prints how many shapes and new
/// files.
fn seed(target: &dyn Target, out: &Path, inputs: u64) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut shapes = BTreeSet::new();
    let mut cells = BTreeSet::new();
    let mut written = 0;
    // What the corpus already reaches.
    let entries =
        std::fs::read_dir(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", out.display()))?
            .path();
        let data =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let (ran, reached) = map::record(|| check::catching(|| target.run(&data)));
        match ran {
            Ok(events) => {
                shapes.insert(seeds::shape(&events));
            }
            Err(failure) if !history::quiet(&failure) => continue,
            Err(_) => {}
        }
        cells.extend(reached);
    }
    let (shapes_before, cells_before) = (shapes.len(), cells.len());
    let crafted = target.crafted();
    let pseudo_random = (0..inputs).map(seeds::input);
    // The hand-written inputs first: each is kept for its shape.
    for (i, data) in crafted.into_iter().chain(pseudo_random).enumerate() {
        // A seed must pass: one that fails is a finding, not a seed.
        let (ran, reached) = map::record(|| check::catching(|| target.run(&data)));
        let events = match ran {
            Ok(events) => events,
            // A known upstream difference ends a fuzzing run quietly
            // (history::settle): such an input is a seed like any other,
            // kept for the cells it reached on the way.
            Err(failure) if history::quiet(&failure) => Events::default(),
            Err(failure) => {
                let first = failure.message.lines().next().unwrap_or_default();
                println!("{}: seed {i} fails, not written: {first}", target.name());
                continue;
            }
        };
        let new_shape = shapes.insert(seeds::shape(&events));
        let new_cells = reached.difference(&cells).count();
        if !new_shape && new_cells == 0 {
            continue;
        }
        cells.extend(reached);
        let path = out.join(format!("seed-{:016x}", fnv1a(&data)));
        if path.exists() {
            continue;
        }
        std::fs::write(&path, &data)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written += 1;
    }
    println!(
        "{}: {} shapes ({shapes_before} before), {} map cells ({cells_before} before), {written} new files in {}",
        target.name(),
        shapes.len(),
        cells.len(),
        out.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (target, dir, inputs) = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("seed-corpus: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(reason) = target.unavailable() {
        eprintln!("seed-corpus: {} cannot run here: {reason}", target.name());
        return ExitCode::FAILURE;
    }
    match seed(target, &dir.join(target.name()), inputs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seed-corpus: {e}");
            ExitCode::FAILURE
        }
    }
}
