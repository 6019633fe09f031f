fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::fuzz("kernel_idpool", data);
        });
    }
}
