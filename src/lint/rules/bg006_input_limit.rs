use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Refuses a file over 8 MiB, nested deeper than 128 levels, or whose anchors and
    /// aliases would expand beyond a fixed budget (a "billion laughs" file).
    ///
    /// ## Why it matters
    /// `lint` runs in CI on every pull request, on files anyone can change. A few hundred
    /// bytes of nested aliases can expand into billions of nodes and take the CI runner down
    /// with it. The limits are far above any real manifest and are checked while parsing, so
    /// such a file is refused in milliseconds, with its position.
    ///
    /// ## Example
    /// ```yaml
    /// a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
    /// b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    /// c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    /// # … nine more levels
    /// ```
    ///
    /// Use instead: plain values, or anchors that are reused a handful of times
    /// (`defaults:` exists so that shared settings need no anchors at all).
    pub struct InputLimit {
        code: "BG006",
        name: "input-limit",
        severity: Error,
        scope: File,
        summary: "the file exceeds a size (8 MiB), nesting depth (128) or alias-expansion limit",
        help: "remove the deep nesting or the aliases that expand exponentially",
    }
}

impl Rule for InputLimit {}
