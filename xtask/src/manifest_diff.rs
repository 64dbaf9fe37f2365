//! `cargo xtask manifest-diff [REV]`: what `generated/manifest.json` in the
//! working tree changes against the one committed at `REV` (default `HEAD`),
//! variant by variant: variants added or removed, resources changed (registers,
//! shared memory, stack, spills), and how many variants changed only their
//! PTX text. It fails when a variant spills or takes more than 2% more
//! registers than at `REV`: the bar a rewrite of the stock kernels must clear.
//! A kernel whose const parameters changed renames its variants; those are
//! matched by the parameters both sides have, so that the bar holds for them
//! too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Deserialize)]
struct Manifest {
    variants: Vec<Entry>,
}

#[derive(Clone, Deserialize, PartialEq)]
struct Entry {
    variant: String,
    arch: String,
    registers: u32,
    shared_bytes: u32,
    stack_frame_bytes: u32,
    spill_store_bytes: u32,
    spill_load_bytes: u32,
    ptx_sha256: String,
}

impl Entry {
    /// The resources, in the order they are printed.
    fn resources(&self) -> [(&'static str, u32); 5] {
        [
            ("registers", self.registers),
            ("shared bytes", self.shared_bytes),
            ("stack bytes", self.stack_frame_bytes),
            ("spill stores", self.spill_store_bytes),
            ("spill loads", self.spill_load_bytes),
        ]
    }
}

/// What changed between two manifests.
#[derive(Debug, Default, PartialEq)]
struct Diff {
    added: Vec<String>,
    removed: Vec<String>,
    /// Variants matched across a rename ([`renamed_pairs`]).
    renamed: usize,
    /// `variant (arch): what, old -> new`.
    changed: Vec<String>,
    /// Variants whose registers grew past 2% or that spill.
    failures: Vec<String>,
    ptx_only: usize,
    same: usize,
}

/// Runs the command: prints the diff and fails on a regression.
pub fn run(repo: &Path, rev: &str) -> Result<()> {
    let committed = Command::new("git")
        .current_dir(repo)
        .args(["show", &format!("{rev}:generated/manifest.json")])
        .output()
        .context("running git show")?;
    if !committed.status.success() {
        bail!(
            "git cannot show generated/manifest.json at `{rev}`: {}name a commit that has it",
            String::from_utf8_lossy(&committed.stderr)
        );
    }
    let old: Manifest = serde_json::from_slice(&committed.stdout)
        .with_context(|| format!("reading generated/manifest.json at {rev}"))?;
    let path = repo.join("generated/manifest.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let new: Manifest = serde_json::from_str(&text).context("reading generated/manifest.json")?;
    let diff = compare(&old.variants, &new.variants);
    for line in diff.added.iter().map(|v| format!("added: {v}")) {
        println!("{line}");
    }
    for line in diff.removed.iter().map(|v| format!("removed: {v}")) {
        println!("{line}");
    }
    for line in &diff.changed {
        println!("changed: {line}");
    }
    println!(
        "manifest-diff against {rev}: {} variants the same, {} with only their PTX text changed, {} with resources changed, {} matched across a rename (a kernel's const parameters changed), {} added, {} removed",
        diff.same,
        diff.ptx_only,
        diff.changed.len(),
        diff.renamed,
        diff.added.len(),
        diff.removed.len()
    );
    if !diff.failures.is_empty() {
        bail!(
            "{} variant(s) spill or take more than 2% more registers than at {rev}:\n  {}",
            diff.failures.len(),
            diff.failures.join("\n  ")
        );
    }
    Ok(())
}

fn compare(old: &[Entry], new: &[Entry]) -> Diff {
    let key = |e: &Entry| format!("{} ({})", e.variant, e.arch);
    let old_by_key: BTreeMap<String, &Entry> = old.iter().map(|e| (key(e), e)).collect();
    let new_by_key: BTreeMap<String, &Entry> = new.iter().map(|e| (key(e), e)).collect();
    let mut pairs: Vec<(String, &Entry, &Entry)> = Vec::new();
    let mut diff = Diff::default();
    for (k, n) in &new_by_key {
        if n.spill_store_bytes + n.spill_load_bytes > 0 {
            diff.failures.push(format!("{k}: spills"));
        }
        match old_by_key.get(k) {
            Some(o) => pairs.push((k.clone(), o, n)),
            None => diff.added.push(k.clone()),
        }
    }
    diff.removed = old_by_key
        .keys()
        .filter(|k| !new_by_key.contains_key(*k))
        .cloned()
        .collect();
    // A kernel that gained (or lost) a const parameter renames every
    // variant: pair those by the parameters both sides have, where that
    // leaves one old and one new variant, so that their resources are
    // compared too.
    let renamed = renamed_pairs(&diff.removed, &diff.added);
    for (o, n) in &renamed {
        diff.removed.retain(|k| k != o);
        diff.added.retain(|k| k != n);
        pairs.push((format!("{n} (was {o})"), old_by_key[o], new_by_key[n]));
    }
    diff.renamed = renamed.len();
    for (k, o, n) in pairs {
        if o.resources() == n.resources() {
            if o.ptx_sha256 == n.ptx_sha256 {
                diff.same += 1;
            } else {
                diff.ptx_only += 1;
            }
            continue;
        }
        for ((what, a), (_, b)) in o.resources().into_iter().zip(n.resources()) {
            if a != b {
                diff.changed.push(format!("{k}: {what} {a} -> {b}"));
            }
        }
        // More than 2% more registers: 100 * new > 102 * old.
        if 100 * u64::from(n.registers) > 102 * u64::from(o.registers) {
            diff.failures
                .push(format!("{k}: registers {} -> {}", o.registers, n.registers));
        }
    }
    diff
}

/// A manifest key, `kernel[P=v,Q=w] (arch)`, as its kernel, arch and
/// parameters (none for a kernel without const parameters).
fn parse_key(key: &str) -> (&str, &str, Vec<(&str, &str)>) {
    let (variant, arch) = key.rsplit_once(" (").unwrap_or((key, ""));
    let arch = arch.trim_end_matches(')');
    let (kernel, params) = match variant.split_once('[') {
        Some((kernel, params)) => (kernel, params.trim_end_matches(']')),
        None => (variant, ""),
    };
    let params = params
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    (kernel, arch, params)
}

/// Per kernel among `keys`, the names of its const parameters.
fn parameter_names(keys: &[String]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut names: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for key in keys {
        let (kernel, _, params) = parse_key(key);
        names
            .entry(kernel)
            .or_default()
            .extend(params.iter().map(|(name, _)| *name));
    }
    names
}

/// The (old, new) keys among `removed` and `added` that are one variant
/// renamed: same kernel and arch, and the same values of the parameters
/// the kernel has on both sides, with no other variant on either side that
/// shares them (a parameter that now takes several values makes new code,
/// which stays added).
fn renamed_pairs(removed: &[String], added: &[String]) -> Vec<(String, String)> {
    let (old_names, new_names) = (parameter_names(removed), parameter_names(added));
    // Each key under the parameters its kernel has on both sides.
    let shared = |key: &str| -> Option<String> {
        let (kernel, arch, params) = parse_key(key);
        let (o, n) = (old_names.get(kernel)?, new_names.get(kernel)?);
        let kept: Vec<String> = params
            .iter()
            .filter(|(name, _)| o.contains(name) && n.contains(name))
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        Some(format!("{kernel}[{}] ({arch})", kept.join(",")))
    };
    let group = |keys: &[String]| -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for key in keys {
            if let Some(shared) = shared(key) {
                groups.entry(shared).or_default().push(key.clone());
            }
        }
        groups
    };
    let (old_groups, new_groups) = (group(removed), group(added));
    old_groups
        .into_iter()
        .filter_map(
            |(shared, olds)| match (&olds[..], new_groups.get(&shared)?.as_slice()) {
                ([o], [n]) => Some((o.clone(), n.clone())),
                _ => None,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(variant: &str, registers: u32, sha: &str) -> Entry {
        Entry {
            variant: variant.to_string(),
            arch: "sm_90".to_string(),
            registers,
            shared_bytes: 1024,
            stack_frame_bytes: 0,
            spill_store_bytes: 0,
            spill_load_bytes: 0,
            ptx_sha256: sha.to_string(),
        }
    }

    #[test]
    fn variants_are_matched_by_name_and_arch() {
        let old = [
            entry("k[A=1]", 100, "x"),
            entry("k[A=2]", 100, "y"),
            entry("k[A=3]", 100, "z"),
        ];
        let new = [
            entry("k[A=1]", 100, "x"),
            entry("k[A=2]", 102, "w"),
            entry("k[A=4]", 90, "v"),
        ];
        let diff = compare(&old, &new);
        assert_eq!(diff.same, 1);
        assert_eq!(diff.ptx_only, 0);
        assert_eq!(diff.changed, ["k[A=2] (sm_90): registers 100 -> 102"]);
        assert_eq!(diff.added, ["k[A=4] (sm_90)"]);
        assert_eq!(diff.removed, ["k[A=3] (sm_90)"]);
        assert!(
            diff.failures.is_empty(),
            "2% more is allowed: {:?}",
            diff.failures
        );
    }

    #[test]
    fn growth_past_two_percent_and_spills_fail() {
        let old = [entry("k[A=1]", 100, "x"), entry("k[A=2]", 96, "y")];
        let mut spilling = entry("k[A=1]", 100, "q");
        spilling.spill_store_bytes = 8;
        let new = [spilling, entry("k[A=2]", 116, "y")];
        let diff = compare(&old, &new);
        assert_eq!(
            diff.failures,
            [
                "k[A=1] (sm_90): spills",
                "k[A=2] (sm_90): registers 96 -> 116"
            ]
        );
        assert_eq!(diff.changed.len(), 2);
    }

    #[test]
    fn a_variant_renamed_by_a_new_parameter_is_still_compared() {
        // `s8` gained `C` at one value, `t` at two; `u` changed its tune space.
        let old = [
            entry("s8[A=1,B=2]", 80, "x"),
            entry("s8[A=2,B=2]", 80, "y"),
            entry("t[A=1]", 50, "z"),
            entry("u[A=1]", 50, "w"),
        ];
        let new = [
            entry("s8[A=1,B=2,C=0]", 88, "x"),
            entry("s8[A=2,B=2,C=0]", 80, "y"),
            entry("t[A=1,C=0]", 50, "z"),
            entry("t[A=1,C=1]", 50, "z"),
            entry("u[A=2]", 50, "w"),
        ];
        let diff = compare(&old, &new);
        assert_eq!(diff.renamed, 2);
        assert_eq!(
            diff.failures,
            ["s8[A=1,B=2,C=0] (sm_90) (was s8[A=1,B=2] (sm_90)): registers 80 -> 88"]
        );
        assert_eq!(diff.same, 1);
        // Two new variants for one old: new code, not a rename.
        assert_eq!(
            diff.added,
            ["t[A=1,C=0] (sm_90)", "t[A=1,C=1] (sm_90)", "u[A=2] (sm_90)"]
        );
        assert_eq!(diff.removed, ["t[A=1] (sm_90)", "u[A=1] (sm_90)"]);
    }

    #[test]
    fn only_the_ptx_text_changed() {
        let diff = compare(&[entry("k", 64, "a")], &[entry("k", 64, "b")]);
        assert_eq!((diff.same, diff.ptx_only, diff.changed.len()), (0, 1, 0));
    }
}
