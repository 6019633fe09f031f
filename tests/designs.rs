//! The three designs against mainline, on the handle table: the same
//! operations, identical handles and outcomes; the fast pool's capacity is
//! mainline's, the shrinker's follows its own rule.

use idpool::{AugmentedTree, FastPool, HandleTable, IdPool, Shrinker};

#[test]
fn designs_hand_out_mainlines_handles() {
    for seed in 1..=12u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rng = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut mainline = HandleTable::<IdPool>::new();
        let mut fast = HandleTable::<FastPool>::new();
        let mut tree = HandleTable::<AugmentedTree>::new();
        let mut shrinker = HandleTable::<Shrinker>::new();
        let nodes = [50, 600, 3000][rng(3) as usize];
        let mut high_water = 64;
        for step in 0..4000 {
            let what = format!("seed {seed} step {step}");
            let live: Vec<u32> = mainline.refs().by_handle().keys().copied().collect();
            match rng(10) {
                0..=4 => {
                    let (node, manager) = (rng(nodes), rng(50) == 0);
                    let expected = mainline.insert_or_update_handle(node, manager);
                    assert_eq!(
                        fast.insert_or_update_handle(node, manager),
                        expected,
                        "{what}"
                    );
                    assert_eq!(
                        tree.insert_or_update_handle(node, manager),
                        expected,
                        "{what}"
                    );
                    assert_eq!(
                        shrinker.insert_or_update_handle(node, manager),
                        expected,
                        "{what}"
                    );
                }
                5 if !live.is_empty() => {
                    let h = live[rng(live.len() as u64) as usize];
                    let expected = mainline.increment(h);
                    assert_eq!(fast.increment(h), expected);
                    assert_eq!(tree.increment(h), expected);
                    assert_eq!(shrinker.increment(h), expected);
                }
                9 if rng(40) == 0 => {
                    // Drop everything, lowest or highest first.
                    let mut order = live.clone();
                    if rng(2) == 0 {
                        order.reverse();
                    }
                    for h in order {
                        while mainline.decrement(h).is_ok()
                            && mainline.refs().by_handle().contains_key(&h)
                        {
                        }
                        while fast.decrement(h).is_ok() && fast.refs().by_handle().contains_key(&h)
                        {
                        }
                        while tree.decrement(h).is_ok() && tree.refs().by_handle().contains_key(&h)
                        {
                        }
                        while shrinker.decrement(h).is_ok()
                            && shrinker.refs().by_handle().contains_key(&h)
                        {
                        }
                    }
                }
                _ => {
                    let h = if live.is_empty() || rng(20) == 0 {
                        rng(nodes) as u32
                    } else {
                        live[rng(live.len() as u64) as usize]
                    };
                    let expected = mainline.decrement(h);
                    assert_eq!(fast.decrement(h), expected, "{what}");
                    assert_eq!(tree.decrement(h), expected, "{what}");
                    assert_eq!(shrinker.decrement(h), expected, "{what}");
                }
            }
            if rng(500) == 0 {
                let last = shrinker
                    .refs()
                    .by_handle()
                    .keys()
                    .last()
                    .map(|&h| h as usize);
                let target = Shrinker::policy_fixed_point(shrinker.capacity(), last);
                shrinker.reclaim();
                assert_eq!(shrinker.capacity(), target, "{what}: reclaim");
                high_water = target;
            }
            for (name, by_handle) in [
                ("fast", fast.refs().by_handle()),
                ("tree", tree.refs().by_handle()),
                ("shrinker", shrinker.refs().by_handle()),
            ] {
                assert_eq!(by_handle, mainline.refs().by_handle(), "{what}: {name}");
            }
            assert_eq!(fast.capacity(), mainline.capacity(), "{what}");
            assert_eq!(tree.capacity(), 0);
            assert!(shrinker.capacity() >= mainline.capacity(), "{what}");
            assert!(
                [high_water, high_water * 2].contains(&shrinker.capacity()),
                "{what}"
            );
            high_water = shrinker.capacity();
            mainline.refs().check_invariants().unwrap();
            fast.refs().check_invariants().unwrap();
            tree.refs().check_invariants().unwrap();
            shrinker.refs().check_invariants().unwrap();
        }
    }
}
