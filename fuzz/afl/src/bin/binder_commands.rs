fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("binder_commands", data);
    });
}
