//! Plants a bug: applies a search/replace spec (`ci/mutants/*.mutant`, see
//! `idpool_harness::mutant`) to a tree.
//!
//! ```text
//! plant <spec> <tree>            apply it
//! plant --check <spec> <tree>    only check that it applies
//! plant --targets <spec>         print its targets, one per line
//! ```

use idpool_harness::mutant::Mutant;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: plant [--check] <spec> <tree> | plant --targets <spec>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, rest) = match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(m @ ("--check" | "--targets")) => (m, &args[1..]),
        _ => ("apply", &args[..]),
    };
    let wanted = if mode == "--targets" { 1 } else { 2 };
    if rest.len() != wanted {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let spec = Path::new(&rest[0]);
    let mutant = match std::fs::read_to_string(spec)
        .map_err(|e| e.to_string())
        .and_then(|t| Mutant::parse(&t))
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!("plant: {}: {e}", spec.display());
            return ExitCode::from(2);
        }
    };
    if mode == "--targets" {
        mutant.targets.iter().for_each(|t| println!("{t}"));
        return ExitCode::SUCCESS;
    }
    match mutant.apply(Path::new(&rest[1]), mode == "apply") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plant: {}: does not apply: {e}", spec.display());
            ExitCode::FAILURE
        }
    }
}
