//! `cargo xtask tidy`: checks of the repository's own text, as `#[test]`s that
//! `cargo test --workspace` (so `cargo xtask test`) runs, and as a command
//! that runs them alone (in the style of rust-analyzer's `xtask/src/tidy.rs`).
//!
//! Over every file git lists (tracked, or new and not ignored):
//! - no file cites a file that lives beside the repository rather than in it
//!   ([`OUTSIDE_FILES`]): what the code relies on is written down here
//!   (docs/ptx.md for PTX) and cited by its path in the repository;
//! - no file holds a path of one machine ([`MACHINE_ROOTS`]);
//! - every `<path>docs/<name>.md, "<heading>"` citation names a heading of
//!   that file (`docs/ptx.md`, `warpforge/docs/dsl.md`);
//! - every `.rs` file under a crate's `src/` starts with a `//!` module doc.
//!
//! [`EXEMPTIONS`] lists the few places allowed to break a rule, each with its
//! reason; an exemption that no longer matches anything fails too. The
//! patterns are split (`concat!`, bare root names) so that this file does not
//! trip its own checks.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};

/// Files kept beside the repository (the notes and design documents of the
/// machines the project was developed on), by name or folder. A reader of
/// the repository does not have them.
pub const OUTSIDE_FILES: &[&str] = &[
    concat!("ptx", "-notes"),
    concat!("hopper", "-notes"),
    concat!("h200", "-anchors"),
    concat!("../", "shared/"),
    concat!("shared/", "reference"),
    concat!("shared/", "design"),
];

/// Top-level folders whose paths belong to one machine or one user (`/NAME/`
/// at the start of a path). System paths (`/usr/`, `/dev/`, `/proc/`) are not
/// in the list: they name the same thing on every machine.
pub const MACHINE_ROOTS: &[&str] = &["work", "tmp", "home", "root", "Users", "mnt", "scratch"];

/// What a file may break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    OutsideFile,
    MachinePath,
    DocSection,
    ModuleDoc,
}

/// A place allowed to break a rule: a whole file, or its lines that contain
/// `text`.
pub struct Exemption {
    pub path: &'static str,
    pub rules: &'static [Rule],
    pub text: Option<&'static str>,
    pub why: &'static str,
}

/// Kept minimal: every entry must still match something.
pub const EXEMPTIONS: &[Exemption] = &[
    Exemption {
        path: "perf/LOG.md",
        rules: &[Rule::OutsideFile, Rule::MachinePath],
        text: None,
        why: "the performance lab notebook: it records each device run as it was made, with the \
              commands, the paths of the machines they ran on and the reference figures of that \
              time; rewriting them would falsify the record",
    },
    Exemption {
        path: "runtime/src/tune/db.rs",
        rules: &[Rule::MachinePath],
        text: Some(concat!("/", "home/u")),
        why: "its unit tests resolve the tuning directory under a made-up HOME",
    },
];

/// One problem: where it is and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    pub line: usize,
    pub rule: Rule,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.message)
    }
}

/// The repository's files (relative paths with `/`) and their text.
pub struct Tree {
    root: PathBuf,
    files: Vec<String>,
}

impl Tree {
    /// The files git lists under `root` (tracked, and new ones not ignored);
    /// without git, every file below `root` outside `.git`, `target` and
    /// `gpu-bundle`.
    pub fn new(root: &Path) -> Tree {
        let listed = Command::new("git")
            .current_dir(root)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .ok()
            .filter(|out| out.status.success());
        let mut files: Vec<String> = match listed {
            Some(out) => String::from_utf8_lossy(&out.stdout)
                .split('\0')
                .filter(|name| !name.is_empty() && root.join(name).is_file())
                .map(str::to_string)
                .collect(),
            None => {
                let mut found = Vec::new();
                walk(root, root, &mut found);
                found
            }
        };
        files.sort();
        files.dedup();
        Tree {
            root: root.to_path_buf(),
            files,
        }
    }

    /// The text of a listed file, or `None` when it is not UTF-8.
    fn text(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }

    /// Every listed text file with its text.
    fn texts(&self) -> impl Iterator<Item = (&str, String)> + '_ {
        self.files
            .iter()
            .filter_map(|path| self.text(path).map(|text| (path.as_str(), text)))
    }
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !matches!(name.to_str(), Some(".git" | "target" | "gpu-bundle")) {
                walk(root, &path, found);
            }
        } else if let Ok(relative) = path.strip_prefix(root) {
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            found.push(parts.join("/"));
        }
    }
}

