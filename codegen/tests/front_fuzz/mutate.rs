//! The inputs: each a function of the input's number and the run's seed
//! alone (so a report can name an input by the pair and regenerate it),
//! either a corpus function mutated at the token level or a stream of
//! tokens drawn at random.

use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};

use crate::corpus::{Corpus, Seed};

/// Values that sit on the edges of what the front, specialization and the
/// backends handle: zero, the extremes of each type, literals past them,
/// NaN- and infinity-producing float operations, shift counts past the
/// width, array sizes and block shapes over the limits.
const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "31",
    "32",
    "33",
    "64",
    "255",
    "2048",
    "65536",
    "100000000",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "340282366920938463463374607431768211456",
    "u32::MAX",
    "i32::MIN",
    "i64::MAX",
    "0u32 - 1",
    "(1u32 << 32)",
    "(1 << 40)",
    "(7 / 0)",
    "(7 % 0)",
    "0.0",
    "-0.0",
    "1e39",
    "1.0e-45",
    "f32::NAN",
    "f32::INFINITY",
    "(0.0 / 0.0)",
    "(1.0 / 0.0)",
    "(-1.0f32).sqrt()",
    "0.5f16",
    "true",
    "[0.0f32; 65536]",
    "[0u32; 4294967295]",
    "[[0i32; 4096]; 4096]",
];

/// Whole entries of `#[kernel(..)]` past the corpus' own.
const INTERESTING_ATTRS: &[&str] = &[
    "block(2048)",
    "block(0)",
    "block(1024, 1024, 1)",
    "block(4294967295, 1, 1)",
    "block(32, 32, 2)",
    "arch(sm_70)",
    "arch(sm_90a)",
    "arch(wgsl)",
    "arch(sm_70, sm_80, sm_90, sm_90a, wgsl)",
    "arch()",
    "tune(N = [0])",
    "tune(N = [1, 2, 4, 8, 16, 32, 64, 128])",
    "requires(n > 0)",
    "constrain(N > 0)",
];

/// The deepest a wrap nests: past the front's limit of about 60 groups, so
/// that both sides of it are tried.
const MAX_WRAP: usize = 70;
/// The longest operator chain inserted: past the limit of about 470.
const MAX_CHAIN: usize = 520;

/// splitmix64: small, good enough for fuzzing, and stable across platforms
/// and Rust versions (a report's seed must mean the same input everywhere).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One input: a kernel (its attribute's content and the function), and a
/// device function that replaces the corpus' function `slot`.
pub struct Input {
    /// What it was made from: a corpus file, or tokens at random.
    pub origin: String,
    pub kernel: Option<(String, String)>,
    pub device: Option<(usize, String)>,
}

impl Input {
    /// A kernel of the corpus as it is.
    pub fn seed(seed: &Seed) -> Input {
        Input {
            origin: seed.origin.clone(),
            kernel: seed
                .attr
                .as_ref()
                .map(|attr| (attr.to_string(), seed.item.to_string())),
            device: None,
        }
    }
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        writeln!(f, "// from {}", self.origin)?;
        if let Some((slot, item)) = &self.device {
            writeln!(f, "// in place of the corpus' device function #{slot}:")?;
            writeln!(f, "#[device]\n{item}")?;
        }
        if let Some((attr, item)) = &self.kernel {
            writeln!(f, "#[kernel({attr})]\n{item}")?;
        }
        Ok(())
    }
}

/// Input `index` of the run `seed`.
pub fn generate(corpus: &Corpus, seed: u64, index: u64) -> Input {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let mutator = Mutator {
        corpus,
        rng: &mut rng,
    };
    mutator.input()
}

struct Mutator<'a> {
    corpus: &'a Corpus,
    rng: &'a mut Rng,
}

/// A token tree as the mutations edit it: groups own their tokens.
#[derive(Clone)]
enum Node {
    Leaf(TokenTree),
    Group(Delimiter, Vec<Node>),
}

fn nodes(tokens: TokenStream) -> Vec<Node> {
    tokens
        .into_iter()
        .map(|t| match t {
            TokenTree::Group(g) => Node::Group(g.delimiter(), nodes(g.stream())),
            leaf => Node::Leaf(leaf),
        })
        .collect()
}

fn stream(nodes: &[Node]) -> TokenStream {
    nodes
        .iter()
        .map(|n| match n {
            Node::Leaf(t) => t.clone(),
            Node::Group(d, inner) => TokenTree::Group(Group::new(*d, stream(inner))),
        })
        .collect()
}

