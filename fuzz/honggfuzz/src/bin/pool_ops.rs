fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::pool_ops(data);
        });
    }
}
