fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("pool_ops", data);
    });
}
