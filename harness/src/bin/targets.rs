//! Prints the fuzz targets, one per line, from the registry: the one list
//! the scripts under `ci/` and `.clusterfuzzlite/` read.
//!
//! ```text
//! targets [--engine libfuzzer|afl|honggfuzz] [--corpus] [--sanitizer none|address] [--all]
//! ```
//!
//! By default every target whose needs are met (see
//! `idpool_harness::registry::Need`); a target that cannot run here gets
//! one line on stderr, `skipping <name>: <reason>`. `--engine` keeps the
//! targets with glue for that engine, `--corpus` those with a corpus,
//! `--sanitizer` those whose libFuzzer builds use that sanitizer,
//! `--all` skips nothing. `--findings` prints instead the known upstream
//! findings `ci/history.sh` hunts, one run per line: finding, target and
//! the longest input the hunt tries (`idpool_harness::history::Finding`,
//! `Target::hunt_max_len`).

use idpool_harness::history::Finding;
use idpool_harness::registry::Engine;
use idpool_harness::TARGETS;
use std::process::ExitCode;

const USAGE: &str =
    "usage: targets [--engine libfuzzer|afl|honggfuzz] [--corpus] [--sanitizer none|address] [--all] | targets --findings";

fn main() -> ExitCode {
    let mut engine = None;
    let mut sanitizer = None;
    let (mut corpus, mut all) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--engine" => {
                let name = args.next().unwrap_or_default();
                let Some(e) = Engine::ALL.into_iter().find(|e| e.name() == name) else {
                    eprintln!("targets: unknown engine {name:?}\n{USAGE}");
                    return ExitCode::from(2);
                };
                engine = Some(e);
            }
            "--corpus" => corpus = true,
            "--sanitizer" => sanitizer = Some(args.next().unwrap_or_default()),
            "--all" => all = true,
            "--findings" => {
                for finding in Finding::ALL {
                    for &name in finding.hunted_by() {
                        let Some(target) = TARGETS.iter().find(|t| t.name() == name) else {
                            eprintln!(
                                "targets: {} is hunted by {name}, which is not a target",
                                finding.name()
                            );
                            return ExitCode::FAILURE;
                        };
                        println!("{} {name} {}", finding.name(), target.hunt_max_len());
                    }
                }
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("targets: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    for target in TARGETS {
        if engine.is_some_and(|e| !target.engines().contains(&e))
            || (corpus && !target.has_corpus())
            || sanitizer
                .as_deref()
                .is_some_and(|s| s != target.sanitizer())
        {
            continue;
        }
        match target.unavailable() {
            Some(reason) if !all => eprintln!("skipping {}: {reason}", target.name()),
            _ => println!("{}", target.name()),
        }
    }
    ExitCode::SUCCESS
}
