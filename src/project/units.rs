//! Deploy units (docs/deploy-units.md): the parts of a tree that are deployed separately.
//! Two registrations in separate units are never deployed together unless the tree says
//! so, so they are no duplicate of each other (BG601).
//!
//! A unit is the folder of the nearest enclosing marker (a kustomization, a Helm chart's
//! `Chart.yaml`, a PM2 ecosystem file, `package.json`, `.git`), else the folder lint was
//! given. Inside a test, fixture or example folder ([`FIXTURE_DIRS`]) every file is a unit
//! of its own (linters' fixtures hold one case per file: eight copies of one CronJob are
//! eight cases), unless a marker folder below groups some files (an example with its own
//! kustomization). Kustomizations tie the units they include (`resources`, `bases`,
//! `components`, followed transitively) into one deploy set; a Helm chart under another
//! chart's `charts/` folder is deployed with it. Manifests tie units too (see
//! [`super::Analysis`]).
//!
//! Detection reads only the folders between a file and the root it was found under (their
//! entries, cached per folder) and each kustomization once.

use crate::manifest::yaml::{self, Node, Value};
use crate::sources::kubernetes::KUSTOMIZATION_NAMES;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Folder names of tests, fixtures and examples: never deployed as they are.
pub const FIXTURE_DIRS: &[&str] = &[
    "test",
    "tests",
    "__tests__",
    "testdata",
    "test-data",
    "test_data",
    "fixtures",
    "fixture",
    "__fixtures__",
    "examples",
    "example",
    "samples",
    "sample",
];

/// What makes a folder a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    /// The folder lint was given (or, for files named on the command line, the current
    /// directory): no marker between it and the file.
    Root,
    Kustomization,
    HelmChart,
    Pm2,
    Package,
    Git,
    /// One file inside a test, fixture or example folder.
    FixtureFile,
}

impl UnitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Root => "folder",
            UnitKind::Kustomization => "kustomization",
            UnitKind::HelmChart => "helm chart",
            UnitKind::Pm2 => "pm2 ecosystem",
            UnitKind::Package => "package.json",
            UnitKind::Git => "git repository",
            UnitKind::FixtureFile => "fixture file",
        }
    }
}

/// One deploy unit.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Its folder (a file for [`UnitKind::FixtureFile`]), absolute.
    pub root: PathBuf,
    /// As paths are shown (relative to the current directory when under it).
    pub display: String,
    pub kind: UnitKind,
    /// The test, fixture or example folder it lies in (shown path): not deployed as is.
    pub fixture: Option<String>,
    /// Units its kustomization (or, for a chart, its `charts/` folder) brings in directly.
    pub includes: Vec<usize>,
}

/// Units deployed together, and what ties them (said in BG601's message).
#[derive(Clone, Debug)]
pub struct DeploySet {
    /// Sorted, distinct, at least two.
    pub units: Vec<usize>,
    /// `kustomization `overlays/prod/kustomization.yaml``, `manifest `billing.batchguard.yaml``.
    pub tie: String,
}

/// Every unit of a lint run and the unit of each file read.
#[derive(Clone, Debug, Default)]
pub struct Units {
    pub units: Vec<Unit>,
    /// For each file of the run (by index), its unit.
    pub of_file: Vec<usize>,
    /// Deploy sets the tree declares (kustomizations, charts with subcharts).
    pub sets: Vec<DeploySet>,
    /// Files a kustomization names as patches (absolute), with that kustomization's path
    /// as shown: a CronJob there is a patch of a base, its schedule comes from the base.
    pub patches: HashMap<PathBuf, String>,
    /// Each file's absolute path (by index), to find it among `patches`.
    paths: Vec<PathBuf>,
}

impl Units {
    /// The unit of a file of the run; `None` when units were not detected (every place is
    /// then in one unit).
    pub fn of(&self, file: usize) -> Option<usize> {
        self.of_file.get(file).copied()
    }

    /// The kustomization (as shown) that names a file of the run as a patch.
    pub fn patch_of(&self, file: usize) -> Option<&str> {
        self.paths
            .get(file)
            .and_then(|p| self.patches.get(p))
            .map(String::as_str)
    }

    /// More than one unit holds a file that was read: worth showing.
    pub fn several(&self) -> bool {
        let mut seen: Vec<usize> = self.of_file.clone();
        seen.sort_unstable();
        seen.dedup();
        seen.len() > 1
    }

    /// Detects the unit of each file of the run, in order.
    pub fn detect(files: &[FileOrigin]) -> Units {
        let mut d = Detect::default();
        for f in files {
            let path = absolute(&f.path);
            let (bound, given) = (absolute(&f.bound), absolute(&f.given));
            if !d.bounds.contains(&bound) {
                d.bounds.push(bound.clone());
            }
            let u = d.unit_of_file(&path, &bound, &given);
            d.out.of_file.push(u);
            d.out.paths.push(path);
        }
        d.link();
        d.out
    }
}

