//! What was compiled, and from where: the package version and each file's
//! sha256, as a target prints them. In CI the source must be there.

mod common;

/// The source the shim was checked against (build.rs, `KNOWN`).
const PACKAGE: &str = "linux-source-7.3 7.3.4-1~bpo13+1";
const ID_POOL_SHA256: &str = "573e9b4209aaefbd2c25e52714931de9d7bb58b55c31e14feda8958759100afa";
const BITMAP_SHA256: &str = "2be16bf1ff87172b5cee1aba8e5ae7d13a7d77f68ab128a257d82e89d0a22605";

#[test]
fn provenance_is_recorded() {
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        assert!(
            kernel_idpool::available(),
            "CI needs it: {}",
            kernel_idpool::provenance()
        );
    }
    if common::skip_without_source() {
        assert!(kernel_idpool::provenance().contains("unavailable"));
        return;
    }
    let version = kernel_idpool::source_version().unwrap();
    let (id_pool, bitmap) = (
        kernel_idpool::id_pool_sha256().unwrap(),
        kernel_idpool::bitmap_sha256().unwrap(),
    );
    for sum in [id_pool, bitmap] {
        assert_eq!(sum.len(), 64);
        assert!(sum.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    if version == PACKAGE {
        assert_eq!((id_pool, bitmap), (ID_POOL_SHA256, BITMAP_SHA256));
    }
    let line = kernel_idpool::provenance();
    assert!(line.contains(version) && line.contains(id_pool) && line.contains(bitmap));
    assert_eq!(
        line.contains("CONFIG_RUST_BITMAP_HARDENED"),
        kernel_idpool::HARDENED
    );
}
