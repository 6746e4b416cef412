//! Leaf: the vocabulary every stage shares to talk about its inputs. Positions
//! ([`Span`], [`Spanned`]), the files they point into ([`SourceFile`]), and the words
//! messages are made of (did-you-mean, counts, lengths of time). Imports nothing of the
//! crate.

pub mod duration;
mod source;
mod span;
mod suggest;

pub use source::{Secrets, SourceFile, io_reason};
pub use span::{Span, Spanned};
pub use suggest::closest;

/// A path as findings show it: relative to the current directory when under it, else as
/// given (SPEC 3.5).
pub fn display_path(path: &std::path::Path) -> String {
    if let (Ok(cwd), Ok(abs)) = (std::env::current_dir(), std::path::absolute(path))
        && let Ok(rel) = abs.strip_prefix(&cwd)
    {
        let s = rel.to_string_lossy().into_owned();
        return if s.is_empty() { ".".into() } else { s };
    }
    path.to_string_lossy().into_owned()
}

/// `1 error`, `2 errors`: counts in messages and reports read as sentences.
pub fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}
