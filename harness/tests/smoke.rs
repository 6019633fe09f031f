//! Seeded-random smoke test: no fuzzer needed. Each target runs on many
//! pseudo-random inputs, must not fail, and must reach the paths that make
//! the campaign worth running.

use idpool_harness::{registry, seeds, targets, Events, Target};

/// Target `name`, from the list.
fn target(name: &str) -> &'static dyn Target {
    targets::target(name).unwrap_or_else(|| panic!("no target {name}"))
}

/// Runs target `name` on `inputs` seeded inputs, as a fuzz target does
/// (panicking at a failure); the paths they took, together.
fn run_many(inputs: u64, name: &str) -> Events {
    let target = target(name);
    let mut total = Events::default();
    for seed in 0..inputs {
        total.merge(registry::fuzz(target, &seeds::input(seed)));
    }
    total
}

/// The paths of an `IdPool` run of the pool operations that `pool_ops`
/// and `kernel_idpool` both must reach: grows committed and stale, shrinks
/// committed, refused and raised, failed allocations, a full pool, the
/// ceiling and a deep pool.
fn assert_idpool_paths(e: &Events) {
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.stale_grow_ignored > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.shrink_refused > 0, "{e:?}");
    assert!(e.shrink_raised_capacity > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.grow_at_ceiling > 0, "{e:?}");
    assert!(e.deep > 0, "{e:?}");
}

#[test]
fn pool_ops_reaches_the_interesting_paths() {
    let e = run_many(3000, "pool_ops");
    assert_idpool_paths(&e);
    // FastPool, driven beside IdPool, compared at 4096 ids or more.
    assert!(e.design_deep > 0, "{e:?}");
    // with_capacity with failing flags: refused above one word.
    assert!(e.reset_refused > 0, "{e:?}");
}

#[test]
fn dbitmap_ops_reaches_the_interesting_paths() {
    let e = run_many(3000, "dbitmap_ops");
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.stale_grow_ignored > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.shrink_refused > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.disabled > 0, "{e:?}");
    assert!(e.deep > 0, "{e:?}");
    // dbitmap_init's allocation failed: disabled from the start.
    assert!(e.disabled_at_init > 0, "{e:?}");
    // The grow size asked at 2^31 bits, where the 32-bit shift wraps.
    assert!(e.grow_target_wrapped > 0, "{e:?}");
}

#[test]
fn handle_table_reaches_the_interesting_paths() {
    let e = run_many(3000, "handle_table");
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.disabled > 0, "{e:?}");
    assert!(e.scan_fallback > 0, "{e:?}");
    assert!(e.dead_refused > 0, "{e:?}");
    // The designs: a reclaim that gave ids back, the augmented tree above
    // one word's worth of handles.
    assert!(e.reclaimed > 0, "{e:?}");
    assert!(e.tree_wide > 0, "{e:?}");
    // A table built from given handles, one above 65,535 (`start-from`).
    assert!(e.started_above_16_bits > 0, "{e:?}");
}

#[test]
fn concurrent_resize_interleaves_resizes() {
    let concurrent = target("concurrent_resize");
    let mut e = run_many(3000, "concurrent_resize");
    for data in concurrent.crafted() {
        e.merge(registry::fuzz(concurrent, &data));
    }
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.interleaved > 0, "{e:?}");
    assert!(e.reclaimed > 0, "{e:?}");
    // The context manager's insert found the map full, and while its lock
    // was dropped handle 0 changed hands or another manager node came in.
    assert!(e.manager_grow_zero_moved > 0, "{e:?}");
    assert!(e.manager_grow_other_manager > 0, "{e:?}");
    // The process dies: Rust refuses new references, C takes them, and an
    // insert that had dropped the lock finishes after the death.
    assert!(e.dead_refused > 0, "{e:?}");
    assert!(e.dead_inserted > 0, "{e:?}");
    assert!(e.killed_in_window > 0, "{e:?}");
    assert!(e.lookups > 0, "{e:?}");
    // The pool is corrupted behind the table's back, and each version's
    // reaction to the mismatch a pick then meets is seen, as its model
    // expects it: Rust mainline warns and returns EINVAL, Rust's first
    // posting logs and searches on, C hits BUG().
    assert!(e.corrupted > 0, "{e:?}");
    assert!(e.mismatch_einval > 0, "{e:?}");
    assert!(e.mismatch_search_on > 0, "{e:?}");
    assert!(e.mismatch_crash > 0, "{e:?}");
}

