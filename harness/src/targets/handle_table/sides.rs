//! The sides of a `handle_table` run: each flavour's table (owned, or
//! behind the lock real threads share) built for one version, as the
//! runner sees it (`AnyTable`), beside its own model; and which sides
//! are compared as two versions of one flavour (`pairs`).

use super::model::TableModel;
use super::start::StartSet;
use crate::bits::{self, Probe};
use crate::check::{Flavour, FlavourName};
use crate::designs::{self, Design};
use crate::history::Versions;
use crate::model::{self, HandleModel, Mismatch};
use crate::oracle::Policy;
use idpool::{
    AllocSite, AugmentedTree, BuildError, Corruption, DBitmap, Error, FastPool, Faults,
    HandleTable, IdPool, InvariantViolation, LinearScan, NodeId, NodeRefs, Request,
    SharedHandleTable, Shrinker, Version, Warning,
};

/// One flavour's table, as the runner sees it.
pub(super) trait AnyTable {
    /// What failures call it: its flavour on its version.
    fn flavour(&self) -> Flavour;
    fn run(&mut self, request: Request) -> Result<u32, Error>;
    fn lookup(&self, node: NodeId) -> Option<u32>;
    fn kill(&mut self);
    fn fail_next(&self, site: Option<AllocSite>, n: u32);
    fn corrupt(&self, corruption: Corruption);
    fn drain_warnings(&mut self) -> Vec<Warning>;
    fn pending_failures(&self) -> u32;
    fn capacity(&self) -> usize;
    /// The table's `by_handle` and `by_node` against the model's
    /// ([`model::compare`], [`model::compare_nodes`]).
    fn compare_maps(&self, model: &HandleModel) -> Result<(), Mismatch>;
    fn check_invariants(&self) -> Result<(), InvariantViolation>;
    fn reclaim(&mut self) -> Option<usize>;
    fn check_design(&self) -> Result<(), String>;
    /// How the versions the table and its pool report differ from
    /// `built_for` ([`designs::version_mismatch`]).
    fn version_mismatch(&self, built_for: Version) -> Option<String>;
    /// Whether the table says its process has died.
    fn is_dead(&self) -> bool;
    /// The ids its memory-pressure callback would give back now, for a
    /// table that has one ([`Design::reclaimable_ids`]).
    fn reclaimable_ids(&self) -> Option<usize>;
    /// The pool's bits that `probe` names against the model's
    /// expectation, read one id at a time ([`crate::bits`]).
    fn compare_bits(&self, model: &TableModel, probe: &Probe) -> Result<(), Vec<bits::BitDiff>>;
}

/// How a side reaches its table: owned ([`HandleTable`]), or behind the
/// real lock that threads share ([`SharedHandleTable`], one lock per
/// critical section, driven here by one thread). The runner holds both to
/// the same checks, so the wrapper real threads use is part of the
/// campaign too.
pub(super) trait TableAccess: Sized {
    type F: Design;
    fn build(version: Version, start: Option<&StartSet>) -> Result<Self, BuildError>;
    fn insert_or_update_handle(&mut self, node: NodeId, is_manager: bool) -> Result<u32, Error>;
    fn increment(&mut self, handle: u32) -> Result<u32, Error>;
    fn decrement(&mut self, handle: u32) -> Result<u32, Error>;
    /// A request through the entry point a driver calls for it (each is
    /// the table's `run` of that request).
    fn run(&mut self, request: Request) -> Result<u32, Error> {
        match request {
            Request::Insert { node, is_manager } => self.insert_or_update_handle(node, is_manager),
            Request::Increment(handle) => self.increment(handle),
            Request::Decrement(handle) => self.decrement(handle),
        }
    }
    fn lookup(&self, node: NodeId) -> Option<u32>;
    fn kill(&mut self);
    fn faults(&self) -> &Faults;
    fn drain_warnings(&mut self) -> Vec<Warning>;
    fn capacity(&self) -> usize;
    fn check_invariants(&self) -> Result<(), InvariantViolation>;
    fn reclaim(&mut self) -> Option<usize>;
    /// `f` on the table's state (under the lock, for the shared table).
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<Self::F>) -> R) -> R;
}

