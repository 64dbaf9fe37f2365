//! How deeply a kernel's tokens nest, measured without recursion before syn
//! parses them: syn's parser, the front's lowering and the drop of their
//! trees all recurse once per level, so tokens nested without bound would
//! overflow the proc-macro's stack (the compiler's thread) instead of
//! failing with an error.
//!
//! The measure bounds the depth of any tree parsed from the tokens: a
//! bracketed group (`{..}`, `(..)`, `[..]`) costs [`GROUP_COST`] more than
//! its deepest run, and a run (the tokens of a group between two `;`, which
//! only ever separate siblings) costs the measure of its deepest group plus
//! its operators, keywords and groups, since a chain such as `a + b + c`,
//! `- - x`, `x as f32 as f32` or `if .. else if ..` nests once per such
//! token or less. The stack a level takes was measured on debug builds
//! (proc-macros are built without optimization); see [`MAX_NESTING`] for
//! the budget.

use proc_macro2::{Spacing, Span, TokenStream, TokenTree};

/// What a bracketed group adds to the measure of its deepest run: a group
/// is a block, a condition's body or a parenthesized operand, each several
/// levels of syn's parser and of the lowering (on a 2 MiB stack, 50 nested
/// blocks take about as much as a chain of 450 operators).
pub const GROUP_COST: usize = 8;

/// The deepest measure a kernel, a device function or a `#[kernel(..)]`
/// attribute may have: at this measure the parse, the lowering, the target
/// checks and the serialization of the deepest shapes (nested blocks, `if`s
/// and parentheses, operator chains) run in a quarter of the 8 MiB stack
/// the compiler runs macros on
/// (`front::tests::nesting_at_the_limit_fits_the_stack` runs them on a
/// 2 MiB thread; 600 overflowed it with a chain of negations), and so does
/// what the program does with the definition (its JSON, specialization,
/// validation and emission:
/// `front::tests::the_runtime_path_at_the_nesting_limit_fits_the_stack`,
/// where specialization grows its stack). It allows
/// about 50 nested blocks; the deepest stock kernel, `gemm_tc`, measures
/// 317.
pub const MAX_NESTING: usize = 480;

/// One group being measured: its tokens left, where it starts, its cost
/// (0 for the tokens outside any group) and the measure of its deepest run
/// so far.
struct Frame {
    tokens: proc_macro2::token_stream::IntoIter,
    span: Span,
    cost: usize,
    deepest_run: usize,
    run: Run,
}

/// The run being read: its length so far, its deepest group, where it
/// starts, and the punctuation joined so far (an operator not yet
/// complete).
#[derive(Default)]
struct Run {
    len: usize,
    deepest_group: usize,
    start: Option<Span>,
    joined: String,
}

/// Checks that `tokens` nest at most [`MAX_NESTING`] deep, iteratively; the
/// error is at the innermost run that passes it.
pub fn check_nesting(tokens: TokenStream) -> syn::Result<()> {
    let mut stack = vec![Frame {
        tokens: tokens.into_iter(),
        span: Span::call_site(),
        cost: 0,
        deepest_run: 0,
        run: Run::default(),
    }];
    while let Some(frame) = stack.last_mut() {
        let Some(token) = frame.tokens.next() else {
            end_run(frame)?;
            let measure = frame.cost + frame.deepest_run;
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.run.deepest_group = parent.run.deepest_group.max(measure);
            }
            continue;
        };
        frame.run.len += levels(&mut frame.run.joined, &token);
        frame.run.start.get_or_insert(match &token {
            TokenTree::Group(group) => group.span_open(),
            other => other.span(),
        });
        match token {
            TokenTree::Group(group) => stack.push(Frame {
                tokens: group.stream().into_iter(),
                span: group.span_open(),
                cost: GROUP_COST,
                deepest_run: 0,
                run: Run::default(),
            }),
            TokenTree::Punct(p) if p.as_char() == ';' => end_run(frame)?,
            _ => {}
        }
    }
    Ok(())
}

/// How many levels a syntax tree can nest at `token`: one at a group or a
/// keyword; at punctuation, one per operator, counted at its last
/// character: a multi-character operator such as `::` or `+=` is one, and
/// any other run of joined characters one per character, since `!!!x`,
/// `--x` and `&&&x` are chains of prefix operators (the lexer joins them
/// as it joins `!=`). Names and literals are leaves: every node of syn's
/// trees that has children has one of the others.
fn levels(joined: &mut String, token: &TokenTree) -> usize {
    if let TokenTree::Punct(p) = token {
        joined.push(p.as_char());
        if p.spacing() == Spacing::Joint {
            return 0;
        }
        let run = std::mem::take(joined);
        return if OPERATORS.contains(&run.as_str()) {
            1
        } else {
            run.chars().count()
        };
    }
    // Joined punctuation before a name: a lifetime's `'`.
    let before = std::mem::take(joined).chars().count();
    let nests = match token {
        TokenTree::Group(_) => true,
        TokenTree::Ident(i) => KEYWORDS.contains(&i.to_string().as_str()),
        TokenTree::Literal(_) | TokenTree::Punct(_) => false,
    };
    before + usize::from(nests)
}

/// Rust's operators of more than one character.
const OPERATORS: [&str; 24] = [
    "::", "->", "=>", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "^=", "&=",
    "|=", "<<=", ">>=", "<<", ">>", "..", "...", "..=",
];

/// Rust's keywords, strict and reserved.
const KEYWORDS: [&str; 52] = [
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "gen", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Closes `frame`'s current run, which must not pass the limit.
fn end_run(frame: &mut Frame) -> syn::Result<()> {
    let run = std::mem::take(&mut frame.run);
    let measure = run.len + run.deepest_group;
    if frame.cost + measure > MAX_NESTING {
        return Err(too_deep(
            run.start.unwrap_or(frame.span),
            frame.cost + measure,
        ));
    }
    frame.deepest_run = frame.deepest_run.max(measure);
    Ok(())
}

/// The error at `at`, where the measure reached `measure`.
fn too_deep(at: Span, measure: usize) -> syn::Error {
    syn::Error::new(
        at,
        format!(
            "this code nests too deeply for the kernel language: its nesting measures {measure}, \
             and the limit is {MAX_NESTING} (each bracketed group `{{..}}`, `(..)` or `[..]` counts \
             {GROUP_COST}, and each operator, keyword or group of a statement inside it 1, so \
             about {} groups nest at most): bind parts of long expressions to `let`s, \
             flatten nested blocks and conditions (combine conditions with `&&`, leave loops \
             early with `continue`), or move inner parts into `#[device]` functions",
            MAX_NESTING / (GROUP_COST + 1)
        ),
    )
}
