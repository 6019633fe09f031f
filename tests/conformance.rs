//! Rules of the upstream allocator that no other test pinned, each named
//! after the upstream function it comes from. `docs/conformance.md` lists
//! every rule, the upstream function, ours and the test that pins it; each
//! test here was checked to fail with the rule broken in a scratch copy.

use idpool::{
    AllocError, Bitmap, DBitmap, Error, Flavour, Gfp, HandleTable, IdPool, Next, NodeRefs,
    Operation, PoolResizer, ReallocRequest, RefInfo, Request, Version,
};
use std::collections::BTreeMap;

fn insert(node: u64, is_manager: bool) -> Request {
    Request::Insert { node, is_manager }
}

/// A C mainline table holding handles `1..=63` in a full 64-bit map.
fn full_c_table() -> HandleTable<DBitmap> {
    let mut t = HandleTable::<DBitmap>::with_version(Version::CMainline);
    for node in 1..=63 {
        assert_eq!(
            t.insert_or_update_handle(1000 + node, false),
            Ok(node as u32)
        );
    }
    t
}

/// `dbitmap_grow_nbits` is `nbits << 1` with no ceiling of its own: at 2^30
/// bits it asks for 2^31, where the Rust `IdPool::grow_request` stops.
/// (It allocates a 2^30-bit map, 128 MiB, once.)
#[test]
fn dbitmap_grow_nbits_has_no_ceiling_of_its_own() {
    let mut d = DBitmap::init(Gfp::Kernel);
    d.grow(DBitmap::zalloc(1 << 30, Gfp::Kernel), 1 << 30);
    assert_eq!(d.nbits(), 1 << 30);
    assert_eq!(d.grow_nbits(), 1 << 31);
    // The allocation itself is what fails up there (bitmap_zalloc's
    // size limit; here the i32::MAX cap of every bitmap).
    assert_eq!(DBitmap::zalloc(1 << 31, Gfp::Kernel), None);
    let pool = IdPool::with_capacity(1 << 30, Gfp::Kernel).unwrap();
    assert_eq!(pool.grow_request(), None, "the Rust pool's ceiling");
}

/// `dbitmap_shrink_nbits`: a map with no bit set shrinks straight to
/// `NBITS_MIN`, not to half (`find_last_bit` returns `nbits`).
#[test]
fn dbitmap_shrink_nbits_empty_map_goes_straight_to_64() {
    let mut d = DBitmap::init(Gfp::Kernel);
    d.grow(DBitmap::zalloc(1024, Gfp::Kernel), 1024);
    assert_eq!(d.shrink_nbits(), 64);
    d.shrink(DBitmap::zalloc(64, Gfp::Kernel), 64);
    assert_eq!(d.nbits(), 64);
}

/// `dbitmap_shrink` frees the new map and changes nothing when the dbitmap
/// is disabled; a disabled map never comes back.
#[test]
fn dbitmap_shrink_refuses_a_disabled_map() {
    let mut d = DBitmap::init(Gfp::Kernel);
    d.free();
    for nbits in [0, 64, 128] {
        d.shrink(Bitmap::new(nbits, Gfp::Kernel).ok(), nbits);
        assert!(!d.enabled(), "shrink to {nbits}");
        assert_eq!(d.nbits(), 0);
    }
}

/// `dbitmap_grow` checks "disabled or not larger" first and only then
/// treats a NULL allocation as ENOMEM: a failed allocation for a grow that
/// another thread already did keeps the map.
#[test]
fn dbitmap_grow_checks_stale_or_disabled_before_null() {
    let mut d = DBitmap::init(Gfp::Kernel);
    d.grow(DBitmap::zalloc(128, Gfp::Kernel), 128);
    d.grow(None, 128); // stale: 128 is not larger than 128
    assert!(d.enabled(), "a stale failed grow must not disable the map");
    assert_eq!(d.nbits(), 128);
    d.grow(None, 64);
    assert_eq!(d.nbits(), 128);
    d.grow(None, 256); // needed: now the NULL disables it
    assert!(!d.enabled());
}

