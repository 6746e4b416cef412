//! Positions in an input file, and values that carry the position they were read from.

/// Byte range into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

impl Span {
    pub fn new(start: usize, len: usize) -> Self {
        Span { start, len }
    }
    pub fn end(&self) -> usize {
        self.start + self.len
    }
}

/// A value with the span it was read from: a manifest's YAML node, a registration's
/// field, a crontab line's column. One type for every source, so the model and the
/// rules never convert between "spanned" flavours.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}
