//! What each allocator costs: one more handle with `n` live ones, for the
//! legacy linear scan, mainline's `IdPool` and `dbitmap`, and the three
//! designs (`AugmentedTree`, `FastPool`, `Shrinker`); the pool alone; the
//! teardown of a large pool with the shrink policy after every release; the
//! creation of `n` references (the shape of upstream's `BM_collectProxies`).
//!
//! Run with `cargo bench --bench acquire`. After divan's tables, an
//! unfiltered run also measures the live heap bytes per reference of every
//! design (through the bench binary's counting allocator, `stats_alloc`) and
//! times one insert at each `n` again for the plot: it writes
//! `acquire.csv`, `memory.csv` and `acquire.svg` into the directory
//! `BENCH_OUT` names (default `target/bench-results`; `ci/bench.sh` gives
//! its result page's).

use divan::{black_box, Bencher};
use idpool::{
    AugmentedTree, DBitmap, FastPool, Flavour, Gfp, HandleTable, IdPool, LinearScan, Shrinker,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::Instant;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    divan::main();
    // `--test` (cargo test --benches) and filtered runs skip the report;
    // `cargo bench --bench acquire -- report` runs the report alone.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let test = args.iter().any(|a| a == "--test");
    if !test && (filters.is_empty() || filters.iter().any(|a| *a == "report")) {
        report::run();
    }
}

const LIVE: &[u64] = &[10, 100, 1_000, 10_000, 100_000];
const PROXIES: &[u64] = &[10, 100, 1_000, 5_000, 10_000, 20_000];
const TEARDOWN: usize = 100_000;

/// A table holding handles `1..=n`.
fn table_with<F: Flavour>(n: u64) -> HandleTable<F> {
    let mut table = HandleTable::new();
    for node in 1..=n {
        table.insert_or_update_handle(node, false).unwrap();
    }
    table
}

/// One `insert_or_update_handle` of a new node with `n` live handles (it gets
/// handle `n + 1`), then the decrement that removes it again so that every
/// iteration starts from the same state.
#[divan::bench(types = [LinearScan, IdPool, DBitmap, AugmentedTree, FastPool, Shrinker], args = LIVE)]
fn new_handle<F: Flavour>(bencher: Bencher, n: u64) {
    let mut table = table_with::<F>(n);
    let node = u64::MAX;
    bencher.bench_local(|| {
        let handle = table
            .insert_or_update_handle(black_box(node), false)
            .unwrap();
        debug_assert_eq!(handle as u64, n + 1);
        table.decrement(handle).unwrap()
    });
}

/// Creating `n` references in a new process, then dropping the table: the
/// shape of upstream's `BM_collectProxies`.
#[divan::bench(types = [AugmentedTree, DBitmap, IdPool, FastPool], args = PROXIES, sample_count = 30)]
fn collect_proxies<F: Flavour>(bencher: Bencher, n: u64) {
    bencher.bench_local(|| table_with::<F>(black_box(n)));
}

