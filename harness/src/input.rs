//! Decoded programs as fuzz-target arguments: cargo-fuzz's
//! `fuzz_target!(|program: T| …)` decodes the bytes with
//! `T::arbitrary_take_rest`, and `cargo fuzz fmt` prints `T`'s `Debug`.
//! These types decode exactly as the byte-level targets do ([`crate::decode`],
//! [`crate::sched::decode`]), and print as trace text.

use crate::registry::{OpLang, OpsTarget};
use crate::sched::{ByteChooser, ConcurrentTrace, Program};
use crate::text::{OpText, Text};
use crate::Events;
use arbitrary::{Arbitrary, Unstructured};
use core::fmt;

/// The operations of an op-list target, decoded from all the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Ops<L>(pub Vec<L>);

impl<'a, L: Arbitrary<'a>> Arbitrary<'a> for Ops<L> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let rest = u.bytes(u.len())?;
        Ok(Ops(crate::decode(rest)))
    }
    fn arbitrary_take_rest(u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Ops(crate::decode(u.take_rest())))
    }
}

impl<L: OpText> fmt::Debug for Ops<L> {
    /// One operation per line, as in a trace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|op| writeln!(f, "{}", Text(op)))
    }
}

impl<L: OpLang> OpsTarget<L> {
    /// Runs the target on decoded operations, panicking at the first
    /// failure, as a fuzz target must.
    pub fn fuzz(&self, ops: &Ops<L>) -> Events {
        crate::registry::settle((self.run)(&ops.0))
    }
}

/// A concurrent program and the schedule bytes after it; no program when
/// the bytes do not make one (the run then does nothing).
#[derive(Clone, PartialEq, Eq)]
pub struct Concurrent {
    /// The program.
    pub program: Option<Program>,
    /// The schedule bytes, read by [`ByteChooser`].
    pub schedule: Vec<u8>,
}

impl<'a> Arbitrary<'a> for Concurrent {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let rest = u.bytes(u.len())?;
        Self::arbitrary_take_rest(Unstructured::new(rest))
    }
    fn arbitrary_take_rest(mut u: Unstructured<'a>) -> arbitrary::Result<Self> {
        let program = Program::arbitrary(&mut u).ok();
        let schedule = match program {
            Some(_) => u.take_rest().to_vec(),
            None => Vec::new(),
        };
        Ok(Concurrent { program, schedule })
    }
}

impl Concurrent {
    /// Runs the program under its schedule bytes, panicking at the first
    /// failure, as a fuzz target must.
    pub fn fuzz(&self) -> Events {
        let Some(program) = &self.program else {
            return Events::default();
        };
        let mut chooser = ByteChooser::new(Unstructured::new(&self.schedule));
        crate::registry::settle(
            crate::sched::run(program, &mut chooser).map(|out| crate::sched_events(&out)),
        )
    }
}

impl fmt::Debug for Concurrent {
    /// The trace body: the program, and the schedule its bytes choose (run
    /// once, up to a failure, to record it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.program {
            None => writeln!(f, "(no program)"),
            Some(p) => write!(f, "{}", ConcurrentTrace::record(p.clone(), &self.schedule)),
        }
    }
}
