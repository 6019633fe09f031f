fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::binder_commands(data);
        });
    }
}
