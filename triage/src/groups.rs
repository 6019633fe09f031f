//! `dedup` and `report`: the inputs under a directory grouped by how they
//! fail ([`Group`]), each group with its files, smallest first.

use crate::input;
use crate::run;
use idpool_harness::check::Signature;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How an input fails, or why it does not.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// It fails with this signature.
    Fails(Signature),
    /// It passes on this build.
    Passes,
    /// It cannot be read: why.
    Unreadable(String),
    /// A libFuzzer artifact named by the resource it exhausted, not
    /// replayed: `<target>/timeout` or `<target>/oom`.
    Resource(String),
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Group::Fails(signature) => write!(f, "{signature}"),
            Group::Passes => f.write_str("passes"),
            Group::Unreadable(why) => write!(f, "unreadable: {why}"),
            Group::Resource(key) => f.write_str(key),
        }
    }
}

/// Group -> (size, file), smallest first.
pub type Groups = BTreeMap<Group, Vec<(u64, PathBuf)>>;

/// Groups every input under `dir` (raw bytes of `target` where the path
/// names none).
pub fn dedup(dir: &Path, target: Option<&str>) -> Result<Groups, String> {
    let files = input::files_under(dir)?;
    if files.is_empty() {
        return Err(format!("{}: no files to triage", dir.display()));
    }
    let mut groups = Groups::new();
    for (i, path) in files.iter().enumerate() {
        eprint!("\rdedup: {}/{}", i + 1, files.len());
        let group = match input::resource_finding(path, target) {
            Some(key) => Group::Resource(key),
            None => replay_group(path, target),
        };
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        groups.entry(group).or_default().push((size, path.clone()));
    }
    eprintln!();
    for files in groups.values_mut() {
        files.sort();
    }
    Ok(groups)
}

/// The group of an input found by replaying it.
fn replay_group(path: &Path, target: Option<&str>) -> Group {
    match input::load(path, target) {
        Err(e) => Group::Unreadable(e.split(": ").skip(1).collect::<Vec<_>>().join(": ")),
        Ok(trace) => match run::run(&trace) {
            Ok(_) => Group::Passes,
            Err(f) => Group::Fails(f.signature()),
        },
    }
}

/// Prints the groups, the largest first (`json`: as one JSON array of
/// `group`, `count` and `files`, in the same order).
pub fn print(groups: &Groups, json: bool) {
    let mut sorted: Vec<_> = groups.iter().collect();
    sorted.sort_by_key(|(_, files)| std::cmp::Reverse(files.len()));
    if json {
        /// A group as `--json` prints it.
        #[derive(serde::Serialize)]
        struct GroupJson {
            group: String,
            count: usize,
            files: Vec<String>,
        }
        let each: Vec<GroupJson> = (sorted.iter())
            .map(|(group, files)| GroupJson {
                group: group.to_string(),
                count: files.len(),
                files: files.iter().map(|(_, p)| p.display().to_string()).collect(),
            })
            .collect();
        run::print_json(&each);
        return;
    }
    for (group, files) in sorted {
        println!(
            "{:>5}  {group}\n       e.g. {}",
            files.len(),
            files[0].1.display()
        );
    }
}

/// `report`: the groups as a Markdown table, each failing group's
/// representative minimised.
pub fn report(dir: &Path, target: Option<&str>) -> Result<ExitCode, String> {
    let groups = dedup(dir, target)?;
    let total: usize = groups.values().map(Vec::len).sum();
    println!("# Findings in {}\n", dir.display());
    println!("{total} inputs, {} groups.\n", groups.len());
    println!("| group | inputs | representative | minimised ops |");
    println!("| --- | ---: | --- | ---: |");
    for (group, files) in &groups {
        let rep = &files[0].1;
        let min = crate::minimised_len(group, rep, target);
        println!("| {group} | {} | {} | {min} |", files.len(), rep.display());
    }
    Ok(ExitCode::SUCCESS)
}