/// Each hand-written concurrent seed reaches its interleaving, on the
/// Rust pool and on the C one.
#[test]
fn crafted_concurrent_seeds_reach_their_interleavings() {
    let concurrent = target("concurrent_resize");
    let crafted = concurrent.crafted();
    assert_eq!(crafted.len(), 4);
    for (i, data) in crafted.iter().enumerate() {
        let e = registry::fuzz(concurrent, data);
        match i % 2 {
            0 => assert!(e.manager_grow_zero_moved > 0, "seed {i}: {e:?}"),
            _ => assert!(e.manager_grow_other_manager > 0, "seed {i}: {e:?}"),
        }
    }
}

/// Every pool of the concurrent target runs in the seeded inputs.
#[test]
fn concurrent_resize_runs_every_pool() {
    use idpool_harness::targets::concurrent_resize::{decode, Pool};
    let mut seen = Vec::new();
    for seed in 0..300 {
        if let Some((program, _)) = decode(&seeds::input(seed)) {
            if !seen.contains(&program.pool) {
                seen.push(program.pool);
            }
        }
    }
    for pool in [
        Pool::IdPool,
        Pool::DBitmap,
        Pool::FastPool,
        Pool::AugmentedTree,
        Pool::Shrinker,
    ] {
        assert!(seen.contains(&pool), "{pool:?} never drawn: {seen:?}");
    }
}

/// Adding a target is what docs/adding-a-target.md says: every target in the list has
/// its glue for each engine `Target::engines` names and no other, each glue
/// file is the same few lines calling `idpool_harness::fuzz` with the
/// target's name and nothing else (`Engine::glue`; libFuzzer's also has
/// the random-tail mutator's three lines), libFuzzer's manifest
/// has its `[[bin]]`, and it has its dictionary and (when it has a corpus)
/// its corpus.
#[test]
fn every_target_has_its_glue_files() {
    use idpool_harness::registry::Engine;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let manifest = read("fuzz/Cargo.toml");
    for target in idpool_harness::TARGETS {
        let name = target.name();
        for engine in Engine::ALL {
            let glue = root.join(engine.glue_dir()).join(format!("{name}.rs"));
            let wanted = target.engines().contains(&engine);
            assert_eq!(
                glue.is_file(),
                wanted,
                "{}: {engine:?} glue",
                glue.display()
            );
            if wanted {
                assert_eq!(
                    std::fs::read_to_string(&glue).unwrap(),
                    engine.glue(*target),
                    "{}: the glue is `Engine::glue`'s, nothing else",
                    glue.display()
                );
            }
        }
        let bin = format!("name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\"");
        assert!(
            manifest.contains(&bin),
            "fuzz/Cargo.toml lacks [[bin]] {name}"
        );
        let dict = root.join(format!("fuzz/dict/{name}.dict"));
        assert!(dict.is_file(), "{} is missing", dict.display());
        if let Some(text) = target.dictionary() {
            assert_eq!(
                std::fs::read_to_string(&dict).unwrap(),
                text,
                "{} is stale: cargo run -p idpool-harness --bin fuzz-dict -- fuzz/dict",
                dict.display()
            );
        }
        let corpus = root.join("corpus").join(name);
        assert_eq!(corpus.is_dir(), target.has_corpus(), "{}", corpus.display());
    }
    // No glue file for a target the list does not have.
    for engine in Engine::ALL {
        for entry in std::fs::read_dir(root.join(engine.glue_dir())).unwrap() {
            let path = entry.unwrap().path();
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            assert!(
                targets::target(stem).is_some(),
                "{}: glue for no target of the list",
                path.display()
            );
        }
    }
}

