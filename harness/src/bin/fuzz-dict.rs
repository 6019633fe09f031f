//! Writes a libFuzzer/AFL dictionary per target (see `idpool_harness::dict`);
//! a target whose dictionary is written by hand is left alone.
//!
//! ```text
//! cargo run -p idpool-harness --bin fuzz-dict -- fuzz/dict
//! ```

use idpool_harness::TARGETS;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fuzz-dict <output dir>");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("fuzz-dict: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for target in TARGETS {
        let path = dir.join(format!("{}.dict", target.name()));
        let Some(text) = target.dictionary() else {
            println!("{}: written by hand, left alone", path.display());
            continue;
        };
        if let Err(e) = std::fs::write(&path, &text) {
            eprintln!("fuzz-dict: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!(
            "{}: {} entries",
            path.display(),
            text.lines().filter(|l| l.starts_with('"')).count()
        );
    }
    ExitCode::SUCCESS
}
