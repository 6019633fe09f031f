//! The two packages' dbitmap.h: Debian's linux-source-6.12 (the primary
//! header) and linux-source-7.3 (mainline) ship the same file today. Both
//! sha256s are pinned here and in build.rs, which refuses a package whose
//! header changed. In CI both must be there.

mod common;

use kernel_dbitmap::Header;

/// sha256 of drivers/android/dbitmap.h in linux-source-6.12
/// 6.12.118-1~deb12u1 and in linux-source-7.3 7.3.4-1~bpo13+1.
const PINNED_6_12: &str = "70082ae99bc0a5604b0e569d54cb0866ce7a90f18e7f05711915c0e05ac1c845";
const PINNED_7_3: &str = "70082ae99bc0a5604b0e569d54cb0866ce7a90f18e7f05711915c0e05ac1c845";

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

#[test]
fn both_headers_are_pinned_and_identical_today() {
    for header in Header::ALL {
        println!("{}", header.provenance());
        if in_ci() {
            assert!(header.available(), "CI needs it: {}", header.provenance());
        }
    }
    let kernel_tree = std::env::var_os("KERNEL_TREE").is_some_and(|t| !t.is_empty());
    if let (Some(stable), false) = (Header::Stable.sha256(), kernel_tree) {
        assert_eq!(stable, PINNED_6_12);
    }
    if let Some(mainline) = Header::Mainline.sha256() {
        assert_eq!(mainline, PINNED_7_3);
    }
    assert_eq!(PINNED_6_12, PINNED_7_3, "the two packages ship one file");
}

/// The historical variant is built from the primary header, and says so.
#[test]
fn the_historical_variant_names_its_patch() {
    if !Header::Historical2024.available() {
        println!("skipped: {:?}", Header::Historical2024.unavailable_reason());
        return;
    }
    let line = Header::Historical2024.provenance();
    assert!(line.contains("dbitmap-free-dangling-2024.patch"), "{line}");
    assert_eq!(Header::Historical2024.sha256(), Header::Stable.sha256());
}