/// The engines' one entry runs the registry's target by name, and a name
/// the list does not have is refused with the names it has.
#[test]
fn the_engines_entry_runs_the_target_it_names() {
    for seed in 0..50 {
        idpool_harness::fuzz("pool_ops", &seeds::input(seed));
    }
    let refused = std::panic::catch_unwind(|| idpool_harness::fuzz("no_such_target", &[1, 2]));
    let payload = refused.expect_err("an unknown target");
    let message = payload.downcast_ref::<String>().expect("a message");
    assert!(
        message.contains("no target \"no_such_target\"") && message.contains("pool_ops"),
        "{message}"
    );
}

/// No script keeps a list of targets of its own: they ask the `targets`
/// binary.
#[test]
fn scripts_read_the_target_list_from_the_registry() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for script in [
        "ci/fuzz-smoke.sh",
        "ci/campaign.sh",
        "ci/oss-fuzz-check.sh",
        "ci/mutants/run.sh",
        "ci/history.sh",
        ".clusterfuzzlite/build.sh",
    ] {
        let text = std::fs::read_to_string(root.join(script)).unwrap();
        for target in idpool_harness::TARGETS {
            let name = target.name();
            let quoted = [format!(" {name} "), format!("{name},"), format!("{name}|")];
            assert!(
                !quoted.iter().any(|q| text.contains(q.as_str())),
                "{script} lists {name} itself: read the list from the `targets` binary"
            );
        }
    }
}

/// The campaign replays the new corpus entries on the real drivers for the
/// targets the registry marks, and only for those whose inputs `triage
/// real-kernel` reads: the command-level programs.
#[test]
fn the_campaign_replays_on_the_real_kernels_the_targets_the_registry_marks() {
    use idpool_harness::targets::binder_commands::BINDER_COMMANDS;
    let marked: Vec<&str> = idpool_harness::TARGETS
        .iter()
        .filter(|t| t.real_kernel())
        .map(|t| t.name())
        .collect();
    assert_eq!(marked, [BINDER_COMMANDS.name()]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("ci/campaign.sh")).unwrap();
    assert!(
        text.contains("target_field \"$t\" real_kernel"),
        "ci/campaign.sh asks the registry which targets run on the real kernels"
    );
}

/// libFuzzer's run flags are written once, in ci/lib.sh: every script that
/// starts libFuzzer itself passes LIBFUZZER_FLAGS (or, to vary the schedule
/// for a comparison, LIBFUZZER_SCHEDULE) and spells none of them out.
#[test]
fn scripts_take_libfuzzers_flags_from_lib_sh() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = std::fs::read_to_string(root.join("ci/lib.sh")).unwrap();
    assert!(
        lib.contains("LIBFUZZER_FLAGS=("),
        "ci/lib.sh defines LIBFUZZER_FLAGS"
    );
    assert!(
        lib.contains("\"${LIBFUZZER_FLAGS[@]}\""),
        "run_libfuzzer passes them"
    );
    // The libFuzzer example of docs/campaign.md spells the default schedule
    // out: it must be the one ci/lib.sh gives.
    let schedule = lib
        .split_once("<<<\"${LIBFUZZER_SCHEDULE-")
        .and_then(|(_, rest)| rest.split_once("}\""))
        .map(|(flags, _)| flags)
        .expect("ci/lib.sh sets LIBFUZZER_SCHEDULE's default");
    let guide = std::fs::read_to_string(root.join("docs/campaign.md")).unwrap();
    assert!(
        guide.contains(&format!("-dict=dict/pool_ops.dict {schedule}\n")),
        "docs/campaign.md's libFuzzer example does not run ci/lib.sh's schedule '{schedule}'"
    );
    for script in [
        "ci/throughput.sh",
        "ci/state-feedback.sh",
        ".clusterfuzzlite/build.sh",
        "ci/oss-fuzz-check.sh",
    ] {
        let text = std::fs::read_to_string(root.join(script)).unwrap();
        assert!(
            text.contains("LIBFUZZER_FLAGS[@]") || text.contains("LIBFUZZER_SCHEDULE[@]"),
            "{script} starts libFuzzer without ci/lib.sh's flags"
        );
        assert!(
            !text.contains("entropic_scale_per_exec_time"),
            "{script} spells out a schedule flag: take it from ci/lib.sh"
        );
    }
}

