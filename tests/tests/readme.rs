//! README.md and warpforge/README.md (the crate's page on crates.io) show
//! `warpforge/examples/quickstart.rs` verbatim, so that the example a new
//! user copies is the one that is compiled (CPU tier) and run (GPU tier).

#[test]
fn readmes_show_the_quickstart_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let example =
        std::fs::read_to_string(format!("{root}/warpforge/examples/quickstart.rs")).unwrap();
    let block = format!("```rust\n{example}```\n");
    for readme in ["README.md", "warpforge/README.md"] {
        let text = std::fs::read_to_string(format!("{root}/{readme}")).unwrap();
        assert!(
            text.contains(&block),
            "{readme} must contain warpforge/examples/quickstart.rs verbatim in a ```rust block; copy the file into it"
        );
    }
}
