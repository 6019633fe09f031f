#![no_main]

use idpool_harness::{input::Ops, pool::PoolOp, targets::DBITMAP_OPS};

libfuzzer_sys::fuzz_target!(|ops: Ops<PoolOp>| {
    DBITMAP_OPS.fuzz(&ops);
});
