fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::dbitmap_ops(data);
    });
}
