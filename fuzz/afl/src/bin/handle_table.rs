fn main() {
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::handle_table(data);
    });
}