fn pick_str(rng: &mut Rng, items: &[&'static str]) -> &'static str {
    items[rng.below(items.len())]
}

fn parse(source: &str) -> Vec<Node> {
    nodes(source.parse().expect("the fuzzer's snippets lex"))
}

/// The path (child indices) of every token list in `list`, itself first.
fn lists(list: &[Node], path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(path.clone());
    for (i, node) in list.iter().enumerate() {
        if let Node::Group(_, inner) = node {
            path.push(i);
            lists(inner, path, out);
            path.pop();
        }
    }
}

fn list_at<'n>(list: &'n mut Vec<Node>, path: &[usize]) -> &'n mut Vec<Node> {
    match path.split_first() {
        None => list,
        Some((&i, rest)) => match &mut list[i] {
            Node::Group(_, inner) => list_at(inner, rest),
            Node::Leaf(_) => unreachable!("paths lead through groups"),
        },
    }
}

impl Mutator<'_> {
    fn input(mut self) -> Input {
        let corpus = self.corpus;
        match self.rng.below(100) {
            // A device function mutated, linked in place of the original,
            // with a kernel of the corpus that calls it, if one does.
            0..=14 => {
                let slot = self.rng.below(corpus.devices.len());
                let mut item = nodes(corpus.devices[slot].item.clone());
                self.mutate(&mut item);
                let name = corpus.linked.functions[slot].item.sig.ident.to_string();
                let callers: Vec<_> = corpus
                    .kernels
                    .iter()
                    .filter(|k| k.item.to_string().contains(&format!("{name} (")))
                    .collect();
                let kernel = (!callers.is_empty()).then(|| {
                    let k = self.rng.pick(&callers);
                    (k.attr.clone().unwrap().to_string(), k.item.to_string())
                });
                Input {
                    origin: corpus.devices[slot].origin.clone(),
                    kernel,
                    device: Some((slot, stream(&item).to_string())),
                }
            }
            // Tokens at random in a kernel's body, or in place of the whole
            // function.
            15..=24 => {
                let attr = self.rng.pick(&corpus.attrs).to_string();
                let body = self.random_tokens(2);
                let item = if self.rng.chance(80) {
                    format!(
                        "pub fn fuzzed(x: &mut [f32], y: &[u32], n: u32) {{ {} }}",
                        stream(&body)
                    )
                } else {
                    stream(&body).to_string()
                };
                Input {
                    origin: "tokens at random".to_string(),
                    kernel: Some((attr, item)),
                    device: None,
                }
            }
            // A kernel mutated, its attribute too at times.
            _ => {
                let seed = self.rng.pick(&corpus.kernels);
                let mut attr = nodes(seed.attr.clone().unwrap());
                let mut item = nodes(seed.item.clone());
                if self.rng.chance(30) {
                    self.mutate_attr(&mut attr);
                }
                if self.rng.chance(85) {
                    self.mutate(&mut item);
                }
                Input {
                    origin: seed.origin.clone(),
                    kernel: Some((stream(&attr).to_string(), stream(&item).to_string())),
                    device: None,
                }
            }
        }
    }

    /// One to eight mutations, fewer more often.
    fn mutate(&mut self, item: &mut Vec<Node>) {
        let halvings = self.rng.below(4);
        let count = 1 + self.rng.below(8usize >> halvings);
        for _ in 0..count {
            self.mutate_once(item);
        }
    }

    fn mutate_attr(&mut self, attr: &mut Vec<Node>) {
        if self.rng.chance(50) {
            let entry = if self.rng.chance(50) {
                parse(pick_str(self.rng, INTERESTING_ATTRS))
            } else {
                nodes(self.rng.pick(&self.corpus.attrs).clone())
            };
            if !attr.is_empty() {
                attr.extend(parse(","));
            }
            attr.extend(entry);
        } else {
            self.mutate(attr);
        }
    }

    fn mutate_once(&mut self, item: &mut Vec<Node>) {
        let mut paths = Vec::new();
        lists(item, &mut Vec::new(), &mut paths);
        let path = self.rng.pick(&paths).clone();
        let replacement = match self.rng.below(10) {
            0 => None,
            1 => Some(self.leaf_like_at(item, &path)),
            2 => Some(parse(pick_str(self.rng, INTERESTING))),
            3 => Some(self.statement()),
            4 => Some(self.chain()),
            _ => Some(Vec::new()),
        };
        let rng = &mut *self.rng;
        let list = list_at(item, &path);
        if list.is_empty() {
            list.extend(replacement.unwrap_or_default());
            return;
        }
        let at = rng.below(list.len());
        match (rng.below(7), replacement) {
            // Delete one token tree, or a run of them.
            (0, _) => {
                let len = 1 + rng.below(3.min(list.len() - at));
                list.drain(at..at + len);
            }
            (1, _) => {
                let copy = list[at].clone();
                list.insert(at, copy);
            }
            (2, _) => {
                let other = rng.below(list.len());
                list.swap(at, other);
            }
            (3, _) => {
                let depth = 1 + rng.below(MAX_WRAP);
                let delimiter =
                    *rng.pick(&[Delimiter::Brace, Delimiter::Parenthesis, Delimiter::Bracket]);
                let mut node = list[at].clone();
                for _ in 0..depth {
                    node = Node::Group(delimiter, vec![node]);
                }
                list[at] = node;
            }
            // Replace, or insert, what was drawn above.
            (4 | 5, Some(new)) if !new.is_empty() => {
                list.splice(at..at + 1, new);
            }
            (_, Some(new)) if !new.is_empty() => {
                list.splice(at..at, new);
            }
            // Replace a leaf by another of its kind from the corpus.
            _ => {
                if let Node::Leaf(leaf) = &list[at] {
                    let pool = match leaf {
                        TokenTree::Ident(_) => &self.corpus.idents,
                        TokenTree::Literal(_) => &self.corpus.literals,
                        _ => &self.corpus.puncts,
                    };
                    list[at] = Node::Leaf(rng.pick(pool).clone());
                }
            }
        }
    }

    /// An identifier, literal or operator of the corpus, of the kind of a
    /// leaf on `path` where there is one.
    fn leaf_like_at(&mut self, item: &mut Vec<Node>, path: &[usize]) -> Vec<Node> {
        let list = list_at(item, path);
        let kind = list.iter().find_map(|n| match n {
            Node::Leaf(t) => Some(t.clone()),
            Node::Group(..) => None,
        });
        let pool = match kind {
            Some(TokenTree::Literal(_)) => &self.corpus.literals,
            Some(TokenTree::Punct(_)) => &self.corpus.puncts,
            _ => &self.corpus.idents,
        };
        vec![Node::Leaf(self.rng.pick(pool).clone())]
    }

    /// A chain of one operator over `x` or a literal, up to past the
    /// front's nesting limit: `x + x + ..`, `- - .. x`, `x as f32 as ..`.
    fn chain(&mut self) -> Vec<Node> {
        let len = 1 + self.rng.below(MAX_CHAIN);
        let (operand, link) = *self.rng.pick(&[
            ("x", " + x"),
            ("1u32", " << 1"),
            ("1.0", " * 1.0"),
            ("x", " as f32"),
        ]);
        let text = match self.rng.below(3) {
            0 => format!("{}x", "- ".repeat(len)),
            1 => format!("{}{}", "!".repeat(len), "true"),
            _ => format!("{operand}{}", link.repeat(len)),
        };
        parse(&text)
    }

    /// A statement of the corpus.
    fn statement(&mut self) -> Vec<Node> {
        nodes(
            self.rng
                .pick(&self.corpus.statements)
                .iter()
                .cloned()
                .collect(),
        )
    }

    /// Up to 40 token trees drawn from the corpus' pools and statements,
    /// nested `depth` groups deep at most.
    fn random_tokens(&mut self, depth: usize) -> Vec<Node> {
        let count = self.rng.below(40);
        let mut out = Vec::new();
        for _ in 0..count {
            match self.rng.below(6) {
                0 => out.push(Node::Leaf(self.rng.pick(&self.corpus.idents).clone())),
                1 => out.push(Node::Leaf(self.rng.pick(&self.corpus.literals).clone())),
                2 => {
                    let p = self.rng.pick(&self.corpus.puncts).clone();
                    let joint = self.rng.chance(20);
                    out.push(Node::Leaf(match p {
                        TokenTree::Punct(p) if joint => {
                            TokenTree::Punct(proc_macro2::Punct::new(p.as_char(), Spacing::Joint))
                        }
                        other => other,
                    }));
                }
                3 if depth > 0 => {
                    let delimiter = *self.rng.pick(&[
                        Delimiter::Brace,
                        Delimiter::Parenthesis,
                        Delimiter::Bracket,
                    ]);
                    out.push(Node::Group(delimiter, self.random_tokens(depth - 1)));
                }
                4 => out.extend(parse(pick_str(self.rng, INTERESTING))),
                _ => out.extend(self.statement()),
            }
        }
        out
    }
}
