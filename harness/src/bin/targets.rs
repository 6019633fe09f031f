//! Prints the fuzz targets, one per line, from the registry: the one list
//! the scripts under `ci/` and `.clusterfuzzlite/` read.
//!
//! ```text
//! targets [--engine libfuzzer|afl|honggfuzz] [--corpus] [--sanitizer none|address] [--all] [--json]
//! targets --findings [--json]
//! ```
//!
//! By default every target whose needs are met (see
//! `idpool_harness::registry::Need`); a target that cannot run here gets
//! one line on stderr, `skipping <name>: <reason>`. `--engine` keeps the
//! targets with glue for that engine, `--corpus` those with a corpus,
//! `--sanitizer` those whose libFuzzer builds use that sanitizer, `--all`
//! skips nothing. `--findings` prints instead the known upstream findings
//! `ci/history.sh` hunts, one run per line: finding, target and the
//! longest input the hunt tries (`Target::hunts`, `Target::hunt_max_len`).
//!
//! `--json` prints one JSON array instead: for a target its `name`,
//! `about`, `engines`, `corpus`, `sanitizer`, `hunt_max_len`,
//! `real_kernel` (its inputs also run on the real drivers, `triage
//! real-kernel`), `corpus_cap`, `pool_cap`, `hunts`, `provenance` and
//! `unavailable` (why it cannot run here, `null` when it can: a target
//! that cannot is listed too, not skipped); for a hunt its
//! `finding`, `target`, `max_len` and `mainline`.

use idpool_harness::history::Finding;
use idpool_harness::registry::Engine;
use idpool_harness::{Target, TARGETS};
use serde::Serialize;
use std::process::ExitCode;

const USAGE: &str = "usage: targets [--engine libfuzzer|afl|honggfuzz] [--corpus] \
                     [--sanitizer none|address] [--all] [--json] | targets --findings [--json]";

/// What the command line asks for.
#[derive(Default)]
struct Args {
    engine: Option<Engine>,
    sanitizer: Option<String>,
    corpus: bool,
    all: bool,
    findings: bool,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--engine" => {
                let name = args.next().unwrap_or_default();
                let engine = Engine::ALL.into_iter().find(|e| e.name() == name);
                a.engine = Some(engine.ok_or_else(|| format!("unknown engine {name:?}"))?);
            }
            "--corpus" => a.corpus = true,
            "--sanitizer" => a.sanitizer = Some(args.next().unwrap_or_default()),
            "--all" => a.all = true,
            "--findings" => a.findings = true,
            "--json" => a.json = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

/// The hunts `ci/history.sh` runs: each known finding with each target
/// that hunts it, in the order of [`Finding::ALL`], then of the list.
fn hunts() -> Vec<(Finding, &'static dyn Target)> {
    Finding::ALL
        .into_iter()
        .flat_map(|f| {
            (TARGETS.iter().copied())
                .filter(move |t| t.hunts().contains(&f))
                .map(move |t| (f, t))
        })
        .collect()
}

/// A target as `--json` prints it.
#[derive(Serialize)]
struct TargetJson {
    name: &'static str,
    about: &'static str,
    engines: Vec<&'static str>,
    corpus: bool,
    sanitizer: &'static str,
    hunt_max_len: usize,
    real_kernel: bool,
    corpus_cap: usize,
    pool_cap: usize,
    hunts: Vec<&'static str>,
    provenance: Option<String>,
    unavailable: Option<String>,
}

impl TargetJson {
    fn of(target: &dyn Target) -> TargetJson {
        TargetJson {
            name: target.name(),
            about: target.about(),
            engines: target.engines().iter().map(|e| e.name()).collect(),
            corpus: target.has_corpus(),
            sanitizer: target.sanitizer(),
            hunt_max_len: target.hunt_max_len(),
            real_kernel: target.real_kernel(),
            corpus_cap: target.corpus_cap(),
            pool_cap: target.pool_cap(),
            hunts: target.hunts().iter().map(|f| f.name()).collect(),
            provenance: target.provenance(),
            unavailable: target.unavailable(),
        }
    }
}

/// A hunt as `--findings --json` prints it.
#[derive(Serialize)]
struct HuntJson {
    finding: &'static str,
    target: &'static str,
    max_len: usize,
    mainline: bool,
}

/// One JSON value on one line.
fn print_json(value: &impl Serialize) {
    println!(
        "{}",
        serde_json::to_string(value).expect("a value of plain fields serialises")
    );
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("targets: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.findings {
        let hunts = hunts();
        if args.json {
            let each = hunts.iter().map(|(f, t)| HuntJson {
                finding: f.name(),
                target: t.name(),
                max_len: t.hunt_max_len(),
                mainline: f.of_mainline(),
            });
            print_json(&each.collect::<Vec<_>>());
        } else {
            for (f, t) in hunts {
                println!("{} {} {}", f.name(), t.name(), t.hunt_max_len());
            }
        }
        return ExitCode::SUCCESS;
    }
    let selected = TARGETS.iter().copied().filter(|target| {
        args.engine.is_none_or(|e| target.engines().contains(&e))
            && (!args.corpus || target.has_corpus())
            && (args.sanitizer.as_deref()).is_none_or(|s| s == target.sanitizer())
    });
    let mut listed = Vec::new();
    for target in selected {
        match target.unavailable() {
            Some(reason) if !args.all && !args.json => {
                eprintln!("skipping {}: {reason}", target.name())
            }
            _ => listed.push(target),
        }
    }
    if args.json {
        let each: Vec<TargetJson> = listed.into_iter().map(TargetJson::of).collect();
        print_json(&each);
    } else {
        listed.iter().for_each(|t| println!("{}", t.name()));
    }
    ExitCode::SUCCESS
}