/// An optional target says what it needs; a missing need is one line.
#[test]
fn a_missing_need_is_one_line() {
    use idpool_harness::registry::Need;
    let need = Need::Dir {
        var: "IDPOOL_TEST_SURELY_UNSET_DIR",
        what: "the kernel's source",
    };
    let reason = need.missing().expect("the variable is not set");
    assert_eq!(
        reason,
        "needs the kernel's source: set IDPOOL_TEST_SURELY_UNSET_DIR"
    );
    let here = Need::Dir {
        var: "CARGO_MANIFEST_DIR",
        what: "this crate",
    };
    assert_eq!(here.missing(), None);
}

#[test]
fn kernel_dbitmap_reaches_the_interesting_paths() {
    let kernel = target("kernel_dbitmap");
    if let Some(reason) = kernel.unavailable() {
        println!("skipped kernel_dbitmap: {reason}");
        return;
    }
    println!("{}", kernel.provenance().expect("the header's provenance"));
    // Counted with the known finding a release meets kept apart: a run
    // whose map a failed grow disabled ends at the historical header's
    // double free, which a fuzz target passes quietly.
    use idpool_harness::history::Finding;
    use idpool_harness::targets::kernel_dbitmap;
    let mut e = Events::default();
    let mut double_frees = 0;
    for seed in 0..1000 {
        let ops = registry::decode(&seeds::input(seed));
        match kernel_dbitmap::run_counting(&ops) {
            Ok((events, known)) => {
                if let Some(f) = known {
                    assert_eq!(Finding::of(&f), Some(Finding::DoubleFree), "{}", f.message);
                    double_frees += 1;
                }
                e.merge(events);
            }
            Err(f) => panic!("seed {seed}: {}", f.message),
        }
    }
    assert!(double_frees > 0, "the historical header never freed twice");
    assert!(e.grow_committed > 0, "{e:?}");
    assert!(e.stale_grow_ignored > 0, "{e:?}");
    assert!(e.shrink_committed > 0, "{e:?}");
    assert!(e.shrink_refused > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.pool_full > 0, "{e:?}");
    assert!(e.disabled > 0, "{e:?}");
    assert!(e.disabled_at_init > 0, "{e:?}");
    assert!(e.grow_target_wrapped > 0, "{e:?}");
}

#[test]
fn kernel_idpool_reaches_the_interesting_paths() {
    let kernel = target("kernel_idpool");
    if let Some(reason) = kernel.unavailable() {
        println!("skipped kernel_idpool: {reason}");
        return;
    }
    println!("{}", kernel.provenance().expect("the sources' provenance"));
    let e = run_many(1000, "kernel_idpool");
    assert_idpool_paths(&e);
    assert!(e.reset_refused > 0, "{e:?}");
    // Releases and searches past the capacity, answered alike and each
    // release logged by mainline.
    assert!(e.out_of_range > 0, "{e:?}");
}

#[test]
fn binder_commands_reaches_the_interesting_paths() {
    use idpool_harness::targets::binder_commands::{run_counting, CmdProgram};
    let mut e = Events::default();
    for seed in 0..3000 {
        let program = CmdProgram::decode(&seeds::input(seed));
        match run_counting(&program) {
            Ok((events, known)) => {
                if let Some(f) = known {
                    assert!(
                        idpool_harness::history::Finding::of(&f).is_some(),
                        "{}",
                        f.message
                    );
                }
                e.merge(events);
            }
            Err(f) if idpool_harness::history::Finding::of(&f).is_some() => {}
            Err(f) => panic!("seed {seed}: {}\nthe program:\n{program}", f.message),
        }
    }
    assert!(e.manager_registered > 0, "{e:?}");
    assert!(e.manager_replaced > 0, "{e:?}");
    assert!(e.objects_translated > 0, "{e:?}");
    assert!(e.handle_zero_received > 0, "{e:?}");
    assert!(e.death_delivered > 0, "{e:?}");
    assert!(e.node_info_answered > 0, "{e:?}");
    assert!(e.refs_past_one_word > 0, "{e:?}");
    assert!(e.alloc_failed > 0, "{e:?}");
    assert!(e.interleaved > 0, "{e:?}");
    assert!(e.drivers_differ > 0, "{e:?}");
}
