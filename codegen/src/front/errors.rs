//! Error collection: passes report into [`Errors`] and keep going.

use quote::ToTokens;

/// Marks a failure whose error is already in [`Errors`]: callers stop lowering
/// the construct without reporting again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported;

/// The errors of one kernel, in the order found, each once.
#[derive(Default)]
pub struct Errors {
    /// The first error, with the later ones combined into it.
    first: Option<syn::Error>,
    /// Where each error is and what it says: a device function's body is
    /// lowered at every call, and its errors are reported once.
    seen: Vec<(Location, String)>,
}

/// The start and end (line, column) of a span.
type Location = ((usize, usize), (usize, usize));

impl Errors {
    /// Records an error spanning `at` and returns the marker to propagate.
    pub fn push(&mut self, at: impl ToTokens, message: impl std::fmt::Display) -> Reported {
        self.push_error(syn::Error::new_spanned(at, message))
    }

    /// Records an error made elsewhere (a parser's) and returns the marker.
    pub fn push_error(&mut self, error: syn::Error) -> Reported {
        let span = error.span();
        let location = (
            (span.start().line, span.start().column),
            (span.end().line, span.end().column),
        );
        let entry = (location, error.to_string());
        if self.seen.contains(&entry) {
            return Reported;
        }
        self.seen.push(entry);
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
        Reported
    }

    /// How many errors were recorded.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// All errors as one; `at` only matters if a pass failed without
    /// reporting, which would be a bug of the front end.
    pub fn into_error(self, at: impl ToTokens) -> syn::Error {
        self.first.unwrap_or_else(|| {
            syn::Error::new_spanned(at, "internal error of the warpforge front end: a pass failed without a message; please report this kernel")
        })
    }
}
