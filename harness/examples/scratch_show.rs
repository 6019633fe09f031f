use idpool_harness::{check, seeds, trace::Trace};
fn main() {
    let seed: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let data = seeds::input(seed);
    let t = Trace::from_bytes("binder_commands", &data).unwrap();
    let r = check::catching(|| t.check());
    let mut t = t;
    if let Err(f) = &r {
        let sig = f.signature();
        for _ in 0..3 {
            t = t.shrink(&mut |c: &Trace| match check::catching(|| c.check()) {
                Err(g) => g.signature() == sig,
                Ok(_) => false,
            });
        }
        println!("{t}");
        println!(
            "{:?}",
            check::catching(|| t.check()).err().map(|f| f.message)
        );
    }
}
