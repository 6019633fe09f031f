fn main() {
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::fuzz("binder_commands", data);
        });
    }
}