/// The pool alone: find and acquire the smallest free id with ids `1..=n`
/// taken, then release it.
#[divan::bench(args = LIVE)]
fn idpool_find_acquire_release(bencher: Bencher, n: u64) {
    let mut pool =
        IdPool::with_capacity((n as usize + 1).next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 1..=n {
        pool.find_unused_id(1).unwrap().acquire();
    }
    bencher.bench_local(|| {
        let id = pool.find_unused_id(black_box(1)).unwrap().acquire();
        pool.release_id(id);
        id
    });
}

/// The same for the fast pool.
#[divan::bench(args = LIVE)]
fn fast_pool_find_acquire_release(bencher: Bencher, n: u64) {
    let mut pool =
        FastPool::with_capacity((n as usize + 1).next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 1..=n {
        pool.find_unused_id(1).unwrap().acquire();
    }
    bencher.bench_local(|| {
        let id = pool.find_unused_id(black_box(1)).unwrap().acquire();
        pool.release_id(id);
        id
    });
}

fn full_idpool() -> IdPool {
    let mut pool = IdPool::with_capacity(TEARDOWN.next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 0..TEARDOWN {
        pool.find_unused_id(0).unwrap().acquire();
    }
    pool
}

fn full_fast_pool() -> FastPool {
    let mut pool = FastPool::with_capacity(TEARDOWN.next_power_of_two(), Gfp::Kernel).unwrap();
    for _ in 0..TEARDOWN {
        pool.find_unused_id(0).unwrap().acquire();
    }
    pool
}

fn full_dbitmap() -> DBitmap {
    let mut dmap = DBitmap::init(Gfp::Kernel);
    while dmap.nbits() < TEARDOWN {
        let nbits = dmap.grow_nbits();
        dmap.grow(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
    }
    for _ in 0..TEARDOWN {
        dmap.acquire_next_zero_bit(0).unwrap();
    }
    dmap
}

fn full_tree() -> AugmentedTree {
    let mut tree = AugmentedTree::new();
    for id in 0..TEARDOWN as u32 {
        tree.insert(id);
    }
    tree
}

fn order(lifo: bool) -> Box<dyn Iterator<Item = usize>> {
    if lifo {
        Box::new((0..TEARDOWN).rev())
    } else {
        Box::new(0..TEARDOWN)
    }
}

/// Releases every id in `order`, each followed by `shrink_request` and, when
/// it says so, the shrink (as Binder does on every last reference drop).
fn teardown<P>(
    bencher: Bencher,
    order_name: &str,
    full: fn() -> P,
    release_and_shrink: fn(&mut P, usize),
) {
    let lifo = order_name == "lifo";
    bencher.with_inputs(full).bench_local_values(|mut pool| {
        for id in order(lifo) {
            release_and_shrink(&mut pool, id);
        }
        pool
    });
}

/// Release 100k ids one by one, each followed by `shrink_request` and, when
/// it says so, the shrink.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn idpool_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_idpool, |pool, id| {
        pool.release_id(id);
        if let Some(request) = pool.shrink_request() {
            pool.shrink(request.realloc(Gfp::Kernel).unwrap());
        }
    });
}

/// The same teardown for the C flavour.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn dbitmap_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_dbitmap, |dmap, id| {
        dmap.clear_bit(id);
        let nbits = dmap.shrink_nbits();
        if nbits != 0 {
            dmap.shrink(DBitmap::zalloc(nbits, Gfp::Kernel), nbits);
        }
    });
}

/// The baseline for the two above: the releases alone, never asking to
/// shrink. This is also the shrinker's teardown (it never asks).
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn idpool_teardown_without_shrink(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_idpool, |pool, id| {
        pool.release_id(id)
    });
}

/// The fast pool's teardown, with the shrink policy after every release.
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn fast_pool_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_fast_pool, |pool, id| {
        pool.release_id(id);
        if let Some(request) = pool.shrink_request() {
            pool.shrink(request.realloc(Gfp::Kernel).unwrap());
        }
    });
}

/// The augmented tree's teardown: removals (it has no shrink policy; its
/// arena is rebuilt when a quarter of it is in use).
#[divan::bench(args = ["fifo", "lifo"], sample_count = 20)]
fn tree_teardown(bencher: Bencher, order_name: &str) {
    teardown(bencher, order_name, full_tree, |tree, id| {
        tree.remove(id as u32);
    });
}

