//! The one list of every lint rule and audit check. The lists themselves belong to the
//! analyses that run them (`lint::rules`, `audit::checks`); the crate root chains them
//! into one [`Registry`] (`crate::REGISTRY`), so neither analysis imports the other.

use super::RuleMeta;
use std::sync::OnceLock;

/// A part of the registry: appends its metadata, in its own order.
pub type Part = fn(&mut Vec<&'static RuleMeta>);

pub struct Registry {
    parts: &'static [Part],
    all: OnceLock<Vec<&'static RuleMeta>>,
}

impl Registry {
    /// The parts in the order `batchguard rules` lists them.
    pub const fn new(parts: &'static [Part]) -> Self {
        Registry {
            parts,
            all: OnceLock::new(),
        }
    }

    fn list(&self) -> &[&'static RuleMeta] {
        self.all.get_or_init(|| {
            let mut all = Vec::new();
            for part in self.parts {
                part(&mut all);
            }
            all
        })
    }

    /// Every rule, then every check.
    pub fn all(&self) -> impl Iterator<Item = &'static RuleMeta> + '_ {
        self.list().iter().copied()
    }

    /// By code (`BG202`, any case) or name (`lock-ttl-too-short`).
    pub fn find(&self, code_or_name: &str) -> Option<&'static RuleMeta> {
        self.all().find(|m| m.is(code_or_name))
    }
}
