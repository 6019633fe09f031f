//! A failed check as a value: [`Failure`], how it is grouped
//! ([`Signature`]), what it was about ([`Flavour`]) and what the check saw
//! ([`Detail`]).

use super::{Check, OpKind, Phase, Regime};
use core::fmt::{self, Display};
use idpool::Version;
use serde::Serialize;

/// A failed check, as a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The target: its registry entry's name, which the entry hands to the
    /// runner.
    pub target: &'static str,
    /// The step (0-based) at which it failed.
    pub step: usize,
    /// The kind of operation that failed.
    pub op: OpKind,
    /// Which check failed.
    pub check: Check,
    /// The table or pool flavour the check was about, if it was about one.
    pub flavour: Option<Flavour>,
    /// The phase of the step (step machines only).
    pub phase: Option<Phase>,
    /// The capacity of the pool when it failed.
    pub capacity: usize,
    /// What the check saw, for the failures whose check and flavour do not
    /// tell one bug from another (the known upstream findings,
    /// [`crate::history::Finding::of`]); `None` for the others.
    pub detail: Option<Detail>,
    /// The whole message, for people.
    pub message: String,
}

/// A [`Failure`] as the tools write it in JSON ([`Failure::to_json`]):
/// what a script reads of a failed check (`jq -r .message`, `.signature`),
/// one field per value, in this order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureJson {
    /// The signature, as regression headers store it.
    pub signature: String,
    /// The target.
    pub target: &'static str,
    /// The step (0-based).
    pub step: usize,
    /// The kind of operation.
    pub op: &'static str,
    /// The check.
    pub check: String,
    /// Whether the check was a panic of the code under test.
    pub panic: bool,
    /// Whether it is a memory-safety finding (AddressSanitizer's).
    pub memory_safety: bool,
    /// The flavour, if the check was about one.
    pub flavour: Option<String>,
    /// The phase (step machines only).
    pub phase: Option<String>,
    /// The capacity of the pool.
    pub capacity: usize,
    /// The capacity's regime.
    pub regime: String,
    /// The whole message.
    pub message: String,
    /// What the check means.
    pub meaning: &'static str,
}

/// How the oracle failed: target, check (with its flavour), op kind and
/// capacity regime. Two failures with the same signature are taken to be
/// the same bug.
///
/// `Display` gives the form regression headers store (`# expect:`) and
/// `triage dedup` groups by, e.g. `pool_ops/capacity/Commit/small` or
/// `handle_table/idpool: invariant/Decrement/inline`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signature {
    /// The target.
    pub target: &'static str,
    /// The flavour the check was about, if any.
    pub flavour: Option<Flavour>,
    /// Which check failed.
    pub check: Check,
    /// The kind of operation it failed in.
    pub op: OpKind,
    /// The capacity regime when it failed.
    pub regime: Regime,
}

impl Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.target)?;
        if let Some(flavour) = &self.flavour {
            write!(f, "{flavour}: ")?;
        }
        write!(f, "{}/{}/{}", self.check, self.op, self.regime)
    }
}

/// A table or pool flavour, under the name failures and traces give it
/// (the allocator's `Flavour::NAME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlavourName {
    /// The Rust driver's `IdPool`.
    IdPool,
    /// The C driver's `dbitmap`.
    DBitmap,
    /// The legacy linear scan.
    Linear,
    /// The fast pool design.
    FastPool,
    /// The augmented tree design.
    Augmented,
    /// The shrinker design.
    Shrinker,
    /// The kernel's own code beside ours (`kernel_dbitmap`: `dbitmap.h`;
    /// `kernel_idpool`: `id_pool.rs` and `bitmap.rs`).
    Kernel,
}

impl FlavourName {
    /// Its name: `idpool`, `dbitmap`, `linear`, `fastpool`, `augmented`,
    /// `shrinker`, `kernel`.
    pub fn name(self) -> &'static str {
        match self {
            FlavourName::IdPool => "idpool",
            FlavourName::DBitmap => "dbitmap",
            FlavourName::Linear => "linear",
            FlavourName::FastPool => "fastpool",
            FlavourName::Augmented => "augmented",
            FlavourName::Shrinker => "shrinker",
            FlavourName::Kernel => "kernel",
        }
    }
}

