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
//! `finding`, `target` and `max_len`.

use idpool_harness::history::Finding;
use idpool_harness::json::Json;
use idpool_harness::registry::Engine;
use idpool_harness::{Target, TARGETS};
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
fn target_json(target: &dyn Target) -> Json {
    Json::Obj(vec![
        ("name", Json::str(target.name())),
        ("about", Json::str(target.about())),
        (
            "engines",
            Json::Arr(
                target
                    .engines()
                    .iter()
                    .map(|e| Json::str(e.name()))
                    .collect(),
            ),
        ),
        ("corpus", Json::Bool(target.has_corpus())),
        ("sanitizer", Json::str(target.sanitizer())),
        ("hunt_max_len", Json::int(target.hunt_max_len())),
        ("real_kernel", Json::Bool(target.real_kernel())),
        ("corpus_cap", Json::int(target.corpus_cap())),
        ("pool_cap", Json::int(target.pool_cap())),
        (
            "hunts",
            Json::Arr(target.hunts().iter().map(|f| Json::str(f.name())).collect()),
        ),
        ("provenance", Json::opt_str(target.provenance())),
        ("unavailable", Json::opt_str(target.unavailable())),
    ])
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
            let each = hunts.iter().map(|(f, t)| {
                Json::Obj(vec![
                    ("finding", Json::str(f.name())),
                    ("target", Json::str(t.name())),
                    ("max_len", Json::int(t.hunt_max_len())),
                    ("mainline", Json::Bool(f.of_mainline())),
                ])
            });
            println!("{}", Json::Arr(each.collect()));
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
        println!(
            "{}",
            Json::Arr(listed.into_iter().map(target_json).collect())
        );
    } else {
        listed.iter().for_each(|t| println!("{}", t.name()));
    }
    ExitCode::SUCCESS
}
