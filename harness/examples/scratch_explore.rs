use idpool_harness::{check, registry, seeds};
use std::collections::BTreeMap;
fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(2000);
    let t = registry::target("binder_commands").unwrap();
    let mut sigs: BTreeMap<String, (usize, String, u64)> = BTreeMap::new();
    let mut ok = 0;
    for seed in 0..n {
        let data = seeds::input(seed);
        match check::catching(|| t.run(&data)) {
            Ok(_) => ok += 1,
            Err(f) if idpool_harness::history::Finding::of(&f).is_some() => ok += 1,
            Err(f) => {
                let key = format!(
                    "{} | {}",
                    f.signature(),
                    f.message
                        .split(": ")
                        .nth(3)
                        .unwrap_or("")
                        .chars()
                        .take(60)
                        .collect::<String>()
                );
                let e = sigs.entry(key).or_insert((0, f.message.clone(), seed));
                e.0 += 1;
            }
        }
    }
    println!("ok {ok} of {n}");
    for (k, (c, m, seed)) in &sigs {
        println!(
            "{c:5} {k}\n      seed {seed}: {}",
            m.chars().take(600).collect::<String>()
        );
    }
}
