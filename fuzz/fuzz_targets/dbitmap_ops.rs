#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    idpool_harness::fuzz("dbitmap_ops", data);
});
