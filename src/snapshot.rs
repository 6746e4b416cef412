//! Input snapshots as the model knows them (SPEC 2, 9): a slot's compact timestamp, a
//! file's `sha256:` digest, and paths confined to the snapshot root. The audit checks
//! snapshots against the ledger (AU202-AU204); `run` records the digest at `start`; both
//! use these, so what `run` wrote is what the audit compares.

use jiff::Timestamp;
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};

pub struct SnapshotCheck {
    pub(crate) root: PathBuf,
    pub(crate) canon_root: Option<PathBuf>,
}

/// `{scheduled_at_compact}`: `20260301T020000Z`.
pub fn compact(t: Timestamp) -> String {
    t.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// `sha256:<hex>` of bytes.
pub fn digest(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in d.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

impl SnapshotCheck {
    pub fn new(root: PathBuf) -> SnapshotCheck {
        let canon_root = root.canonicalize().ok();
        SnapshotCheck { root, canon_root }
    }

    /// Confines `rel` to the root; `Err` says why it is refused.
    pub fn confine(&self, rel: &str) -> Result<PathBuf, String> {
        let p = Path::new(rel);
        for c in p.components() {
            match c {
                Component::ParentDir => return Err(format!("`{rel}` contains `..`")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(format!("`{rel}` is absolute"));
                }
                _ => {}
            }
        }
        let full = self.root.join(p);
        if let (Some(root), Ok(canon)) = (&self.canon_root, full.canonicalize())
            && !canon.starts_with(root)
        {
            return Err(format!("`{rel}` leads outside the snapshot root"));
        }
        Ok(full)
    }
}
