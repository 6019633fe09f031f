fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::concurrent_resize(data);
    });
}
