//! `watch --format json`: the figures of one refresh (section "watch" of
//! `docs/watch.md`). One object with `--once`; one per refresh, each on its own line,
//! without it.

use crate::live::figures::Snapshot;

/// The refresh as one indented JSON document.
pub fn render(snap: &Snapshot) -> String {
    let mut s =
        serde_json::to_string_pretty(snap).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// The refresh as one JSON line.
pub fn line(snap: &Snapshot) -> String {
    let mut s = serde_json::to_string(snap).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