/// The files [`OUTSIDE_FILES`] names that `line` cites.
pub fn outside_files_in(line: &str) -> Vec<&'static str> {
    OUTSIDE_FILES
        .iter()
        .copied()
        .filter(|name| line.contains(name))
        .collect()
}

/// The machine paths in `line`: `/ROOT/..` for a root of [`MACHINE_ROOTS`]
/// that starts a path (not preceded by a name, `.`, `/`, `~` or `$`), up to
/// the next space, quote or closing bracket (a trailing `.` or `:` dropped).
pub fn machine_paths_in(line: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (at, _) in line.match_indices('/') {
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "_.-/~$}%".contains(c)) {
            continue;
        }
        let rest = &line[at + 1..];
        let starts_root = MACHINE_ROOTS.iter().any(|root| {
            rest.strip_prefix(root)
                .is_some_and(|after| after.starts_with('/'))
        });
        if starts_root {
            let end = line[at..]
                .find(|c: char| c.is_whitespace() || "\"'`)]>,;".contains(c))
                .map_or(line.len(), |n| at + n);
            // A sentence's full stop or colon is not part of the path.
            paths.push(line[at..end].trim_end_matches(['.', ':']).to_string());
        }
    }
    paths
}

/// The `<path>docs/<name>.md, "<heading>"` citations in `line`, as (file
/// from the repository root, heading); one file may be followed by several
/// headings (`"a", "b" and "c"`).
pub fn section_citations_in(line: &str) -> Vec<(String, String)> {
    let mut cited = Vec::new();
    for (at, _) in line.match_indices("docs/") {
        // The folders before `docs/`, as in `warpforge/docs/dsl.md`.
        let folder = line[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-/".contains(c)))
            .map_or(0, |before| before + 1);
        let rest = &line[at + "docs/".len()..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        let Some(after) = rest[name_len..].strip_prefix(".md") else {
            continue;
        };
        if name_len == 0 {
            continue;
        }
        let file = format!("{}docs/{}.md", &line[folder..at], &rest[..name_len]);
        let mut tail = after.strip_prefix('`').unwrap_or(after);
        let mut separator = ", \"";
        while let Some(quoted) = tail.strip_prefix(separator) {
            let Some(end) = quoted.find('"') else {
                break;
            };
            cited.push((file.clone(), quoted[..end].to_string()));
            tail = &quoted[end + 1..];
            separator = [", \"", " and \"", ", and \""]
                .into_iter()
                .find(|s| tail.starts_with(s))
                .unwrap_or(", \"");
        }
    }
    cited
}

/// The headings of a Markdown text (outside code fences), without `#`s and
/// backticks.
pub fn headings(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            let text = line.trim_start_matches('#');
            if text.starts_with(' ') {
                found.push(text.trim().replace('`', ""));
            }
        }
    }
    found
}

/// Whether `path` is a `.rs` file under a crate's `src/` (a folder beside a
/// listed `Cargo.toml`), which must carry a module doc.
fn in_crate_src(tree: &Tree, path: &str) -> bool {
    if !path.ends_with(".rs") {
        return false;
    }
    let parts: Vec<&str> = path.split('/').collect();
    (0..parts.len().saturating_sub(1)).any(|i| {
        parts[i] == "src" && {
            let manifest = if i == 0 {
                "Cargo.toml".to_string()
            } else {
                format!("{}/Cargo.toml", parts[..i].join("/"))
            };
            tree.files.binary_search(&manifest).is_ok()
        }
    })
}

