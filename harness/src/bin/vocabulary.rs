//! Writes the command table of `docs/commands.md` from the language's
//! vocabulary (`idpool::driver::VOCABULARY`), between its markers.
//!
//! ```text
//! cargo run -p idpool-harness --bin vocabulary -- docs/commands.md
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: vocabulary <docs/commands.md>");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("vocabulary: cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(new) = idpool::driver::command::with_table(&text) else {
        eprintln!(
            "vocabulary: {path} has no `<!-- vocabulary: ... -->` and `<!-- /vocabulary -->` lines"
        );
        return ExitCode::from(2);
    };
    if new == text {
        println!("{path}: up to date");
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::write(&path, new) {
        eprintln!("vocabulary: cannot write {path}: {e}");
        return ExitCode::FAILURE;
    }
    println!(
        "{path}: command table written ({} commands)",
        idpool::driver::VOCABULARY.len()
    );
    ExitCode::SUCCESS
}
