fn main() {
    for p in std::env::args().skip(1) {
        let data = std::fs::read(&p).unwrap();
        let t = idpool_harness::trace::Trace::from_bytes("binder_commands", &data).unwrap();
        print!("{t}");
    }
}