impl Display for FlavourName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a failed check was about, in a run that drives more than one table
/// or pool: one flavour, on the version it follows, or two versions of one
/// flavour compared.
///
/// `Display` names a flavour on mainline (or on no version) by its name
/// alone, so that the signatures of mainline failures read as they always
/// did: `idpool`, `dbitmap c-2024-06`, `dbitmap c-v3 vs c-2024-06`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flavour {
    /// One flavour.
    One {
        /// Which.
        name: FlavourName,
        /// The version it follows, where it follows one.
        version: Option<Version>,
    },
    /// Two versions of one flavour, run side by side.
    Versus {
        /// Which flavour.
        name: FlavourName,
        /// The two versions, in the comparison's order.
        versions: [Version; 2],
    },
    /// One Binder driver at the command level (`binder_commands`), named
    /// by its version: `c-mainline`, `rust-v1`.
    Driver(Version),
    /// The C and the Rust driver side by side (`binder_commands`), named by
    /// the rule of its comparison the difference falls under:
    /// `manager-handle` (`c-vs-rust` when no rule names it).
    Drivers {
        /// The rule's name.
        rule: &'static str,
    },
}

impl Flavour {
    /// `name` on `version`.
    pub fn on(name: FlavourName, version: Version) -> Flavour {
        Flavour::One {
            name,
            version: Some(version),
        }
    }

    /// `name`, on no version.
    pub fn plain(name: FlavourName) -> Flavour {
        Flavour::One {
            name,
            version: None,
        }
    }

    /// The version it is about, for one flavour on a version.
    pub fn version(self) -> Option<Version> {
        match self {
            Flavour::One { version, .. } => version,
            Flavour::Driver(version) => Some(version),
            Flavour::Versus { .. } | Flavour::Drivers { .. } => None,
        }
    }
}

/// Whether `version` is mainline (named by the flavour alone).
fn is_mainline(version: Version) -> bool {
    matches!(version, Version::CMainline | Version::RustMainline)
}

impl Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Flavour::One {
                name,
                version: Some(v),
            } if !is_mainline(v) => write!(f, "{name} {v}"),
            Flavour::One { name, .. } => write!(f, "{name}"),
            Flavour::Versus {
                name,
                versions: [a, b],
            } => write!(f, "{name} {a} vs {b}"),
            Flavour::Driver(version) => write!(f, "{version}"),
            Flavour::Drivers { rule } => f.write_str(rule),
        }
    }
}

/// What a failed check saw, as values: which descriptor a crash was about
/// and whose insert it was, what two versions side by side returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The C driver's `BUG()` ([`Check::KernelCrash`]) on an insert.
    Crash {
        /// The version of the table that crashed.
        version: Version,
        /// The descriptor found twice in `refs_by_desc`.
        id: u32,
        /// Whether the insert was the context manager's.
        manager: bool,
    },
    /// Two versions run side by side on one request
    /// ([`Check::VersionsDiffer`]): each side's version, outcome, capacity
    /// and planned failures afterwards, in the order of the comparison's
    /// name.
    Versions {
        /// The request both ran.
        request: idpool::Request,
        /// The versions.
        versions: [Version; 2],
        /// What each returned.
        outcomes: [Result<u32, idpool::Error>; 2],
        /// The capacity both pools had before the request (a pair whose
        /// capacities differ is not compared again).
        before: usize,
        /// Each pool's capacity after the request.
        capacities: [usize; 2],
        /// The planned allocation failures each side had not consumed
        /// after the request: which allocations it attempted.
        pending: [u32; 2],
    },
    /// The C and the Rust driver differ in a way a rule of
    /// `binder_commands`' comparison names ([`Check::DriversDiffer`]).
    Drivers {
        /// The rule's name.
        rule: &'static str,
    },
}

impl Failure {
    /// How the oracle failed ([`Signature`]).
    pub fn signature(&self) -> Signature {
        Signature {
            target: self.target,
            flavour: self.flavour,
            check: self.check.clone(),
            op: self.op,
            regime: Regime::of(self.capacity),
        }
    }

    /// The same failure, with `detail`.
    pub fn with_detail(mut self: Box<Self>, detail: Detail) -> Box<Failure> {
        self.detail = Some(detail);
        self
    }

    /// The failure as JSON: its signature, each of its values, the
    /// message and what the check means (`triage --json` adds the known
    /// upstream finding it is).
    pub fn to_json(&self) -> FailureJson {
        let signature = self.signature();
        FailureJson {
            signature: signature.to_string(),
            target: self.target,
            step: self.step,
            op: self.op.name(),
            check: self.check.to_string(),
            panic: matches!(self.check, Check::Panic(_)),
            memory_safety: self.check.is_memory_safety(),
            flavour: self.flavour.map(|x| x.to_string()),
            phase: self.phase.map(|p| p.to_string()),
            capacity: self.capacity,
            regime: signature.regime.to_string(),
            message: self.message.clone(),
            meaning: self.check.meaning(),
        }
    }

