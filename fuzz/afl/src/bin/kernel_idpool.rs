fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("kernel_idpool", data);
    });
}