/// The kernel's own code beside ours: find, acquire and release one id
/// (`find_unused_id(0)` then `release_id`, or `dbitmap_acquire_next_zero_bit(0)`
/// then `dbitmap_clear_bit`) in a pool whose ids `0..n` are all taken but
/// one, at the start (0), the middle (`n / 2`) or the end (`n - 1`). The
/// pool is filled once per case, outside the timed closure, which leaves it
/// as it found it. The `IdPool`s hold exactly `n` ids; the dbitmaps grow
/// from 64 bits by doubling, so at 100,000 ids theirs holds 131,072 bits,
/// the 31,072 above `n` free (the search stops at the free id before them).
///
/// Run alone with `cargo bench --bench acquire -- side_by_side`. Without
/// the kernel source (`ci/kernel-source.sh`) the kernel's two entries print
/// `skipped: <reason>` and the rest still run.
mod side_by_side {
    use super::*;
    use kernel_dbitmap::KernelDBitmap;
    use kernel_idpool::KernelIdPool;
    use std::fmt;
    use std::sync::Once;

    /// Where the one free id is.
    #[derive(Clone, Copy, Debug)]
    enum Position {
        Start,
        Middle,
        End,
    }

    /// `n` ids, all taken but the one at `position`.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        n: usize,
        position: Position,
    }

    impl Case {
        const fn new(n: usize, position: Position) -> Self {
            Case { n, position }
        }

        /// The free id.
        fn free(self) -> usize {
            match self.position {
                Position::Start => 0,
                Position::Middle => self.n / 2,
                Position::End => self.n - 1,
            }
        }
    }

    impl fmt::Display for Case {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let position = match self.position {
                Position::Start => "start",
                Position::Middle => "middle",
                Position::End => "end",
            };
            // Zero-padded so that divan's (lexical) order is by size.
            write!(f, "{:07}_{position}", self.n)
        }
    }

    use Position::{End, Middle, Start};
    const CASES: &[Case] = &[
        Case::new(64, Start),
        Case::new(64, Middle),
        Case::new(64, End),
        Case::new(1_024, Start),
        Case::new(1_024, Middle),
        Case::new(1_024, End),
        Case::new(100_000, Start),
        Case::new(100_000, Middle),
        Case::new(100_000, End),
        Case::new(1_048_576, Start),
        Case::new(1_048_576, Middle),
        Case::new(1_048_576, End),
    ];

    /// Says once, on stderr, why a kernel entry is not timed.
    fn skipped(once: &Once, what: &str, reason: Option<&str>) {
        once.call_once(|| {
            eprintln!(
                "skipped: side_by_side::{what}: {}",
                reason.unwrap_or("unavailable")
            );
        });
    }

    /// Times `find_acquire_release` on a pool built by `full`, checking once
    /// (untimed) that it answers the free id.
    fn run<P>(
        bencher: Bencher,
        case: Case,
        full: impl FnOnce(Case) -> P,
        find_acquire_release: impl Fn(&mut P) -> usize,
    ) {
        let mut pool = full(case);
        assert_eq!(find_acquire_release(&mut pool), case.free(), "{case}");
        bencher.bench_local(|| find_acquire_release(black_box(&mut pool)));
    }

    /// Times an `IdPool`-shaped pool (`with_capacity`, `find_unused_id`,
    /// `acquire`, `release_id`) holding exactly `case.n` ids.
    macro_rules! id_pool {
        ($bencher:expr, $case:expr, $pool:ty) => {
            run(
                $bencher,
                $case,
                |case| {
                    let mut pool = <$pool>::with_capacity(case.n, Gfp::Kernel).unwrap();
                    assert_eq!(pool.capacity(), case.n);
                    for id in (0..case.n).filter(|&id| id != case.free()) {
                        assert_eq!(pool.find_unused_id(id).unwrap().acquire(), id);
                    }
                    pool
                },
                |pool| {
                    let id = pool.find_unused_id(black_box(0)).unwrap().acquire();
                    pool.release_id(id);
                    id
                },
            )
        };
    }

    /// Times a `dbitmap.h`-shaped map, grown by doubling from 64 bits until
    /// it holds `case.n` ids (the ids above `n` stay free).
    macro_rules! dbitmap {
        ($bencher:expr, $case:expr, $map:ty) => {
            run(
                $bencher,
                $case,
                |case| {
                    let mut dmap = <$map>::init(Gfp::Kernel);
                    while dmap.nbits() < case.n {
                        let nbits = dmap.grow_nbits();
                        dmap.grow(<$map>::zalloc(nbits, Gfp::Kernel), nbits);
                    }
                    for id in (0..case.n).filter(|&id| id != case.free()) {
                        assert_eq!(dmap.acquire_next_zero_bit(id), Ok(id));
                    }
                    dmap
                },
                |dmap| {
                    let id = dmap.acquire_next_zero_bit(black_box(0)).unwrap();
                    dmap.clear_bit(id);
                    id
                },
            )
        };
    }

    /// Mainline's `rust/kernel/id_pool.rs`, compiled by `kernel-idpool`.
    #[divan::bench(args = CASES)]
    fn kernel_idpool(bencher: Bencher, case: &Case) {
        static ONCE: Once = Once::new();
        if !kernel_idpool::available() {
            return skipped(&ONCE, "kernel_idpool", kernel_idpool::unavailable_reason());
        }
        id_pool!(bencher, *case, KernelIdPool);
    }

    /// The kernel's `drivers/android/dbitmap.h`, compiled by `kernel-dbitmap`.
    #[divan::bench(args = CASES)]
    fn kernel_dbitmap(bencher: Bencher, case: &Case) {
        static ONCE: Once = Once::new();
        if !kernel_dbitmap::available() {
            return skipped(
                &ONCE,
                "kernel_dbitmap",
                kernel_dbitmap::unavailable_reason(),
            );
        }
        dbitmap!(bencher, *case, KernelDBitmap);
    }

    /// Our reproduction of mainline's `IdPool`.
    #[divan::bench(args = CASES)]
    fn idpool(bencher: Bencher, case: &Case) {
        id_pool!(bencher, *case, IdPool);
    }

    /// Our reproduction of `dbitmap.h`.
    #[divan::bench(args = CASES)]
    fn dbitmap(bencher: Bencher, case: &Case) {
        dbitmap!(bencher, *case, DBitmap);
    }

    /// Our fast pool.
    #[divan::bench(args = CASES)]
    fn fast_pool(bencher: Bencher, case: &Case) {
        id_pool!(bencher, *case, FastPool);
    }
}

