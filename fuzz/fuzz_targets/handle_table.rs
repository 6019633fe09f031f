#![no_main]

use idpool_harness::table_target::TableProgram;

libfuzzer_sys::fuzz_target!(|program: TableProgram| {
    program.fuzz();
});
