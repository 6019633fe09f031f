#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    idpool_harness::fuzz("kernel_idpool", data);
});
