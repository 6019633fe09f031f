//! The differential harness shared by every fuzz engine, the triage tool and
//! the tests.
//!
//! Bytes become a program of operations; a runner applies each operation to
//! the allocator and to a naive model, and fails at the first divergence or
//! broken invariant with the step, the operation, what was expected and
//! what happened. The models never call the allocator: they are a set of
//! live ids, ordered maps, the plain gap scan and the capacity formulas of
//! `docs/spec.md`.
//!
//! # Layout: by target
//!
//! Three layers. A module imports from its own layer and the layers below,
//! never from a layer above.
//!
//! - **The list** (top): `src/targets/mod.rs` declares every target's
//!   folder and lists its entry once, in `TARGETS`, and finds a target by
//!   name; `fuzz` is the one function every engine's glue calls, with the
//!   target's name.
//! - **One folder per target**, `src/targets/<name>/`: its operations (the
//!   op enum, how bytes decode to it, its kind and its trace line), its
//!   model, its runner, its trace form and its registry entry, a `static`
//!   in the folder's `mod.rs`. A target over another target's op language
//!   (`dbitmap_ops`, `kernel_dbitmap` and `kernel_idpool` run `pool_ops`' operations on
//!   other pools) holds only what differs: its pool adapter and its entry.
//!   A target folder imports the shared machinery, and the folder whose op
//!   language it runs; never the list.
//! - **Shared machinery** (bottom), which names no target: what a target
//!   is (`registry`), typed failures, their signatures and the comparison
//!   of expected with actual (`check`), the trace format (`trace`, `text`,
//!   `shrink`), the scheduler engine for step machines (`sched`), the model
//!   parts several targets share (`model`, `bits`, `history`, `oracle`,
//!   `designs`, `idset`, `domain`), what a run reached (`events`), what
//!   the engines get besides a run (`feedback`, `seeds`, `dict`), and the
//!   tools' plumbing (`files`, `mutant`).
//!
//! A target's name exists once, in its registry entry: the entry hands it
//! to the runner, which puts it on every failure, signature, narration and
//! abstract state, so two targets over one op language never answer to
//! each other's name.
//!
//! # Adding a target
//!
//! 1. Its folder, `src/targets/<name>/`: for a list of operations, an op
//!    type implementing `check::Op` (naming its own kinds), `text::OpText`
//!    and `Arbitrary`, a runner
//!    `fn(target: &'static str, ops: &[Op]) -> check::Checked<Events>` that
//!    fails through `check::At`, and, in the folder's `mod.rs`, the entry
//!    `pub static <NAME>: OpsTarget<Op> = OpsTarget::new("<name>", "<what it drives>", run);`.
//!    A target over another target's op language brings only its pool and
//!    its entry (`dbitmap_ops`). A target whose input is more than a list
//!    of operations implements `registry::Target` and `trace::TraceBody`
//!    itself, as `concurrent_resize` does.
//! 2. In `src/targets/mod.rs`, the folder declared (`pub mod <name>;`) and
//!    its one line in `TARGETS`: `&<name>::<NAME>,`.
//! 3. Its glue, the same lines for every target (`registry::Engine::glue`
//!    writes them): `fuzz/fuzz_targets/<name>.rs` with a `[[bin]]` in
//!    `fuzz/Cargo.toml`, `fuzz/afl/src/bin/<name>.rs` and
//!    `fuzz/honggfuzz/src/bin/<name>.rs`, each calling
//!    `idpool_harness::fuzz("<name>", data)`.
//! 4. Its generated files: `cargo run -p idpool-harness --bin seed-corpus -- <name>`
//!    and `cargo run -p idpool-harness --bin fuzz-dict -- fuzz/dict`.
//!
//! `cargo test` checks every step: the glue files, word for word, and the
//! manifest entry, the dictionary, the corpus. A new kind of comparison is
//! one entry in `check`'s list of checks; a new path worth counting, one
//! in `events`'.

pub mod bits;
pub mod check;
pub mod designs;
pub mod dict;
pub mod domain;
pub mod events;
pub mod feedback;
pub mod files;
pub mod history;
pub mod idset;
pub mod model;
pub mod mutant;
pub mod mutate;
pub mod oracle;
pub mod registry;
pub mod sched;
pub mod seeds;
pub mod shrink;
pub mod targets;
pub mod text;
pub mod trace;

pub use events::Events;
pub use registry::Target;
pub use targets::TARGETS;

use std::sync::Once;

/// The one entry of every engine's glue: runs target `name` on `data` and
/// panics at the first failure, as a fuzz target must (a known upstream
/// finding ends the run quietly unless `IDPOOL_HISTORY` asks for it: see
/// [`history::settle`]). The first call of a process prints the target's
/// provenance line, if it runs outside code.
///
/// # Panics
///
/// At the first failure; and when `name` is no target, naming the targets
/// there are (the glue files are checked against the list by `cargo
/// test`).
///
/// # Examples
///
/// ```
/// // What `fuzz/fuzz_targets/pool_ops.rs` does with each input.
/// idpool_harness::fuzz("pool_ops", &[0, 5, 0, 9]);
/// ```
pub fn fuzz(name: &str, data: &[u8]) {
    let Some(target) = targets::target(name) else {
        let known: Vec<_> = TARGETS.iter().map(|t| t.name()).collect();
        panic!(
            "idpool_harness::fuzz: no target {name:?} (targets: {})",
            known.join(", ")
        );
    };
    static PROVENANCE: Once = Once::new();
    PROVENANCE.call_once(|| {
        if let Some(line) = target.provenance() {
            eprintln!("{line}");
        }
    });
    registry::fuzz(target, data);
}
