fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::fuzz("handle_table", data);
    });
}
