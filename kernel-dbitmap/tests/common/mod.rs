//! Shared by the tests: the skip rule and a small PRNG.
#![allow(dead_code)]

/// True (after printing "skipped: <reason>") when the kernel header is absent.
pub fn skip_without_header() -> bool {
    match kernel_dbitmap::unavailable_reason() {
        Some(reason) => {
            println!("skipped: {reason}");
            true
        }
        None => {
            println!("{}", kernel_dbitmap::provenance());
            false
        }
    }
}

/// True (after printing "skipped: <reason>") when the C shim did not build.
pub fn skip_without_shim() -> bool {
    if kernel_dbitmap::shim::available() {
        return false;
    }
    println!(
        "skipped: {}",
        kernel_dbitmap::unavailable_reason().unwrap_or("the C shim was not built")
    );
    true
}

/// splitmix64: deterministic, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
