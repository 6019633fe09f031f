//! How many distinct abstract states a corpus reaches, and when it reached
//! them: replays every input through the harness with the state recorder
//! on (`idpool_harness::feedback::record`), in the order the files were
//! written. The count is exact and does not depend on the engine that
//! wrote the corpus.

use idpool_harness::check;
use idpool_harness::feedback;
use idpool_harness::files;
use idpool_harness::json::Json;
use idpool_harness::registry::Target;
use idpool_harness::targets;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The growth of the distinct states: (seconds since `since`, states so
/// far), one point per second at which the count changed, plus the final
/// count at the last file's time. Files older than `since` count at 0 s.
pub struct Growth {
    /// The points, in time order.
    pub points: Vec<(f64, usize)>,
    /// Inputs replayed.
    pub inputs: usize,
    /// Inputs that failed a check (they still count their states).
    pub failing: usize,
}

/// Replays every file under `dirs` on `target`, oldest first.
pub fn growth(
    target: &'static dyn Target,
    dirs: &[PathBuf],
    since: SystemTime,
) -> Result<Growth, String> {
    let mut inputs: Vec<(f64, PathBuf)> = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        for path in files::walk(dir, &|p: &Path| !is_hidden(p))? {
            let written = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let secs = written
                .duration_since(since)
                .unwrap_or(Duration::ZERO)
                .as_secs_f64();
            inputs.push((secs, path));
        }
    }
    if inputs.is_empty() {
        return Err(format!(
            "no input under {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    inputs.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut seen = BTreeSet::new();
    let mut points: Vec<(f64, usize)> = Vec::new();
    let mut failing = 0;
    for (secs, path) in &inputs {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (result, states) = feedback::record(|| check::catching(|| target.run(&data)));
        failing += usize::from(result.is_err());
        seen.extend(states);
        let second = secs.floor();
        match points.last_mut() {
            Some(last) if last.0 == second => last.1 = seen.len(),
            _ => points.push((second, seen.len())),
        }
    }
    Ok(Growth {
        points,
        inputs: inputs.len(),
        failing,
    })
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// `triage states`: the growth of the distinct states `dirs` reach on
/// `target`, counted from `since` (Unix seconds; default the oldest
/// file's time), one line `SECS states: N` per point, or (`json`) one
/// JSON object of `target`, `inputs`, `failing`, `states` and `points`
/// (`[seconds, states]` pairs).
pub fn command(
    target: &str,
    dirs: &[PathBuf],
    since: Option<u64>,
    json: bool,
) -> Result<ExitCode, String> {
    let target = targets::target(target)
        .filter(|t| t.has_corpus())
        .ok_or_else(|| {
            let known = targets::traceable_names();
            format!("unknown target {target:?} (known: {known})")
        })?;
    let from = since.map_or(UNIX_EPOCH, |secs| UNIX_EPOCH + Duration::from_secs(secs));
    let growth = growth(target, dirs, from)?;
    // Without --since, times count from the oldest file.
    let origin = match since {
        None => growth.points.first().map_or(0.0, |p| p.0),
        Some(_) => 0.0,
    };
    let total = growth.points.last().map_or(0, |p| p.1);
    if json {
        let points = growth
            .points
            .iter()
            .map(|&(secs, count)| Json::Arr(vec![Json::Num(secs - origin), Json::int(count)]));
        let value = Json::Obj(vec![
            ("target", Json::str(target.name())),
            ("inputs", Json::int(growth.inputs)),
            ("failing", Json::int(growth.failing)),
            ("states", Json::int(total)),
            ("points", Json::Arr(points.collect())),
        ]);
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    for (secs, count) in &growth.points {
        println!("{} states: {count}", secs - origin);
    }
    eprintln!(
        "{}: {total} distinct abstract states from {} inputs ({} of them end in a failure, known upstream findings included)",
        target.name(),
        growth.inputs,
        growth.failing
    );
    Ok(ExitCode::SUCCESS)
}
