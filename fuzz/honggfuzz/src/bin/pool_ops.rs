fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::fuzz("pool_ops", data);
        });
    }
}
