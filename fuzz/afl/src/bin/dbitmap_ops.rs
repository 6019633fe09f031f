fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("dbitmap_ops", data);
    });
}
