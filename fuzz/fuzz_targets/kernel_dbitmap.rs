#![no_main]

use idpool_harness::{input::Ops, pool::PoolOp, targets::KERNEL_DBITMAP_OPS};

libfuzzer_sys::fuzz_target!(
    init: eprintln!("{}", idpool_harness::kernel::provenance()),
    |ops: Ops<PoolOp>| {
        KERNEL_DBITMAP_OPS.fuzz(&ops);
    }
);