/// The live-memory and cost-against-n report, with the CSV files and the plot.
mod report {
    use super::*;
    use plotters::prelude::*;
    use std::fmt::Write as _;
    use std::path::PathBuf;

    const DESIGNS: [&str; 6] = [
        "LinearScan",
        "IdPool",
        "DBitmap",
        "AugmentedTree",
        "FastPool",
        "Shrinker",
    ];
    const MEMORY_N: &[u64] = &[10, 100, 1_000, 10_000, 100_000];

    /// Live heap bytes of a table with handles `1..=n`, the table's maps included.
    fn live_bytes<F: Flavour>(n: u64) -> i64 {
        let region = Region::new(GLOBAL);
        let table = table_with::<F>(n);
        let stats = region.change();
        drop(black_box(table));
        // `stats_alloc` adds a realloc's growth to `bytes_allocated` (and its
        // shrinkage to `bytes_deallocated`); `bytes_reallocated` repeats it.
        stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
    }

    /// Median nanoseconds of one insert-and-decrement with `n` live handles.
    fn insert_ns<F: Flavour>(n: u64) -> f64 {
        let mut table = table_with::<F>(n);
        let once = |table: &mut HandleTable<F>| {
            let handle = table
                .insert_or_update_handle(black_box(u64::MAX), false)
                .unwrap();
            table.decrement(handle).unwrap();
        };
        // Iterations per sample: about 200 µs each.
        let start = Instant::now();
        once(&mut table);
        let one = start.elapsed().as_nanos().max(1) as u64;
        let iters = (200_000 / one).clamp(1, 100_000);
        let mut samples: Vec<f64> = (0..21)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..iters {
                    once(&mut table);
                }
                start.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }

