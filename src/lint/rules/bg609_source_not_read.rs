use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a registration source that batchguard found but could not read, once per
    /// file, with the reason:
    /// - a PM2 `ecosystem.config.js` with no `node` on PATH, one whose evaluation failed,
    ///   timed out (5 s) or printed more than 4 MiB, an ecosystem file without `apps`;
    /// - a Helm / Go template (`{{ … }}`): its YAML documents are not YAML, or not their
    ///   final values, until rendered. The finding is on the first template and says how
    ///   many documents were not read;
    /// - crontab lines that are neither a comment, an env line nor a job (too few schedule
    ///   fields, a user column without a command): the first such line, with the numbers
    ///   of the others.
    ///
    /// ## Why it matters
    /// The source article's pre-deploy check is "no job is registered twice". A source
    /// that was not read is a place where the second registration can hide, so it is
    /// reported instead of being skipped in silence.
    ///
    /// ## Example
    /// ```text
    /// $ PATH=/usr/bin batchguard lint deploy/   # no node here
    /// warning[BG609]: PM2 ecosystem file not read: node is not on PATH
    /// ```
    ///
    /// Use instead: run lint where node (20+) is installed, or keep the apps in
    /// `ecosystem.config.json`, which needs no evaluation; lint the rendered output of a
    /// chart (`helm template chart/ > rendered.yaml`).
    pub struct SourceNotRead {
        code: "BG609",
        name: "source-not-read",
        severity: Warning,
        scope: File,
        summary: "a registration source could not be read (a PM2 `.js` file with no `node` on PATH, an evaluation error or timeout, a Helm template): duplicates may hide there. One finding per file, with the reason",
        help: "make the source readable (install node, fix the file) so duplicates cannot hide in it",
    }
}

impl Rule for SourceNotRead {}
