//! Ledger job names -> job ids, as the auditor and the outputs' tally both resolve them.

use super::NONE;
use super::hash::Fast;
use std::collections::HashMap;
use std::sync::Arc;

/// The job id of ledger rows that `--job` leaves out.
pub(crate) const IGNORED: u32 = u32::MAX - 1;

/// A declared name (`service/name` or bare `name`) is its manifest job's index; an
/// undeclared name gets the next id (`n_declared + i`). The auditor and the outputs' tally
/// each keep one; the last name looked up is remembered, since rows of one job tend to
/// follow each other.
#[derive(Clone)]
pub(crate) struct JobNames {
    pub(crate) declared: HashMap<String, usize>,
    n_declared: u32,
    by_name: HashMap<String, u32, Fast>,
    /// Undeclared names in the order they were met.
    undeclared: Vec<String>,
    last: (String, u32),
    /// `--job`: the undeclared names to fold (`None`: all); others map to [`IGNORED`].
    pub(crate) keep: Option<Arc<Vec<String>>>,
}

/// Whether ledger job `name` (`name` or `service/name`) is one of `keep`.
pub(crate) fn selected(name: &str, keep: &[String]) -> bool {
    keep.iter()
        .any(|k| k == name || name.rsplit_once('/').is_some_and(|(_, n)| n == k))
}

impl JobNames {
    pub(crate) fn new(declared: HashMap<String, usize>, n_declared: usize) -> Self {
        JobNames {
            declared,
            n_declared: n_declared as u32,
            by_name: HashMap::default(),
            undeclared: Vec::new(),
            last: (String::new(), NONE),
            keep: None,
        }
    }

    /// The id of `name`, and whether it is an undeclared job met for the first time.
    #[inline]
    pub(crate) fn id(&mut self, name: &str) -> (u32, bool) {
        if self.last.1 != NONE && self.last.0 == name {
            return (self.last.1, false);
        }
        let (id, new) = match self.by_name.get(name) {
            Some(&id) => (id, false),
            None => {
                let (id, new) = match self.declared.get(name) {
                    Some(&m) => (m as u32, false),
                    None if self.keep.as_ref().is_some_and(|k| !selected(name, k)) => {
                        (IGNORED, false)
                    }
                    None => {
                        self.undeclared.push(name.to_owned());
                        (self.n_declared + self.undeclared.len() as u32 - 1, true)
                    }
                };
                self.by_name.insert(name.to_owned(), id);
                (id, new)
            }
        };
        self.last.0.clear();
        self.last.0.push_str(name);
        self.last.1 = id;
        (id, new)
    }

    /// Every ledger job name met (left-out ones included).
    pub(crate) fn seen(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// The name of an undeclared job's id.
    pub(crate) fn undeclared_name(&self, id: u32) -> Option<&str> {
        let i = id.checked_sub(self.n_declared)? as usize;
        self.undeclared.get(i).map(String::as_str)
    }
}