/// The constructors and entry points [`HandleTable`] and
/// [`SharedHandleTable`] both have, under the same names and meanings:
/// [`TableAccess`] forwards to them.
macro_rules! forward_entry_points {
    ($table:ident) => {
        fn build(version: Version, start: Option<&StartSet>) -> Result<Self, BuildError> {
            match start {
                None => Ok($table::with_version(version)),
                Some(start) => $table::from_handles(version, start.pairs().iter().copied()),
            }
        }
        fn insert_or_update_handle(
            &mut self,
            node: NodeId,
            is_manager: bool,
        ) -> Result<u32, Error> {
            $table::insert_or_update_handle(self, node, is_manager)
        }
        fn increment(&mut self, handle: u32) -> Result<u32, Error> {
            $table::increment(self, handle)
        }
        fn decrement(&mut self, handle: u32) -> Result<u32, Error> {
            $table::decrement(self, handle)
        }
        fn lookup(&self, node: NodeId) -> Option<u32> {
            $table::lookup(self, node)
        }
        fn kill(&mut self) {
            $table::kill(self)
        }
        fn faults(&self) -> &Faults {
            $table::faults(self)
        }
        fn drain_warnings(&mut self) -> Vec<Warning> {
            $table::drain_warnings(self)
        }
    };
}

impl<F: Design> TableAccess for HandleTable<F> {
    type F = F;
    forward_entry_points!(HandleTable);
    fn capacity(&self) -> usize {
        HandleTable::capacity(self)
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.refs().check_invariants()
    }
    fn reclaim(&mut self) -> Option<usize> {
        F::reclaim_table(self)
    }
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<F>) -> R) -> R {
        f(self.refs())
    }
}

impl<F: Design> TableAccess for SharedHandleTable<F> {
    type F = F;
    forward_entry_points!(SharedHandleTable);
    fn capacity(&self) -> usize {
        self.read(|refs| refs.pool().capacity())
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        SharedHandleTable::check_invariants(self)
    }
    fn reclaim(&mut self) -> Option<usize> {
        F::reclaim_shared(self)
    }
    fn read<R>(&self, f: impl FnOnce(&NodeRefs<F>) -> R) -> R {
        self.with_refs(|refs| f(refs))
    }
}

/// A table built for one version, under its failure name.
pub(super) struct Versioned<T: TableAccess> {
    table: T,
    flavour: Flavour,
}

impl<T: TableAccess + 'static> Versioned<T> {
    /// A new process's table, or one built from `start`'s handles: the
    /// error names the table.
    pub(super) fn boxed(
        version: Version,
        start: Option<&StartSet>,
    ) -> Result<Box<dyn AnyTable>, (Flavour, BuildError)> {
        let flavour = Flavour::on(<T::F as Design>::FLAVOUR, version);
        let table = T::build(version, start).map_err(|e| (flavour, e))?;
        Ok(Box::new(Versioned { table, flavour }))
    }
}

impl<T: TableAccess> AnyTable for Versioned<T> {
    fn flavour(&self) -> Flavour {
        self.flavour
    }
    fn run(&mut self, request: Request) -> Result<u32, Error> {
        self.table.run(request)
    }
    fn lookup(&self, node: NodeId) -> Option<u32> {
        self.table.lookup(node)
    }
    fn kill(&mut self) {
        self.table.kill()
    }
    fn fail_next(&self, site: Option<AllocSite>, n: u32) {
        match site {
            Some(site) => self.table.faults().fail_next_at(site, n),
            None => self.table.faults().fail_next(n),
        }
    }
    fn corrupt(&self, corruption: Corruption) {
        self.table.faults().corrupt(corruption);
    }
    fn drain_warnings(&mut self) -> Vec<Warning> {
        self.table.drain_warnings()
    }
    fn pending_failures(&self) -> u32 {
        self.table.faults().pending()
    }
    fn capacity(&self) -> usize {
        self.table.capacity()
    }
    fn compare_maps(&self, model: &HandleModel) -> Result<(), Mismatch> {
        self.table.read(|refs| {
            model::compare(refs.by_handle(), model)
                .and_then(|()| model::compare_nodes(refs.by_node(), model))
        })
    }
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.table.check_invariants()
    }
    fn reclaim(&mut self) -> Option<usize> {
        self.table.reclaim()
    }
    fn check_design(&self) -> Result<(), String> {
        self.table.read(|refs| refs.pool().check_design())
    }
    fn version_mismatch(&self, built_for: Version) -> Option<String> {
        self.table
            .read(|refs| designs::version_mismatch(refs, built_for))
    }
    fn is_dead(&self) -> bool {
        self.table.read(NodeRefs::is_dead)
    }
    fn reclaimable_ids(&self) -> Option<usize> {
        self.table.read(|refs| refs.pool().reclaimable_ids())
    }
    fn compare_bits(&self, model: &TableModel, probe: &Probe) -> Result<(), Vec<bits::BitDiff>> {
        self.table
            .read(|refs| model.compare_bits(refs.pool(), probe))
    }
}

