//! A fuzz target's failure, written as JSON where `IDPOOL_FAILURE_JSON`
//! says before it panics: what `ci/mutants/run.sh` reads of a crash.

use idpool_harness::targets::parse_trace;

#[test]
fn a_raised_failure_is_written_as_json_first() {
    let path = std::env::temp_dir().join(format!("failure-json-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    std::env::set_var("IDPOOL_FAILURE_JSON", &path);
    // June 2024's collision, asked for: the fuzz target's verdict panics.
    std::env::set_var("IDPOOL_HISTORY", "collision");
    let trace = parse_trace(
        "idpool-trace v1\ntarget handle_table\nversion c-2024-06\ninsert n1 manager\ninsert n6 manager\n",
    )
    .unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| trace.replay()));
    assert!(panicked.is_err(), "the collision is reported");
    let json = std::fs::read_to_string(&path).expect("written before the panic");
    for field in [
        "\"signature\":\"handle_table/dbitmap c-2024-06: kernel crash/Insert/inline\"",
        "\"check\":\"kernel crash\"",
        "\"panic\":false",
        "\"step\":1",
    ] {
        assert!(json.contains(field), "{json} lacks {field}");
    }
    // The first failure stays: a second one does not overwrite it.
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| trace.replay()));
    assert!(again.is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), json);
    let _ = std::fs::remove_file(&path);
}