    /// Panics with the message, as a fuzz target must. First, when
    /// `IDPOOL_FAILURE_JSON` names a file that does not exist yet, writes
    /// the failure there as JSON ([`Failure::to_json`]): what a script
    /// reads of a fuzzer's crash (the check that failed), rather than its
    /// log.
    ///
    /// # Panics
    ///
    /// Always.
    #[track_caller]
    pub fn raise(self) -> ! {
        if let Some(path) = std::env::var_os("IDPOOL_FAILURE_JSON") {
            use std::io::Write;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path);
            if let Ok(mut file) = file {
                if let Ok(line) = serde_json::to_string(&self.to_json()) {
                    let _ = writeln!(file, "{line}");
                }
            }
        }
        panic!("{}", self.message)
    }

    /// The failure behind a caught panic that came from no check: built
    /// from the panic's message and the step that was running (see
    /// [`super::begin_step`]).
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Failure {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        let (target, step, op, capacity) =
            super::narrate::current().unwrap_or(("?", 0, OpKind::END_OF_RUN, 0));
        // The first clause of the message names the check: "handle table
        // corruption", "attempt to subtract with overflow", ...
        let first = message.split([':', '\n']).next().unwrap_or_default();
        let name = first
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        Failure {
            target,
            step,
            op,
            check: Check::Panic(name),
            flavour: None,
            phase: None,
            capacity,
            detail: None,
            message: format!("{target}: step {step} (capacity {capacity}): panic: {message}"),
        }
    }
}

impl Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flavour prints as the signatures always named it: the flavour
    /// alone on mainline or no version, with the version on a historical
    /// one, and both versions for a comparison.
    #[test]
    fn a_flavour_prints_as_signatures_name_it() {
        let cases = [
            (
                Flavour::on(FlavourName::IdPool, Version::RustMainline),
                "idpool",
            ),
            (
                Flavour::on(FlavourName::DBitmap, Version::CMainline),
                "dbitmap",
            ),
            (Flavour::plain(FlavourName::FastPool), "fastpool"),
            (
                Flavour::on(FlavourName::DBitmap, Version::C2024_06),
                "dbitmap c-2024-06",
            ),
            (
                Flavour::on(FlavourName::Linear, Version::RustV1),
                "linear rust-v1",
            ),
            (
                Flavour::Versus {
                    name: FlavourName::DBitmap,
                    versions: [Version::CV3, Version::C2024_06],
                },
                "dbitmap c-v3 vs c-2024-06",
            ),
            (
                Flavour::Versus {
                    name: FlavourName::IdPool,
                    versions: [Version::RustMainline, Version::RustV1],
                },
                "idpool rust-mainline vs rust-v1",
            ),
        ];
        for (flavour, text) in cases {
            assert_eq!(flavour.to_string(), text, "{flavour:?}");
        }
    }

    /// A signature prints target, flavour, check, op kind and regime, the
    /// flavour only when there is one.
    #[test]
    fn a_signature_prints_its_parts() {
        let mut failure = Failure {
            target: "handle_table",
            step: 3,
            op: OpKind::new("Decrement", 12),
            check: Check::Invariant,
            flavour: Some(Flavour::on(FlavourName::IdPool, Version::RustMainline)),
            phase: None,
            capacity: 64,
            detail: None,
            message: String::new(),
        };
        assert_eq!(
            failure.signature().to_string(),
            "handle_table/idpool: invariant/Decrement/inline"
        );
        failure.flavour = None;
        failure.capacity = 300;
        assert_eq!(
            failure.signature().to_string(),
            "handle_table/invariant/Decrement/small"
        );
    }

    /// The JSON a script reads of a failure: one line, the fields in the
    /// order scripts and people expect, the message's quotes, backslashes
    /// and control characters escaped so that it reads back as written.
    #[test]
    fn a_failure_writes_json_that_reads_back() {
        let failure = Failure {
            target: "handle_table",
            step: 3,
            op: OpKind::new("Decrement", 12),
            check: Check::Invariant,
            flavour: Some(Flavour::on(FlavourName::IdPool, Version::RustMainline)),
            phase: None,
            capacity: 64,
            detail: None,
            message: "a \"quoted\"\\path\n\u{1}".into(),
        };
        let line = serde_json::to_string(&failure.to_json()).unwrap();
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(
            line.starts_with(
                r#"{"signature":"handle_table/idpool: invariant/Decrement/inline","target":"handle_table","step":3,"op":"Decrement","#
            ),
            "{line}"
        );
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["message"], failure.message.as_str());
        assert_eq!(back["flavour"], "idpool");
        assert_eq!(back["phase"], serde_json::Value::Null);
        assert_eq!(back["memory_safety"], false);
        assert_eq!(back["capacity"], 64);
    }
}
