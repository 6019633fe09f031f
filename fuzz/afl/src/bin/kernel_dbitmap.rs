fn main() {
    eprintln!("{}", idpool_harness::kernel::provenance());
    afl::fuzz!(|data: &[u8]| {
        idpool_harness::kernel_dbitmap(data);
    });
}