/// Where a file of the run comes from, as unit detection needs it.
#[derive(Clone, Debug)]
pub struct FileOrigin {
    /// The file as read.
    pub path: PathBuf,
    /// The highest folder a marker is looked for in, and the unit of a file without one:
    /// the current directory when the path given is under it, else the path given.
    pub bound: PathBuf,
    /// Test, fixture and example folders count below this folder only: the folder lint
    /// was given (`lint tests/deploy` lints a deployment), or for a file named on the
    /// command line, `bound` (pre-commit names `tests/fixtures/x.yaml`).
    pub given: PathBuf,
}

fn absolute(p: &Path) -> PathBuf {
    normalize(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// `a/b/../c` as `a/c`, lexically (a kustomization's `../../base`).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            c => out.push(c.as_os_str()),
        }
    }
    out
}

#[derive(Default)]
struct Detect {
    out: Units,
    by_root: HashMap<PathBuf, usize>,
    markers: HashMap<PathBuf, Option<(UnitKind, Option<PathBuf>)>>,
    /// The bounds of the files of the run.
    bounds: Vec<PathBuf>,
}

impl Detect {
    /// What marks `dir` as a unit, and its kustomization file when it has one.
    fn marker(&mut self, dir: &Path) -> Option<(UnitKind, Option<PathBuf>)> {
        if let Some(m) = self.markers.get(dir) {
            return m.clone();
        }
        let m = marker_of(dir);
        self.markers.insert(dir.to_path_buf(), m.clone());
        m
    }

    fn unit(&mut self, root: &Path, kind: UnitKind, fixture: Option<&Path>) -> usize {
        if let Some(&u) = self.by_root.get(root) {
            return u;
        }
        self.out.units.push(Unit {
            root: root.to_path_buf(),
            display: crate::text::display_path(root),
            kind,
            fixture: fixture.map(crate::text::display_path),
            includes: Vec::new(),
        });
        let u = self.out.units.len() - 1;
        self.by_root.insert(root.to_path_buf(), u);
        u
    }

