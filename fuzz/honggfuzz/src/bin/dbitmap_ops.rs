fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::dbitmap_ops(data);
        });
    }
}
