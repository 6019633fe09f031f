fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("concurrent_resize", data);
    });
}