    fn unit_of_file(&mut self, path: &Path, root: &Path, given: &Path) -> usize {
        // Folders from the file's up to the root, deepest first.
        let dirs: Vec<PathBuf> = match path.strip_prefix(root) {
            Ok(_) => path
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root))
                .map(Path::to_path_buf)
                .collect(),
            Err(_) => path.parent().map(Path::to_path_buf).into_iter().collect(),
        };
        // The outermost test/fixture/example folder below the folder given.
        let fixture = dirs
            .iter()
            .rev()
            .filter(|d| d.as_path() != given && d.starts_with(given))
            .find(|d| {
                d.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| FIXTURE_DIRS.contains(&n))
            })
            .cloned();
        let mut marked = None;
        for d in &dirs {
            if let Some(fx) = &fixture
                && !d.starts_with(fx)
            {
                break;
            }
            if let Some((kind, _)) = self.marker(d) {
                marked = Some((d.clone(), kind));
                break;
            }
        }
        match (marked, &fixture) {
            (Some((dir, kind)), fx) => self.unit(&dir, kind, fx.as_deref()),
            (None, Some(fx)) => self.unit(path, UnitKind::FixtureFile, Some(fx)),
            (None, None) => {
                let top = dirs.last().cloned().unwrap_or_else(|| root.to_path_buf());
                self.unit(&top, UnitKind::Root, None)
            }
        }
    }

    /// The unit a kustomization entry (a folder or a file) belongs to.
    fn unit_of_target(&mut self, target: &Path, within: &Path) -> usize {
        if target.is_dir() {
            if let Some((kind, _)) = self.marker(target) {
                return self.unit(target, kind, None);
            }
            // A plain folder: its files' unit.
            return self.unit_of_file(&target.join("_"), within, within);
        }
        self.unit_of_file(target, within, within)
    }

    /// Reads every kustomization unit's includes and patches, chart nesting, and builds
    /// the deploy sets.
    fn link(&mut self) {
        let mut i = 0;
        // Units found through includes are linked too (the list grows while walking it).
        while i < self.out.units.len() {
            let unit = self.out.units[i].clone();
            match unit.kind {
                UnitKind::Kustomization => self.read_kustomization(i, &unit.root),
                UnitKind::HelmChart => {
                    // `parent/charts/<sub>`: a subchart deploys with its parent chart.
                    let parent = unit
                        .root
                        .parent()
                        .filter(|p| p.file_name().is_some_and(|n| n == "charts"))
                        .and_then(Path::parent)
                        .map(Path::to_path_buf);
                    if let Some(p) = parent
                        && matches!(self.marker(&p), Some((UnitKind::HelmChart, _)))
                    {
                        let fixture = self.out.units[i].fixture.clone();
                        let pu = self.unit(&p, UnitKind::HelmChart, None);
                        if self.out.units[pu].fixture.is_none() {
                            self.out.units[pu].fixture = fixture;
                        }
                        self.out.units[pu].includes.push(i);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        for u in 0..self.out.units.len() {
            let mut seen = vec![u];
            let mut stack = self.out.units[u].includes.clone();
            while let Some(v) = stack.pop() {
                if !seen.contains(&v) {
                    seen.push(v);
                    stack.extend(self.out.units[v].includes.iter().copied());
                }
            }
            if seen.len() < 2 {
                continue;
            }
            seen.sort_unstable();
            let unit = &self.out.units[u];
            let tie = match unit.kind {
                UnitKind::Kustomization => {
                    let file = marker_of(&unit.root)
                        .and_then(|(_, f)| f)
                        .map_or_else(|| unit.display.clone(), |f| crate::text::display_path(&f));
                    format!("kustomization `{file}`")
                }
                UnitKind::HelmChart => format!("helm chart `{}` (its subcharts)", unit.display),
                _ => format!("`{}`", unit.display),
            };
            self.out.sets.push(DeploySet { units: seen, tie });
        }
    }

    fn read_kustomization(&mut self, unit: usize, dir: &Path) {
        let Some((_, Some(file))) = self.marker(dir) else {
            return;
        };
        // A kustomization that cannot be read ties nothing; it is listed as not read.
        let Ok(text) = std::fs::read_to_string(&file) else {
            return;
        };
        let Ok(root) = yaml::parse(&text) else {
            return;
        };
        let shown = crate::text::display_path(&file);
        // Files and folders it brings in. A remote (URL) entry is outside the tree.
        let within = self.within(dir);
        for key in ["resources", "bases", "components"] {
            for entry in strings(crate::sources::get(&root, key)) {
                if entry.contains("://") || entry.starts_with("git@") || entry.contains("?ref=") {
                    continue;
                }
                let target = normalize(&dir.join(&entry));
                if !target.exists() {
                    continue;
                }
                let v = self.unit_of_target(&target, &within);
                if v != unit && !self.out.units[unit].includes.contains(&v) {
                    self.out.units[unit].includes.push(v);
                }
            }
        }
        // Patches: `patchesStrategicMerge: [file]`, `patches`/`patchesJson6902`: `[{path}]`.
        for key in ["patchesStrategicMerge", "patches", "patchesJson6902"] {
            let Some(list) = crate::sources::get(&root, key) else {
                continue;
            };
            let Value::Seq(items) = &list.value else {
                continue;
            };
            for item in items {
                let path = match &item.value {
                    Value::Str(s) => Some(s.clone()),
                    _ => crate::sources::get(item, "path").and_then(|p| match &p.value {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    }),
                };
                // An inline patch (a YAML text with newlines) names no file.
                if let Some(p) = path.filter(|p| !p.contains('\n')) {
                    self.out
                        .patches
                        .insert(normalize(&dir.join(p)), shown.clone());
                }
            }
        }
    }

    /// The bound of the unit walk for a target of a kustomization in `dir`: the widest
    /// bound of the run's files that holds `dir`, else `dir` itself.
    fn within(&self, dir: &Path) -> PathBuf {
        self.bounds
            .iter()
            .filter(|b| dir.starts_with(b))
            .min_by_key(|b| b.components().count())
            .cloned()
            .unwrap_or_else(|| dir.to_path_buf())
    }
}

/// The string items of a YAML list.
fn strings(node: Option<&Node>) -> Vec<String> {
    match node.map(|n| &n.value) {
        Some(Value::Seq(items)) => items
            .iter()
            .filter_map(|n| match &n.value {
                Value::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn marker_of(dir: &Path) -> Option<(UnitKind, Option<PathBuf>)> {
    for name in KUSTOMIZATION_NAMES {
        let f = dir.join(name);
        if f.is_file() {
            return Some((UnitKind::Kustomization, Some(f)));
        }
    }
    if dir.join("Chart.yaml").is_file() {
        return Some((UnitKind::HelmChart, None));
    }
    if dir.join(".git").exists() {
        return Some((UnitKind::Git, None));
    }
    if dir.join("package.json").is_file() {
        return Some((UnitKind::Package, None));
    }
    let pm2 = std::fs::read_dir(dir).ok()?.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(crate::sources::pm2::is_pm2_name)
            && e.file_type().is_ok_and(|t| t.is_file())
    });
    pm2.then_some((UnitKind::Pm2, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(paths: &[&PathBuf], root: &Path) -> Vec<FileOrigin> {
        paths
            .iter()
            .map(|p| FileOrigin {
                path: (*p).clone(),
                bound: root.to_path_buf(),
                given: root.to_path_buf(),
            })
            .collect()
    }

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn fixture_files_are_units_of_their_own_and_markers_group() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        let a = write(&root, "testdata/a.yaml", "");
        let b = write(&root, "testdata/b.yaml", "");
        let c = write(
            &root,
            "examples/app/kustomization.yaml",
            "resources: [c.yaml]\n",
        );
        let c1 = write(&root, "examples/app/c.yaml", "");
        let c2 = write(&root, "examples/app/d.yaml", "");
        let top = write(&root, "deploy/crontab", "");
        let files = origins(&[&a, &b, &c1, &c2, &top], &root);
        let u = Units::detect(&files);
        assert_ne!(u.of_file[0], u.of_file[1]);
        assert_eq!(u.of_file[2], u.of_file[3]);
        assert_eq!(u.units[u.of_file[2]].kind, UnitKind::Kustomization);
        assert!(u.units[u.of_file[0]].fixture.is_some());
        assert!(u.units[u.of_file[4]].fixture.is_none());
        assert_eq!(u.units[u.of_file[4]].kind, UnitKind::Root);
        let _ = c;
    }

    #[test]
    fn a_kustomization_ties_what_it_includes_and_names_its_patches() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        let base = write(&root, "base/kustomization.yaml", "resources: [cj.yaml]\n");
        let cj = write(&root, "base/cj.yaml", "");
        write(
            &root,
            "prod/kustomization.yaml",
            "resources:\n  - ../base\npatches:\n  - path: patch.yaml\n    target: {kind: CronJob}\npatchesStrategicMerge: [more.yaml]\n",
        );
        let patch = write(&root, "prod/patch.yaml", "");
        let other = write(&root, "stage/kustomization.yaml", "resources: [x.yaml]\n");
        let x = write(&root, "stage/x.yaml", "");
        let files = origins(&[&cj, &patch, &x], &root);
        let u = Units::detect(&files);
        let (b, p, s) = (u.of_file[0], u.of_file[1], u.of_file[2]);
        assert!(
            u.sets
                .iter()
                .any(|set| set.units.contains(&b) && set.units.contains(&p))
        );
        assert!(
            !u.sets
                .iter()
                .any(|set| set.units.contains(&s) && set.units.len() > 1)
        );
        assert!(u.patches.contains_key(&absolute(&patch)));
        assert!(
            u.patches
                .contains_key(&absolute(&root.join("prod/more.yaml")))
        );
        let _ = (base, other);
    }

    #[test]
    fn subcharts_deploy_with_their_chart_and_a_git_file_marks_a_checkout() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        write(&root, "chart/Chart.yaml", "name: app\n");
        let parent = write(&root, "chart/templates/cj.yaml", "");
        write(&root, "chart/charts/worker/Chart.yaml", "name: worker\n");
        let sub = write(&root, "chart/charts/worker/templates/cj.yaml", "");
        // A worktree's or submodule's `.git` is a file.
        write(&root, "vendor/lib/.git", "gitdir: ../../.git/modules/lib\n");
        let vendored = write(&root, "vendor/lib/cron.d/job", "");
        let u = Units::detect(&origins(&[&parent, &sub, &vendored], &root));
        let (p, s, v) = (u.of_file[0], u.of_file[1], u.of_file[2]);
        assert_ne!(p, s);
        assert!(u.sets.iter().any(|set| set.units == [p.min(s), p.max(s)]));
        assert_eq!(u.units[v].kind, UnitKind::Git);
    }

    #[test]
    fn test_folders_count_below_the_folder_given_only() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        let a = write(&root, "tests/deploy/a.yaml", "");
        let b = write(&root, "tests/deploy/b.yaml", "");
        let given = root.join("tests/deploy");
        let files: Vec<FileOrigin> = [&a, &b]
            .iter()
            .map(|p| FileOrigin {
                path: (*p).clone(),
                bound: root.clone(),
                given: given.clone(),
            })
            .collect();
        let u = Units::detect(&files);
        // `lint tests/deploy`: a deployment, one unit, no fixture.
        assert_eq!(u.of_file[0], u.of_file[1]);
        assert!(u.units[u.of_file[0]].fixture.is_none());
        // Walked from the root, `tests/` is a test folder: a unit per file.
        let u = Units::detect(&origins(&[&a, &b], &root));
        assert_ne!(u.of_file[0], u.of_file[1]);
    }
}
