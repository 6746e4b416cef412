//! Which processes run each in-process schedule (SPEC 3.7): entry files of the runners,
//! followed through relative imports; nested runners multiply; of several independent
//! runners the largest is named.

use super::runners::{Runner, Starts, normalize};
use crate::sources::Registration;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// Extensions a specifier may leave out, in Node's and TypeScript's order.
const EXTENSIONS: [&str; 8] = ["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// A module read in the run: its file index, path and relative imports.
pub struct Module {
    pub file: usize,
    pub path: PathBuf,
    pub imports: Vec<String>,
}

/// Runners nested deeper than this are not followed (a loop between them).
const MAX_NESTING: usize = 8;

struct Index {
    by_path: HashMap<PathBuf, usize>,
}

impl Index {
    /// The module `p` names, as Node and TypeScript resolve it: exact, with an extension,
    /// a `.js` written for its `.ts` source, or a folder's `index`.
    fn resolve(&self, p: &Path) -> Option<usize> {
        if let Some(&m) = self.by_path.get(p) {
            return Some(m);
        }
        let s = p.to_string_lossy();
        let stem = ["js", "jsx", "mjs", "cjs"]
            .iter()
            .find_map(|e| s.strip_suffix(&format!(".{e}")))
            .unwrap_or(&s)
            .to_owned();
        for base in [s.as_ref(), stem.as_str()] {
            for ext in EXTENSIONS {
                if let Some(&m) = self.by_path.get(Path::new(&format!("{base}.{ext}"))) {
                    return Some(m);
                }
            }
        }
        EXTENSIONS
            .iter()
            .find_map(|ext| self.by_path.get(&p.join(format!("index.{ext}"))).copied())
    }

    /// An entry under a `tsconfig.json`'s `outDir` is its source under `rootDir` (a
    /// `dist/` entry of a TypeScript app, whose build output is not read).
    fn resolve_entry(&self, p: &Path) -> Option<usize> {
        if let Some(m) = self.resolve(p) {
            return Some(m);
        }
        let mut dir = p.parent();
        for _ in 0..MAX_NESTING {
            let d = dir?;
            if let Ok(text) = std::fs::read_to_string(d.join("tsconfig.json")) {
                let (out_dir, root_dir) = super::parse::tsconfig_dirs(&text);
                let out = normalize(&d.join(out_dir.as_deref().unwrap_or("dist")));
                let rel = p.strip_prefix(&out).ok()?;
                let roots: Vec<String> = match root_dir {
                    Some(r) => vec![r],
                    None => vec!["src".into(), ".".into()],
                };
                return roots
                    .iter()
                    .find_map(|r| self.resolve(&normalize(&d.join(r).join(rel))));
            }
            dir = d.parent();
        }
        None
    }
}

/// Fills each in-process registration's instances, runner and command (its job's module,
/// relative to the project folder: the nearest with a `package.json`).
pub fn link(
    regs: &mut [Registration],
    modules: &[Module],
    runners: &[Runner],
    hpas: &[(String, u64)],
    roots: &[PathBuf],
) {
    let roots: Vec<PathBuf> = roots
        .iter()
        .map(|r| {
            let r = normalize(r);
            if r.is_file() {
                r.parent().map_or(r.clone(), Path::to_path_buf)
            } else {
                r
            }
        })
        .collect();
    let index = Index {
        by_path: modules
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect(),
    };
    let edges: Vec<Vec<usize>> = modules
        .iter()
        .map(|m| {
            let dir = m.path.parent().unwrap_or(Path::new("/"));
            m.imports
                .iter()
                .filter_map(|s| index.resolve(&normalize(&dir.join(s))))
                .collect()
        })
        .collect();
    let runners: Vec<Runner> = runners
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(w) = &r.workload
                && let Some((_, min)) = hpas.iter().find(|(t, _)| t == w)
            {
                r.instances = *min;
                r.label.push_str(&format!(" (its HPA's minReplicas {min})"));
            } else if r.workload.is_some() {
                r.label.push_str(&format!(
                    " ({} replica{})",
                    r.instances,
                    if r.instances == 1 { "" } else { "s" }
                ));
            }
            r
        })
        .collect();
    // Per module: (processes, what runs it) of the largest runner, and how many reach it.
    let mut best: Vec<Option<(u64, String)>> = vec![None; modules.len()];
    let mut reached_by: Vec<usize> = vec![0; modules.len()];
    for r in &runners {
        let Starts::Script(entry) = &r.starts else {
            continue;
        };
        let Some(start) = index.resolve_entry(entry) else {
            continue;
        };
        let (count, label) = effective(r, &runners, 0);
        let mut seen = HashSet::from([start]);
        let mut queue = VecDeque::from([start]);
        while let Some(m) = queue.pop_front() {
            reached_by[m] += 1;
            if best[m].as_ref().is_none_or(|(n, _)| count > *n) {
                best[m] = Some((count, label.clone()));
            }
            for &n in &edges[m] {
                if seen.insert(n) {
                    queue.push_back(n);
                }
            }
        }
    }
    let by_file: HashMap<usize, usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.file, i))
        .collect();
    let mut project_dirs: HashMap<PathBuf, PathBuf> = HashMap::new();
    for reg in regs.iter_mut() {
        let Some(&m) = by_file.get(&reg.file) else {
            continue;
        };
        let Some(code) = reg.code.as_mut() else {
            continue;
        };
        if let Some((n, label)) = &best[m] {
            reg.instances = *n;
            code.runner = Some(label.clone());
            code.other_runners = reached_by[m].saturating_sub(1);
        }
        let dir = modules[m].path.parent().unwrap_or(Path::new("/"));
        let job_module = code
            .callback_module
            .as_ref()
            .and_then(|s| index.resolve(&normalize(&dir.join(s))))
            .unwrap_or(m);
        let path = &modules[job_module].path;
        let root = project_dir(path, &roots, &mut project_dirs);
        let rel = path.strip_prefix(&root).unwrap_or(path);
        reg.command = vec!["node".to_owned(), rel.to_string_lossy().into_owned()];
    }
}

/// Processes a runner starts, counting what starts it, and how a message names the chain.
fn effective(r: &Runner, all: &[Runner], depth: usize) -> (u64, String) {
    let Some(within) = &r.within else {
        return (r.instances, r.label.clone());
    };
    if depth >= MAX_NESTING {
        return (r.instances, r.label.clone());
    }
    let outer = all
        .iter()
        .filter(|q| &q.starts == within)
        .map(|q| effective(q, all, depth + 1))
        .max_by_key(|(n, _)| *n);
    match outer {
        Some((n, label)) if n > 1 => (
            r.instances.saturating_mul(n),
            format!("{}, in each of {n} processes of {label}", r.label),
        ),
        Some((_, label)) => (r.instances, format!("{}, started by {label}", r.label)),
        None => (r.instances, r.label.clone()),
    }
}

/// The nearest folder at or above `file`'s with a `package.json`, else the walked root
/// it is under, else the file's own folder.
fn project_dir(file: &Path, roots: &[PathBuf], cache: &mut HashMap<PathBuf, PathBuf>) -> PathBuf {
    let start = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    if let Some(d) = cache.get(&start) {
        return d.clone();
    }
    let found = start
        .ancestors()
        .find(|d| d.join("package.json").is_file())
        .map(Path::to_path_buf)
        .or_else(|| roots.iter().find(|r| start.starts_with(r)).cloned())
        .unwrap_or_else(|| start.clone());
    cache.insert(start, found.clone());
    found
}
