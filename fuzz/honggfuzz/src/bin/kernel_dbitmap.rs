fn main() {
    eprintln!("{}", idpool_harness::kernel::provenance());
    loop {
        honggfuzz::fuzz!(|data: &[u8]| {
            idpool_harness::kernel_dbitmap(data);
        });
    }
}
