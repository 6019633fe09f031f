//! Running a `concurrent_resize` program: the simulated process of its
//! pool's flavour (`Sim`) under a chooser's decisions.

use super::outcome::Outcome;
use super::program::{decode, Pool, Program};
use super::sim::Sim;
use crate::check::Checked;
use crate::designs::Design;
use crate::sched::{ByteChooser, Chooser};
use idpool::{AugmentedTree, DBitmap, FastPool, IdPool, Shrinker};

/// Runs `program` for target `target` under the decisions of `chooser`;
/// the first divergence, broken invariant or livelock is the failure, with
/// the schedule so far.
pub fn run(target: &'static str, program: &Program, chooser: &mut dyn Chooser) -> Checked<Outcome> {
    match program.pool {
        Pool::IdPool => run_flavour::<IdPool>(target, program, chooser),
        Pool::DBitmap => run_flavour::<DBitmap>(target, program, chooser),
        Pool::FastPool => run_flavour::<FastPool>(target, program, chooser),
        Pool::AugmentedTree => run_flavour::<AugmentedTree>(target, program, chooser),
        Pool::Shrinker => run_flavour::<Shrinker>(target, program, chooser),
    }
}

fn run_flavour<F: Design>(
    target: &'static str,
    program: &Program,
    chooser: &mut dyn Chooser,
) -> Checked<Outcome> {
    Sim::<F>::new(target, program)?.run(chooser)
}

/// Runs a program and its schedule decoded from the bytes, for target
/// `target`.
pub fn run_bytes(target: &'static str, data: &[u8]) -> Checked<Outcome> {
    match decode(data) {
        Some((program, u)) => run(target, &program, &mut ByteChooser::new(u)),
        None => Ok(Outcome::default()),
    }
}