/// `get_ref_desc_olocked` on a disabled dbitmap calls
/// `slow_desc_lookup_olocked(proc, offset)`: the context manager's node
/// searches from 0, everyone else from 1 (mainline, since "binder: fix
/// descriptor lookup for context manager").
#[test]
fn slow_desc_lookup_olocked_starts_at_the_offset() {
    let mut t = full_c_table();
    t.faults().fail_next_at(idpool::AllocSite::Grow, 1);
    assert_eq!(t.insert_or_update_handle(7, false), Ok(64));
    assert!(!t.refs().pool().enabled(), "on the slow path now");
    assert_eq!(
        t.insert_or_update_handle(8, true),
        Ok(0),
        "manager: offset 0"
    );
    assert_eq!(t.insert_or_update_handle(9, false), Ok(65));
    t.decrement(0).unwrap();
    assert_eq!(t.insert_or_update_handle(10, false), Ok(66), "0 stays free");
    assert_eq!(t.insert_or_update_handle(11, true), Ok(0));
    t.refs().check_invariants().unwrap();
}

/// `insert_or_update_handle` (Rust) does its second `by_node` lookup
/// *before* the dead-process check: a thread whose node was inserted by
/// another thread while the lock was dropped takes that handle even if the
/// process died meanwhile, and only a really new ref gets `ESRCH`.
#[test]
fn insert_or_update_handle_second_lookup_before_dead_check() {
    let mut refs = NodeRefs::<IdPool>::with_version(Version::RustMainline);
    let mut late = Operation::new(insert(5, false));
    late.step_locked(&mut refs); // by_node: not there
    late.step_unlocked(Gfp::Kernel); // the ref's memory
    let faults = idpool::Faults::default();
    assert_eq!(refs.run(insert(5, false), &faults), Ok(1));
    refs.mark_dead();
    late.step_locked(&mut refs);
    assert_eq!(late.next(), Next::Done(Ok(1)));
    assert_eq!(refs.by_handle()[&1].count, 2);
    assert_eq!(refs.run(insert(6, false), &faults), Err(Error::DeadProcess));
    refs.check_invariants().unwrap();
}

/// An `IdPool` that cannot grow past 64 ids, to reach the ceiling of
/// `grow_request` through the table without 2^30 handles.
#[derive(Debug, Default)]
struct Capped(IdPool);

impl Flavour for Capped {
    const NAME: &'static str = "capped";
    type Request = ReallocRequest;
    type Resizer = PoolResizer;

    fn new_pool() -> Self {
        Capped(IdPool::new())
    }
    fn find_unused(&mut self, start: u32, _: &BTreeMap<u32, RefInfo>) -> Option<u32> {
        self.0.find_unused_id(start as usize).map(|id| id.as_u32())
    }
    fn acquire(&mut self, id: u32) {
        let got = self.0.find_unused_id(id as usize).map(|u| u.acquire());
        assert_eq!(got, Some(id as usize));
    }
    fn release(&mut self, id: u32) {
        self.0.release_id(id as usize);
    }
    fn grow_request(&self) -> Option<ReallocRequest> {
        None
    }
    fn realloc(request: &ReallocRequest, gfp: Gfp) -> Result<PoolResizer, AllocError> {
        request.realloc(gfp)
    }
    fn grow(&mut self, resizer: PoolResizer) {
        self.0.grow(resizer);
    }
    fn shrink_request(&self) -> Option<ReallocRequest> {
        self.0.shrink_request()
    }
    fn shrink(&mut self, resizer: PoolResizer) {
        self.0.shrink(resizer);
    }
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    fn used_ids(&self) -> Option<Vec<u32>> {
        Some(self.0.used_ids().map(|id| id as u32).collect())
    }
}

/// `insert_or_update_handle`: a full pool whose `grow_request()` is `None`
/// fails with `ENOMEM` and changes nothing.
#[test]
fn insert_or_update_handle_grow_request_none_is_enomem() {
    let mut t = HandleTable::<Capped>::new();
    for node in 1..=63 {
        assert_eq!(t.insert_or_update_handle(node, false), Ok(node as u32));
    }
    let before = t.refs().by_handle().clone();
    assert_eq!(t.insert_or_update_handle(100, false), Err(Error::NoMemory));
    assert_eq!(t.refs().by_handle(), &before);
    assert_eq!(t.refs().pool().used_ids().map(|u| u.len()), Some(63));
    assert_eq!(
        t.insert_or_update_handle(1, false),
        Ok(1),
        "existing nodes still work"
    );
    t.refs().check_invariants().unwrap();
}
