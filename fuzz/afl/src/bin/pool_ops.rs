fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::pool_ops(data);
    });
}
