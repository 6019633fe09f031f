#![no_main]

libfuzzer_sys::fuzz_target!(|program: idpool_harness::input::Concurrent| {
    program.fuzz();
});
