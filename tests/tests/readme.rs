//! README.md shows `warpforge/examples/quickstart.rs` verbatim, so that the
//! example a new user copies is the one that is compiled (CPU tier) and run
//! (GPU tier).

#[test]
fn readme_shows_the_quickstart_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example =
        std::fs::read_to_string(format!("{root}/warpforge/examples/quickstart.rs")).unwrap();
    let block = format!("```rust\n{example}```\n");
    assert!(
        readme.contains(&block),
        "README.md must contain warpforge/examples/quickstart.rs verbatim in a ```rust block; copy the file into it"
    );
}