/// Every finding of every rule, before exemptions.
pub fn findings(tree: &Tree) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut add = |path: &str, line: usize, rule: Rule, message: String| {
        found.push(Finding {
            path: path.to_string(),
            line,
            rule,
            message,
        })
    };
    let mut docs: Vec<(String, Option<Vec<String>>)> = Vec::new();
    for (path, text) in tree.texts() {
        if in_crate_src(tree, path) && !text.starts_with("//!") {
            add(
                path,
                1,
                Rule::ModuleDoc,
                "the file does not start with a `//!` module doc: write one to three lines \
                 saying what the module is and does"
                    .to_string(),
            );
        }
        for (n, line) in text.lines().enumerate() {
            for name in outside_files_in(line) {
                add(
                    path,
                    n + 1,
                    Rule::OutsideFile,
                    format!(
                        "cites `{name}`, which is not in the repository: write the facts it \
                         gives into the repository in its own words (PTX facts: docs/ptx.md, \
                         one section per topic) and cite that instead"
                    ),
                );
            }
            for machine in machine_paths_in(line) {
                add(
                    path,
                    n + 1,
                    Rule::MachinePath,
                    format!(
                        "holds the machine path `{machine}`, which exists on one machine only: \
                         use a path relative to the repository root (in code: from \
                         `CARGO_MANIFEST_DIR`, `std::env::temp_dir()` or a variable the user sets)"
                    ),
                );
            }
            for (file, heading) in section_citations_in(line) {
                let known = match docs.iter().find(|(name, _)| *name == file) {
                    Some((_, known)) => known.clone(),
                    None => {
                        let known = tree.text(&file).map(|md| headings(&md));
                        docs.push((file.clone(), known.clone()));
                        known
                    }
                };
                let message = match known {
                    None => format!(
                        "cites section \"{heading}\" of {file}, which does not exist: cite a \
                         Markdown file by its path from the repository root"
                    ),
                    Some(known) if !known.contains(&heading.replace('`', "")) => format!(
                        "cites section \"{heading}\" of {file}, which has no such heading: \
                         cite one of its headings ({}) or add the section",
                        known
                            .iter()
                            .map(|h| format!("\"{h}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Some(_) => continue,
                };
                add(path, n + 1, Rule::DocSection, message);
            }
        }
    }
    found
}

/// The exemption that covers a finding, if any.
fn exemption_of(tree: &Tree, finding: &Finding) -> Option<usize> {
    EXEMPTIONS.iter().position(|e| {
        e.path == finding.path
            && e.rules.contains(&finding.rule)
            && e.text.is_none_or(|text| {
                tree.text(&finding.path)
                    .and_then(|t| t.lines().nth(finding.line - 1).map(|l| l.contains(text)))
                    .unwrap_or(false)
            })
    })
}

/// The findings of `rules` that no exemption covers.
pub fn violations(tree: &Tree, rules: &[Rule]) -> Vec<Finding> {
    findings(tree)
        .into_iter()
        .filter(|f| rules.contains(&f.rule) && exemption_of(tree, f).is_none())
        .collect()
}

/// Exemptions that match no finding, as messages.
pub fn stale_exemptions(tree: &Tree) -> Vec<String> {
    let all = findings(tree);
    EXEMPTIONS
        .iter()
        .enumerate()
        .filter(|(i, _)| !all.iter().any(|f| exemption_of(tree, f) == Some(*i)))
        .map(|(_, e)| {
            format!(
                "xtask/src/tidy.rs: the exemption of {} ({}) matches nothing any more: remove it",
                e.path, e.why
            )
        })
        .collect()
}

/// `cargo xtask tidy`: every rule, then the exemptions.
pub fn run(root: &Path) -> Result<()> {
    let tree = Tree::new(root);
    let all = [
        Rule::OutsideFile,
        Rule::MachinePath,
        Rule::DocSection,
        Rule::ModuleDoc,
    ];
    let mut problems: Vec<String> = violations(&tree, &all)
        .iter()
        .map(|f| f.to_string())
        .collect();
    problems.extend(stale_exemptions(&tree));
    for problem in &problems {
        eprintln!("{problem}");
    }
    if !problems.is_empty() {
        bail!("tidy: {} problem(s), listed above", problems.len());
    }
    println!("tidy: {} files checked, all tidy", tree.files.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> Tree {
        Tree::new(&crate::repo_root())
    }

    fn assert_none(rules: &[Rule]) {
        let found = violations(&repo(), rules);
        let listed: Vec<String> = found.iter().map(|f| f.to_string()).collect();
        assert!(
            found.is_empty(),
            "{} problem(s):\n{}",
            found.len(),
            listed.join("\n")
        );
    }

    #[test]
    fn no_file_cites_a_file_outside_the_repository() {
        assert_none(&[Rule::OutsideFile]);
    }

    #[test]
    fn no_file_holds_a_machine_path() {
        assert_none(&[Rule::MachinePath]);
    }

    #[test]
    fn every_cited_doc_section_exists() {
        assert_none(&[Rule::DocSection]);
    }

    #[test]
    fn every_crate_source_file_has_a_module_doc() {
        assert_none(&[Rule::ModuleDoc]);
    }

    #[test]
    fn every_exemption_is_still_needed() {
        let stale = stale_exemptions(&repo());
        assert!(stale.is_empty(), "{}", stale.join("\n"));
    }

    #[test]
    fn the_walk_sees_the_repository() {
        let tree = repo();
        for path in ["Cargo.toml", "docs/ptx.md", "xtask/src/tidy.rs"] {
            assert!(tree.files.iter().any(|f| f == path), "{path} not listed");
        }
        assert!(!tree.files.iter().any(|f| f.starts_with("target/")));
    }

    #[test]
    fn outside_files_are_found_by_name_and_folder() {
        let notes = format!("see {}.md §3", OUTSIDE_FILES[0]);
        assert_eq!(outside_files_in(&notes), [OUTSIDE_FILES[0]]);
        let design = format!("`../{}/VISION.md`", OUTSIDE_FILES[5]);
        assert_eq!(
            outside_files_in(&design),
            [OUTSIDE_FILES[3], OUTSIDE_FILES[5]]
        );
        assert!(outside_files_in("(docs/ptx.md, \"ldmatrix\")").is_empty());
    }

    #[test]
    fn machine_paths_start_a_path_under_a_machine_root() {
        let path = |root: &str, rest: &str| format!("/{root}/{rest}");
        let line = format!("see {} and `{}`", path("work", "x/y.md"), path("tmp", "z"));
        assert_eq!(
            machine_paths_in(&line),
            [path("work", "x/y.md"), path("tmp", "z")]
        );
        let ends = format!("written to {}.", path("mnt", "out.txt"));
        assert_eq!(machine_paths_in(&ends), [path("mnt", "out.txt")]);
        let quoted = format!("PathBuf::from(\"{}\")", path("home", "u/.cache"));
        assert_eq!(machine_paths_in(&quoted), [path("home", "u/.cache")]);
        // Relative paths, URLs, variables and system paths are not machine paths.
        for fine in [
            format!("target{}", path("tmp", "x")),
            format!("https://example.org{}", path("home", "x")),
            format!("$HOME{}", path("root", "x")),
            "/usr/local/cuda/lib64 and /dev/null".to_string(),
            "a /workspace/ or /homepage".to_string(),
        ] {
            assert!(machine_paths_in(&fine).is_empty(), "{fine}");
        }
    }

    #[test]
    fn section_citations_name_a_file_and_its_headings() {
        let one = "(docs/ptx.md, \"ldmatrix\"): lanes";
        assert_eq!(
            section_citations_in(one),
            [("docs/ptx.md".to_string(), "ldmatrix".to_string())]
        );
        let list = "in `docs/ptx.md`, \"a b\", \"c\" and \"d\".";
        let headings: Vec<String> = section_citations_in(list)
            .into_iter()
            .map(|(_, h)| h)
            .collect();
        assert_eq!(headings, ["a b", "c", "d"]);
        let guide = "(warpforge/docs/dsl.md, \"WGSL\")";
        assert_eq!(
            section_citations_in(guide),
            [("warpforge/docs/dsl.md".to_string(), "WGSL".to_string())]
        );
        assert!(section_citations_in("docs/ptx.md has the facts").is_empty());
        assert!(section_citations_in("docs/.md, \"x\"").is_empty());
    }

    #[test]
    fn headings_skip_code_fences() {
        let md = "# Title\n\n## `cp.async`\n```sh\n# not a heading\n```\n#[kernel]\n### Last\n";
        assert_eq!(headings(md), ["Title", "cp.async", "Last"]);
    }

    #[test]
    fn ptx_md_has_the_sections_the_code_cites() {
        let tree = repo();
        let known = headings(&tree.text("docs/ptx.md").expect("docs/ptx.md"));
        for section in [
            "Versions and targets",
            "mma.sync fragments",
            "ldmatrix",
            "Shared-tile swizzle",
            "cp.async",
            "Sparse mma.sp",
            "Volta wmma",
            "Operand registers",
        ] {
            assert!(known.iter().any(|h| h == section), "{section}");
        }
    }
}
