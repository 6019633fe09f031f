//! `triage map`: the cells of the command space a corpus reaches
//! (`idpool_harness::targets::binder_commands::map`): each cell reached
//! with how many inputs reached it, the cells never reached, and the cells
//! no program reaches, with the reason.

use crate::input;
use crate::run;
use idpool_harness::check;
use idpool_harness::targets;
use idpool_harness::targets::binder_commands::map::{self, Cell, Map};
use std::path::PathBuf;
use std::process::ExitCode;

/// The targets with a map.
const MAPPED: [&str; 1] = ["binder_commands"];

/// Replays every file under `dirs` with the map's recorder on.
pub fn count(target: &str, dirs: &[PathBuf]) -> Result<(Map, usize), String> {
    if !MAPPED.contains(&target) {
        input::known(target)?;
        return Err(format!(
            "no command-space map for {target} (targets with one: {})",
            MAPPED.join(", ")
        ));
    }
    let entry = targets::target(target).expect("a mapped target is registered");
    let mut files = Vec::new();
    for dir in dirs {
        files.extend(input::files_under(dir)?);
    }
    let mut counted = Map::default();
    let mut failing = 0;
    for path in &files {
        let data =
            std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let (result, cells) = if input::is_trace(&data) {
            let trace = input::load_any(path, Some(target))?;
            map::record(|| run::run(&trace))
        } else {
            map::record(|| check::catching(|| entry.run(&data)))
        };
        failing += usize::from(result.is_err());
        counted.add(&cells);
    }
    Ok((counted, failing))
}

/// What `map --json` prints.
#[derive(serde::Serialize)]
struct MapJson {
    target: String,
    inputs: usize,
    failing: usize,
    cells: usize,
    reached: Vec<Reached>,
    never: Vec<CellJson>,
    unreachable: Vec<Unreachable>,
    /// Cells the table says no program reaches, which some input reached:
    /// the table is wrong.
    reached_unreachable: Vec<Reached>,
}

#[derive(serde::Serialize)]
struct CellJson {
    command: &'static str,
    cell: String,
}

#[derive(serde::Serialize)]
struct Reached {
    command: &'static str,
    cell: String,
    inputs: usize,
}

#[derive(serde::Serialize)]
struct Unreachable {
    command: &'static str,
    cell: String,
    why: &'static str,
}

fn part(c: &Cell) -> String {
    c.part.to_string()
}

/// `triage map`: exit 0, or 1 when an input reached a cell the table says
/// no program reaches.
pub fn command(target: &str, dirs: &[PathBuf], json: bool) -> Result<ExitCode, String> {
    let (counted, failing) = count(target, dirs)?;
    let mut out = MapJson {
        target: target.to_string(),
        inputs: counted.inputs,
        failing,
        cells: 0,
        reached: Vec::new(),
        never: Vec::new(),
        unreachable: Vec::new(),
        reached_unreachable: Vec::new(),
    };
    for (cell, inputs, why) in counted.rows() {
        out.cells += 1;
        let (command, shown) = (cell.command, part(&cell));
        match (inputs, why) {
            (0, Some(why)) => out.unreachable.push(Unreachable {
                command,
                cell: shown,
                why,
            }),
            (0, None) => out.never.push(CellJson {
                command,
                cell: shown,
            }),
            (inputs, None) => out.reached.push(Reached {
                command,
                cell: shown,
                inputs,
            }),
            (inputs, Some(_)) => out.reached_unreachable.push(Reached {
                command,
                cell: shown,
                inputs,
            }),
        }
    }
    let code = match out.reached_unreachable.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    };
    if json {
        run::print_json(&out);
    } else {
        print_tables(&out);
    }
    Ok(code)
}

fn print_tables(m: &MapJson) {
    println!(
        "{}: {} inputs ({} end in a failure or a known difference), {} cells: {} reached, {} never reached, {} unreachable by construction",
        m.target,
        m.inputs,
        m.failing,
        m.cells,
        m.reached.len(),
        m.never.len(),
        m.unreachable.len()
    );
    if !m.reached_unreachable.is_empty() {
        println!(
            "\nreached, although the table says no program reaches them (the table is wrong):\n"
        );
        println!("| command | cell | inputs |\n| --- | --- | ---: |");
        for r in &m.reached_unreachable {
            println!("| {} | {} | {} |", r.command, r.cell, r.inputs);
        }
    }
    println!("\nreached:\n\n| command | cell | inputs |\n| --- | --- | ---: |");
    for r in &m.reached {
        println!("| {} | {} | {} |", r.command, r.cell, r.inputs);
    }
    println!("\nnever reached:\n\n| command | cell |\n| --- | --- |");
    for r in &m.never {
        println!("| {} | {} |", r.command, r.cell);
    }
    println!("\nunreachable by construction:\n\n| command | cell | why |\n| --- | --- | --- |");
    for r in &m.unreachable {
        println!("| {} | {} | {} |", r.command, r.cell, r.why);
    }
}
