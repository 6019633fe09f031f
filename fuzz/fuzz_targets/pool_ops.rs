#![no_main]

use idpool_harness::{input::Ops, pool::PoolOp, targets::POOL_OPS};

libfuzzer_sys::fuzz_target!(|ops: Ops<PoolOp>| {
    POOL_OPS.fuzz(&ops);
});