    fn per_design<T>(design: &str, f: &dyn Fn(&dyn Measure) -> T) -> T {
        match design {
            "LinearScan" => f(&For::<LinearScan>::default()),
            "IdPool" => f(&For::<IdPool>::default()),
            "DBitmap" => f(&For::<DBitmap>::default()),
            "AugmentedTree" => f(&For::<AugmentedTree>::default()),
            "FastPool" => f(&For::<FastPool>::default()),
            _ => f(&For::<Shrinker>::default()),
        }
    }

    trait Measure {
        fn live_bytes(&self, n: u64) -> i64;
        fn insert_ns(&self, n: u64) -> f64;
    }

    struct For<F>(core::marker::PhantomData<F>);

    impl<F> Default for For<F> {
        fn default() -> Self {
            For(core::marker::PhantomData)
        }
    }

    impl<F: Flavour> Measure for For<F> {
        fn live_bytes(&self, n: u64) -> i64 {
            live_bytes::<F>(n)
        }
        fn insert_ns(&self, n: u64) -> f64 {
            insert_ns::<F>(n)
        }
    }

    pub fn run() {
        let dir = std::env::var_os("BENCH_OUT").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-results"),
            PathBuf::from,
        );
        std::fs::create_dir_all(&dir).expect("the results directory");

        let mut memory =
            String::from("design,n,live_bytes,bytes_per_ref,allocator_bytes_per_ref\n");
        println!("\nlive heap bytes per reference (table with handles 1..=n; the allocator's share is the excess over LinearScan, which keeps no index):");
        let base: Vec<i64> = MEMORY_N
            .iter()
            .map(|&n| live_bytes::<LinearScan>(n))
            .collect();
        for design in DESIGNS {
            let mut line = format!("{design:>14}");
            for (i, &n) in MEMORY_N.iter().enumerate() {
                let bytes = per_design(design, &|m| m.live_bytes(n));
                let per = bytes as f64 / n as f64;
                let own = (bytes - base[i]) as f64 / n as f64;
                writeln!(memory, "{design},{n},{bytes},{per:.2},{own:.2}").unwrap();
                write!(line, "  n={n}: {per:.1} B ({own:+.2} B)").unwrap();
            }
            println!("{line}");
        }
        std::fs::write(dir.join("memory.csv"), memory).expect("memory.csv");

        let mut csv = String::from("design,n,insert_ns\n");
        let mut series = Vec::new();
        println!("\ninsert + decrement with n live handles, median of 21 samples (ns):");
        for design in DESIGNS {
            let points: Vec<(u64, f64)> = LIVE
                .iter()
                .map(|&n| (n, per_design(design, &|m| m.insert_ns(n))))
                .collect();
            for &(n, ns) in &points {
                writeln!(csv, "{design},{n},{ns:.1}").unwrap();
            }
            println!("{design:>14} {points:?}");
            series.push((design, points));
        }
        std::fs::write(dir.join("acquire.csv"), csv).expect("acquire.csv");
        plot(&series, &dir.join("acquire.svg")).expect("acquire.svg");
        println!(
            "\nwrote memory.csv, acquire.csv, acquire.svg in {}",
            dir.display()
        );
    }

    fn plot(series: &[(&str, Vec<(u64, f64)>)], out: &std::path::Path) -> Result<(), String> {
        let max_ns = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.1))
            .fold(1.0, f64::max);
        let root = SVGBackend::new(out, (900, 540)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<std::io::Error>| format!("{}: {e}", out.display());
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "one new handle (insert + decrement) with n live handles",
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (5f64..200_000f64).log_scale(),
                (50f64..max_ns * 2.0).log_scale(),
            )
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("live handles n")
            .y_desc("ns per insert")
            .draw()
            .map_err(e)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|&(n, ns)| (n as f64, ns)),
                    color.stroke_width(2),
                ))
                .map_err(e)?
                .label(name.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)
    }
}
