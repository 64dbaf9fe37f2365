//! The seed corpus: every `#[kernel]` and `#[device]` function of the stock
//! kernels, the examples and the codegen test inputs, read as tokens (the
//! files are Rust the lexer reads whole), and the pools of tokens the
//! mutations draw from.

use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use warpforge_codegen::front::{link_sources, Linked};

/// Where the seeds come from, relative to the workspace.
const SOURCE_DIRS: [&str; 5] = [
    "codegen/tests/in",
    "kernels/src",
    "examples/tiled-user/src",
    "examples/tuned-user/src",
    "examples/linked-cuda/src",
];

/// One function of the corpus.
pub struct Seed {
    /// The file it comes from, for reports.
    pub origin: String,
    /// The content of `#[kernel(..)]`; `None` for a `#[device]` function.
    pub attr: Option<TokenStream>,
    /// The function, doc comments left out.
    pub item: TokenStream,
}

pub struct Corpus {
    pub kernels: Vec<Seed>,
    pub devices: Vec<Seed>,
    /// Every device function of the corpus, linked by name as the macro
    /// would link them (a call resolves to the function of its last
    /// segment's name).
    pub linked: Linked,
    /// Every identifier, literal and punctuation of the corpus, each once.
    pub idents: Vec<TokenTree>,
    pub literals: Vec<TokenTree>,
    pub puncts: Vec<TokenTree>,
    /// Statements of the corpus (a block's tokens up to a `;`), and the
    /// contents of its attributes, for splicing.
    pub statements: Vec<Vec<TokenTree>>,
    pub attrs: Vec<TokenStream>,
}

impl Corpus {
    pub fn load() -> Corpus {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files: Vec<PathBuf> = SOURCE_DIRS
            .iter()
            .flat_map(|dir| rust_files(&root.join(dir)))
            .collect();
        files.sort();
        let mut corpus = Corpus {
            kernels: Vec::new(),
            devices: Vec::new(),
            linked: Linked::default(),
            idents: Vec::new(),
            literals: Vec::new(),
            puncts: Vec::new(),
            statements: Vec::new(),
            attrs: Vec::new(),
        };
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let tokens: TokenStream = text
                .parse()
                .unwrap_or_else(|e| panic!("{} does not lex: {e:?}", file.display()));
            let origin = file.strip_prefix(&root).unwrap().display().to_string();
            corpus.collect_seeds(tokens, &origin);
        }
        let devices: Vec<String> = corpus.devices.iter().map(|d| d.item.to_string()).collect();
        let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
        corpus.linked = link_sources(&devices).expect("the corpus' device functions parse");
        let all_items: Vec<TokenStream> = corpus
            .kernels
            .iter()
            .chain(&corpus.devices)
            .map(|s| s.item.clone())
            .collect();
        for item in all_items {
            corpus.collect_pools(item);
        }
        corpus.attrs = corpus
            .kernels
            .iter()
            .filter_map(|k| k.attr.clone())
            .collect();
        for pool in [&mut corpus.idents, &mut corpus.literals, &mut corpus.puncts] {
            pool.sort_by_key(ToString::to_string);
            pool.dedup_by_key(|t| t.to_string());
        }
        corpus
    }

    /// The functions under `#[kernel]` or `#[device]` in `tokens`, at any
    /// depth (kernels may sit in modules).
    fn collect_seeds(&mut self, tokens: TokenStream, origin: &str) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            if let Some((marker, attr)) = seed_attribute(&tokens[i..]) {
                let (item, len) = function_after(&tokens[i + 2..]);
                let seed = Seed {
                    origin: origin.to_string(),
                    attr: (marker == "kernel").then_some(attr),
                    item,
                };
                match seed.attr {
                    Some(_) => self.kernels.push(seed),
                    None => self.devices.push(seed),
                }
                i += 2 + len;
                continue;
            }
            if let TokenTree::Group(g) = &tokens[i] {
                self.collect_seeds(g.stream(), origin);
            }
            i += 1;
        }
    }

    fn collect_pools(&mut self, tokens: TokenStream) {
        let mut statement = Vec::new();
        for token in tokens {
            match &token {
                TokenTree::Ident(_) => self.idents.push(token.clone()),
                TokenTree::Literal(_) => self.literals.push(token.clone()),
                TokenTree::Punct(p) => self.puncts.push(TokenTree::Punct(proc_macro2::Punct::new(
                    p.as_char(),
                    proc_macro2::Spacing::Alone,
                ))),
                TokenTree::Group(g) => self.collect_pools(g.stream()),
            }
            let ends = matches!(&token, TokenTree::Punct(p) if p.as_char() == ';');
            statement.push(token);
            if ends {
                self.statements.push(std::mem::take(&mut statement));
            }
        }
    }

    /// The linked device functions with `item` in place of the corpus'
    /// device function `slot`: each function's calls resolve again, since
    /// the new one may call others.
    pub fn linked_with(&self, slot: usize, item: syn::ItemFn) -> Linked {
        let mut linked = Linked {
            functions: self.linked.functions.clone(),
            calls: Vec::new(),
        };
        linked.functions[slot].item = item;
        for f in 0..linked.functions.len() {
            linked.functions[f].calls =
                warpforge_codegen::front::calls_by_name(&linked.functions[f].item, &linked);
        }
        linked
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `#[kernel(..)]`, `#[kernel]` or `#[device]` at the start of `tokens`:
/// which, and the attribute's content.
fn seed_attribute(tokens: &[TokenTree]) -> Option<(String, TokenStream)> {
    let [TokenTree::Punct(hash), TokenTree::Group(g), ..] = tokens else {
        return None;
    };
    if hash.as_char() != '#' || g.delimiter() != Delimiter::Bracket {
        return None;
    }
    let mut inner = g.stream().into_iter();
    let Some(TokenTree::Ident(name)) = inner.next() else {
        return None;
    };
    let name = name.to_string();
    if name != "kernel" && name != "device" {
        return None;
    }
    let attr = match inner.next() {
        Some(TokenTree::Group(args)) => args.stream(),
        _ => TokenStream::new(),
    };
    Some((name, attr))
}

/// The function that starts `tokens` (after any other attributes, which
/// are doc comments in the corpus and left out): its tokens through its
/// body, and how many tokens of `tokens` it took.
fn function_after(tokens: &[TokenTree]) -> (TokenStream, usize) {
    let mut item = Vec::new();
    let mut seen_fn = false;
    let mut i = 0;
    while i < tokens.len() {
        if !seen_fn && seed_attribute(&tokens[i..]).is_none() {
            if let [TokenTree::Punct(p), TokenTree::Group(_), ..] = &tokens[i..] {
                if p.as_char() == '#' {
                    i += 2;
                    continue;
                }
            }
        }
        let token = &tokens[i];
        seen_fn |= matches!(token, TokenTree::Ident(id) if id == "fn");
        item.push(token.clone());
        i += 1;
        if seen_fn && matches!(token, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace) {
            break;
        }
    }
    (item.into_iter().collect(), i)
}
