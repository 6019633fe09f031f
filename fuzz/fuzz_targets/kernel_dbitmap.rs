#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    idpool_harness::fuzz("kernel_dbitmap", data);
});

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    idpool_harness::mutate::mutate("kernel_dbitmap", data, size, max_size, seed, libfuzzer_sys::fuzzer_mutate)
});