/// One flavour's table beside its model.
pub(super) type Side = (Box<dyn AnyTable>, TableModel);

/// How many flavours every run drives (the first sides of [`sides`]); the
/// sides after them are the versions beside, compared in [`pairs`].
pub(super) const FLAVOURS: usize = 6;

/// The sides of a run: `IdPool` on the Rust version, `DBitmap` on the C
/// version, the linear scan on the Rust version, then the three designs on
/// the Rust version (they run the Rust versions only, see
/// [`idpool::Flavour::supports`]); then, when asked, a second `DBitmap` and a
/// second `IdPool` on the versions beside.
///
/// The first side, the Rust driver's own allocator, runs through
/// [`SharedHandleTable`], the wrapper real threads share (its lock taken
/// once per critical section, as Binder takes it); every other side owns
/// its [`HandleTable`]. Both wrappers are the allocator's, and each is held
/// to its own model, so a slip in either shows on its side.
pub(super) fn sides(
    v: &Versions,
    start: Option<&StartSet>,
) -> Result<Vec<Side>, (Flavour, BuildError)> {
    let mut sides: Vec<Side> = vec![
        (
            Versioned::<SharedHandleTable<IdPool>>::boxed(v.rust, start)?,
            TableModel::new(Some(Policy::Rust), v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<DBitmap>>::boxed(v.c, start)?,
            TableModel::new(Some(Policy::C), v.c).started(start),
        ),
        (
            Versioned::<HandleTable<LinearScan>>::boxed(v.rust, start)?,
            TableModel::new(None, v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<FastPool>>::boxed(v.rust, start)?,
            TableModel::new(Some(Policy::Rust), v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<AugmentedTree>>::boxed(v.rust, start)?,
            TableModel::tree(v.rust).started(start),
        ),
        (
            Versioned::<HandleTable<Shrinker>>::boxed(v.rust, start)?,
            TableModel::shrinker(v.rust).started(start),
        ),
    ];
    if let Some(c) = v.c_versus {
        sides.push((
            Versioned::<HandleTable<DBitmap>>::boxed(c, start)?,
            TableModel::new(Some(Policy::C), c).started(start),
        ));
    }
    if let Some(rust) = v.rust_versus {
        sides.push((
            Versioned::<HandleTable<IdPool>>::boxed(rust, start)?,
            TableModel::new(Some(Policy::Rust), rust).started(start),
        ));
    }
    Ok(sides)
}

/// Two sides run on two versions of one flavour, compared after every
/// request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pair {
    /// The side on the driver's version.
    pub(super) a: usize,
    /// The side on the version beside it.
    pub(super) b: usize,
    /// The comparison, in failures.
    pub(super) flavour: Flavour,
}

/// The pairs of sides run on two versions of one flavour: the `dbitmap`
/// table (side 1) beside a second one, then the `IdPool` table (side 0)
/// beside a second one, each extra side after the [`FLAVOURS`] in that order.
pub(super) fn pairs(v: &Versions) -> Vec<Pair> {
    let wanted = [
        (1, FlavourName::DBitmap, v.c, v.c_versus),
        (0, FlavourName::IdPool, v.rust, v.rust_versus),
    ];
    wanted
        .into_iter()
        .filter_map(|(a, name, first, second)| Some((a, name, [first, second?])))
        .zip(FLAVOURS..)
        .map(|((a, name, versions), b)| Pair {
            a,
            b,
            flavour: Flavour::Versus { name, versions },
        })
        .collect()
}
