//! Reading what the user hands us: a trace, or raw bytes from any engine.

use idpool_harness::check;
use idpool_harness::targets;
use idpool_harness::trace::{Trace, MAGIC};
use std::path::Path;

/// Loads `path` as a trace. Raw fuzzer bytes are converted; their target
/// is `target` or, failing that, a component of the path named after a
/// target (`fuzz/artifacts/pool_ops/crash-…`, `…/afl/handle_table/…`).
/// Every error is one line naming the file and the problem.
pub fn load(path: &Path, target: Option<&str>) -> Result<Trace, String> {
    let trace = load_any(path, target)?;
    match targets::target(trace.target()).and_then(|t| t.unavailable()) {
        Some(reason) => Err(format!(
            "{}: {} cannot run here: {reason}",
            path.display(),
            trace.target()
        )),
        None => Ok(trace),
    }
}

/// [`load`], whether or not the target can run here.
pub fn load_any(path: &Path, target: Option<&str>) -> Result<Trace, String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!("{shown}: is a directory, expected a file"));
    }
    let data = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file"),
        _ => format!("{shown}: cannot read: {e}"),
    })?;
    if data.is_empty() {
        return Err(format!("{shown}: empty input, nothing to replay"));
    }
    if is_trace(&data) {
        let text =
            std::str::from_utf8(&data).map_err(|_| format!("{shown}: a trace, but not UTF-8"))?;
        let trace = targets::parse_trace(text).map_err(|e| format!("{shown}: {e}"))?;
        if let Some(t) = target.filter(|&t| t != trace.target()) {
            return Err(format!(
                "{shown}: a {} trace, but --target says {t}",
                trace.target()
            ));
        }
        return Ok(trace);
    }
    let target = match target {
        Some(t) => known(t)?,
        None => infer_target(path).ok_or_else(|| {
            format!(
                "{shown}: raw bytes, and the path does not name a target: pass --target (one of {})",
                targets::traceable_names()
            )
        })?,
    };
    // A concurrent input is run once to record its schedule; it may well
    // fail, and its panic message would only be noise here.
    let trace =
        check::quietly(|| targets::trace_from_bytes(target, &data)).expect("a known target");
    if trace.is_empty() {
        return Err(format!(
            "{shown}: {} bytes that decode to no {target} operation (truncated input?)",
            data.len()
        ));
    }
    Ok(trace)
}

/// Whether `data` is a trace (perhaps after comment lines) rather than
/// raw fuzzer bytes.
pub fn is_trace(data: &[u8]) -> bool {
    let magic_line = format!("\n{MAGIC} ");
    let commented_trace =
        data.starts_with(b"#") && std::str::from_utf8(data).is_ok_and(|t| t.contains(&magic_line));
    data.starts_with(MAGIC.as_bytes()) || commented_trace
}

/// `name` if it is a target.
pub fn known(name: &str) -> Result<&'static str, String> {
    targets::traceable()
        .find(|t| t.name() == name)
        .map(|t| t.name())
        .ok_or_else(|| {
            let known = targets::traceable_names();
            format!("unknown target '{name}' (known: {known})")
        })
}

fn infer_target(path: &Path) -> Option<&'static str> {
    path.ancestors()
        .filter_map(|p| p.file_name()?.to_str())
        .find_map(|name| targets::traceable().find(|t| t.name() == name))
        .map(|t| t.name())
}

/// Every file under `dir`, recursively, sorted; hidden files and fuzzer
/// bookkeeping (`README.txt`, `fuzzer_stats`, …) are skipped.
pub fn files_under(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    if !dir.is_dir() {
        return Err(match dir.exists() {
            true => format!("{}: is a file, expected a directory", dir.display()),
            false => format!("{}: no such directory", dir.display()),
        });
    }
    idpool_harness::files::walk(dir, &|path| {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        !name.starts_with('.')
            && !matches!(
                name,
                "README.txt" | "fuzzer_stats" | "plot_data" | "cmdline"
            )
    })
}

/// The kinds of finding libFuzzer names by resource rather than by
/// failure: a hang (`timeout-…`) and a memory blow-up (`oom-…`).
const RESOURCE_KINDS: [(&str, &str); 2] = [("timeout-", "timeout"), ("oom-", "oom")];

/// The group of a libFuzzer `timeout-…` or `oom-…` artifact,
/// `<target>/timeout` or `<target>/oom`: such an input is not replayed
/// (it would hang, or exhaust memory, again).
pub fn resource_finding(path: &Path, target: Option<&str>) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let (_, kind) = RESOURCE_KINDS.iter().find(|(p, _)| name.starts_with(p))?;
    let target = target
        .or_else(|| infer_target(path))
        .unwrap_or("unknown-target");
    Some(format!("{target}/{kind}"))
}
