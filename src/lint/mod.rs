//! `batchguard lint`: find the files, read them, run the rules, apply suppressions.
//! Rules never print and reports never decide: this module returns findings only.

pub mod cross;
pub mod placeholder;
pub mod registrations;
pub mod rule;
pub mod rules;
pub mod suppress;

use crate::config::Settings;
use crate::finding::{Finding, Location, RuleMeta, Scope, Severity};
use crate::manifest::Issue;
use crate::manifest::load::{self, Loaded};
use crate::manifest::model::{Field, Job, Manifest};
use crate::schedule::{CronError, Dialect, Schedule};
use crate::text::{SourceFile, Spanned};
use jiff::SignedDuration;
use jiff::tz::TimeZone;
use rayon::prelude::*;
use rule::Emitter;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What a schedule rule ([`Scope::Schedule`]) sees: a schedule, its zone and dialect,
/// from a manifest job or a registration alike, so those rules are written once and
/// run on both without the one posing as the other.
pub struct ScheduleCx<'a> {
    /// The job's name as messages show it.
    pub name: &'a str,
    /// `schedule` as written; `None` when absent or not a string (BG003/BG004).
    pub expr: Option<&'a Spanned<String>>,
    /// `timezone` as written; `None` when absent (UTC) or not a string.
    pub zone: Option<&'a Spanned<String>>,
    /// False for a job with `enabled: false` or a suspended registration: not scheduled.
    pub enabled: bool,
    /// The cron dialect the schedule is read in (SPEC 4).
    pub dialect: Dialect,
    pub now: jiff::Timestamp,
    pub text: &'a str,
    /// `expr` as `dialect` reads it, parsed once for every schedule rule.
    pub schedule: Option<Result<Schedule, CronError>>,
    /// The time zone: UTC when `timezone` is absent, `None` when it names no IANA zone
    /// (BG105) or is not a string.
    pub tz: Option<TimeZone>,
}

impl ScheduleCx<'_> {
    /// The parsed schedule and its zone, when both are valid.
    pub fn schedule_in_zone(&self) -> Option<(&Schedule, &TimeZone)> {
        match (&self.schedule, &self.tz) {
            (Some(Ok(s)), Some(tz)) => Some((s, tz)),
            _ => None,
        }
    }
}

/// What a per-job rule sees.
pub struct JobCx<'a> {
    pub job: &'a Job,
    pub manifest: &'a Manifest,
    pub service: &'a str,
    pub settings: &'a Settings,
    /// The job's schedule: its dialect is its effective deployment's scheduler
    /// (`jobs[].deployment` over the manifest's `deployment`, SPEC 2), else the
    /// platform's default (SPEC 4).
    pub sched: ScheduleCx<'a>,
    /// The shortest gap between slots over the 12 months from `now`, computed on first use.
    gap_12m: OnceLock<Option<SignedDuration>>,
}

impl JobCx<'_> {
    pub fn job_name(&self) -> &str {
        self.job
            .name
            .value()
            .map_or("(unnamed job)", String::as_str)
    }

    /// The shortest real-time gap between slots over the 12 months from `now`, DST
    /// included (BG104, BG408 share it); `None` without a valid schedule and zone or with
    /// fewer than two slots.
    pub fn shortest_gap_12m(&self) -> Option<SignedDuration> {
        *self.gap_12m.get_or_init(|| {
            let (s, tz) = self.sched.schedule_in_zone()?;
            s.shortest_gap(
                tz,
                self.sched.now,
                crate::schedule::year_after(self.sched.now),
            )
        })
    }
}

/// The rule a problem found while reading belongs to: the one place reading issues
/// become rule codes, exhaustive so that a new kind must be given its rule.
pub fn rule_of(issue: Issue) -> &'static RuleMeta {
    use rules::*;
    match issue {
        Issue::YamlSyntax => &bg001_yaml_syntax::YamlSyntax::META,
        Issue::UnknownField => &bg002_unknown_field::UnknownField::META,
        Issue::MissingField => &bg003_missing_field::MissingField::META,
        Issue::InvalidValue => &bg004_invalid_value::InvalidValue::META,
        Issue::DuplicateKey => &bg005_duplicate_key::DuplicateKey::META,
        Issue::InputLimit => &bg006_input_limit::InputLimit::META,
        Issue::SourceNotRead => &bg609_source_not_read::SourceNotRead::META,
        Issue::CrontabFormat => &bg610_crontab_format::CrontabFormat::META,
        Issue::InvalidCron => &bg101_invalid_cron::InvalidCron::META,
    }
}

/// What a whole-file rule sees.
pub struct FileCx<'a> {
    pub root: &'a crate::manifest::yaml::Node,
    pub text: &'a str,
}

/// Which rules a reading runs. Lint runs every rule; `graph` builds the same model but
/// runs only the rules declared to mask values ([`RuleMeta::masks`]), so that its picture
/// redacts every secret lint would, and judges nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    All,
    Masking,
}

impl Checks {
    /// Whether a finding of `meta`'s rule is wanted: one test for the rules, the loader's
    /// issues and the placeholder pass alike.
    fn wants(self, meta: &RuleMeta) -> bool {
        self == Checks::All || meta.masks
    }

    /// The per-file rules this reading runs.
    fn rules(self) -> impl Iterator<Item = &'static dyn rule::Rule> {
        rules::all()
            .iter()
            .copied()
            .filter(move |r| self.wants(r.meta()))
    }
}

pub struct LintOptions {
    pub paths: Vec<PathBuf>,
    pub settings: Settings,
    pub now: jiff::Timestamp,
}

/// What a file was read as (SPEC 8 `summary.sources`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    Manifest,
    Source(crate::sources::SourceKind),
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Manifest => "manifest",
            FileKind::Source(k) => k.as_str(),
        }
    }
}

/// What one file read gave, for `lint --list-files` and the summary.
#[derive(Clone, Debug)]
pub struct FileRead {
    pub kind: FileKind,
    /// Jobs a manifest declares.
    pub jobs: usize,
    /// Registrations a source holds.
    pub registrations: usize,
    /// What it holds that registers nothing (a PM2 restart schedule).
    pub notes: Vec<String>,
    /// Jobs it starts at boot (`@reboot` crontab lines): listed, never a schedule.
    pub boot: Vec<String>,
}

/// A deploy unit as `lint --list-files` shows it (docs/deploy-units.md).
#[derive(Clone, Debug)]
pub struct UnitShown {
    pub display: String,
    pub kind: &'static str,
    /// One file of a test, fixture or example folder (a unit of its own).
    pub fixture_file: bool,
    /// The test, fixture or example folder it lies in.
    pub fixture: Option<String>,
    /// The files read in it.
    pub files: Vec<String>,
    /// What ties it to other units, and those units.
    pub ties: Vec<(String, Vec<String>)>,
}

/// A file seen but not read, and why (SPEC 3.6 "What was read").
#[derive(Clone, Debug)]
pub struct NotRead {
    pub display: String,
    pub reason: String,
}

/// The result of a lint run: every file read, every finding (suppressed ones included,
/// marked), and the paths that could not be read at all.
#[derive(Default)]
pub struct LintRun {
    pub files: Vec<SourceFile>,
    /// For each of `files`, what it was read as and what it gave.
    pub read: Vec<FileRead>,
    /// Files seen (named, or found by their name while walking) but not read: no source.
    pub not_read: Vec<NotRead>,
    /// Hidden files and folders the walk skipped (listed in `not_read` too); `--hidden`
    /// walks them.
    pub hidden_skipped: usize,
    pub findings: Vec<Finding>,
    /// Jobs: every manifest job, and the registrations tied to none (their duplicates
    /// and tied places counted once): [`jobs_count`].
    pub jobs: usize,
    pub registrations: usize,
    pub unreadable: Vec<(PathBuf, String)>,
    /// Manifest jobs and registrations, for the cross-file rules and `batchguard graph`.
    pub project: crate::project::Project,
    /// Deploy units tied together (the tree's and the manifests'), for `--list-files`.
    pub deploy_sets: Vec<crate::project::DeploySet>,
}

impl LintRun {
    /// The deploy units that hold a file read, in path order of their first file, each with
    /// the files it holds and what ties it to other units (`tie`, the other units shown).
    /// Empty when every file is in one unit.
    pub fn units(&self) -> Vec<UnitShown> {
        let units = &self.project.units;
        if !units.several() {
            return Vec::new();
        }
        let mut out: Vec<UnitShown> = Vec::new();
        let mut index: std::collections::HashMap<usize, usize> = Default::default();
        for (file, &u) in units.of_file.iter().enumerate() {
            let Some(unit) = units.units.get(u) else {
                continue;
            };
            let i = *index.entry(u).or_insert_with(|| {
                let ties = self
                    .deploy_sets
                    .iter()
                    .filter(|s| s.units.contains(&u))
                    .map(|s| {
                        let others: Vec<String> = s
                            .units
                            .iter()
                            .filter(|&&v| v != u)
                            .filter_map(|&v| units.units.get(v).map(|x| x.display.clone()))
                            .collect();
                        (s.tie.clone(), others)
                    })
                    .collect();
                out.push(UnitShown {
                    display: unit.display.clone(),
                    kind: unit.kind.as_str(),
                    fixture_file: unit.kind == crate::project::UnitKind::FixtureFile,
                    fixture: unit.fixture.clone(),
                    files: Vec::new(),
                    ties,
                });
                out.len() - 1
            });
            if let Some(f) = self.files.get(file) {
                out[i].files.push(f.display.clone());
            }
        }
        out
    }

    /// Files read as `kind`.
    pub fn files_of(&self, kind: FileKind) -> usize {
        self.read.iter().filter(|r| r.kind == kind).count()
    }
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.suppressed.is_none() && f.severity == severity)
            .count()
    }
    pub fn suppressed(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.suppressed.is_some())
            .count()
    }
}

/// Shown path: relative to the current directory when under it, else as given.
pub fn display_path(path: &Path) -> String {
    crate::text::display_path(path)
}

fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn is_manifest_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".batchguard.yaml") || name.ends_with(".batchguard.yml")
}

/// A YAML file found while walking is a manifest when its name says so, or when its top
/// level has `version:` and `jobs:` keys (checked on the text, before any parsing).
fn looks_like_manifest(bytes: &[u8]) -> bool {
    // A byte-order mark (as Windows editors save UTF-8) is not part of the first key.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    let mut version = false;
    let mut jobs = false;
    for line in text.lines() {
        version |= line.starts_with("version:");
        jobs |= line.starts_with("jobs:");
    }
    version && jobs
}

/// How a file shows it is not text: a NUL byte, or a byte that is not UTF-8, in its
/// first MiB (a character cut at that MiB's end does not count).
fn not_text(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(1 << 20)];
    if let Some(at) = head.iter().position(|&b| b == 0) {
        return Some(format!("byte {at} is NUL"));
    }
    match std::str::from_utf8(head) {
        Err(e) if e.error_len().is_some() || head.len() == bytes.len() => Some(format!(
            "byte {} is not part of a UTF-8 character",
            e.valid_up_to()
        )),
        _ => None,
    }
}

/// A file named on the command line that is not text: one BG001 (error), so that a
/// pre-commit or CI step naming the wrong file fails instead of passing with "0 files".
/// Nothing of the file is shown.
fn named_not_text(path: &Path, why: &str) -> FileLint {
    let file = SourceFile::new(path.to_path_buf(), display_path(path), String::new());
    let meta = rule_of(Issue::YamlSyntax);
    let finding = Finding::new(
        meta,
        Location {
            file: 0,
            span: crate::text::Span::new(0, 0),
        },
        format!(
            "named on the command line but not text ({why}): neither a batchguard manifest \
             nor a registration source"
        ),
    )
    .help(
        "name only manifests and registration sources, or save the file as UTF-8 text \
         (a pre-commit hook: `types: [yaml]`)",
    );
    FileLint {
        file,
        findings: vec![finding],
        jobs: 0,
        facts: Vec::new(),
        regs: Vec::new(),
        notes: Vec::new(),
        boot: Vec::new(),
        code: CodeFacts::default(),
        unscheduled: Vec::new(),
    }
}

/// A YAML file that is nearly a manifest: a top-level `jobs` (or a one-edit typo of it)
/// beside `version` or a typo of it (at most two edits, case ignored), or beside `service`
/// or `deployment` — and not a manifest as written. Gives the misspelt keys (the typo and
/// the key it stands for). A GitHub workflow (`jobs` beside `on`, `name`, `defaults`) and
/// docker-compose (`version` beside `services`, no `jobs`) are not near.
fn nearly_manifest(bytes: &[u8]) -> Option<Vec<(String, &'static str)>> {
    if looks_like_manifest(bytes) {
        return None;
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    let keys: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim_end()))
        .filter(|k| {
            k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .collect();
    let near = |k: &str, want: &str, edits: usize| {
        k != want && strsim::damerau_levenshtein(&k.to_ascii_lowercase(), want) <= edits
    };
    let mut typos = Vec::new();
    let jobs = keys.iter().find_map(|k| match *k {
        "jobs" => Some(None),
        k if near(k, "jobs", 1) => Some(Some(k)),
        _ => None,
    })?;
    typos.extend(jobs.map(|k| (k.to_owned(), "jobs")));
    let version = keys.iter().find_map(|k| match *k {
        "version" => Some(None),
        k if near(k, "version", 2) => Some(Some(k)),
        _ => None,
    });
    typos.extend(version.flatten().map(|k| (k.to_owned(), "version")));
    let beside = keys.iter().any(|k| matches!(*k, "service" | "deployment"));
    (version.is_some() || beside).then_some(typos)
}

/// Why a file that is neither a manifest nor a registration source is not read, from its
/// name and the top-level `apiVersion`/`kind` of its documents.
fn why_not_read(path: &Path, bytes: &[u8]) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if not_text(bytes).is_some() {
        return "not text: neither a batchguard manifest nor a registration source".into();
    }
    if let Some(typos) = nearly_manifest(bytes) {
        let said: Vec<String> = typos
            .iter()
            .map(|(typo, key)| format!("`{typo}` for `{key}`"))
            .collect();
        return format!(
            "nearly a batchguard manifest ({}): name it *.batchguard.yaml, or name it on the \
             command line, to have it linted",
            if said.is_empty() {
                "top-level `jobs` without `version`".to_owned()
            } else {
                said.join(", ")
            }
        );
    }
    if crate::sources::kubernetes::KUSTOMIZATION_NAMES.contains(&name) {
        return "a kustomization is no batchguard source".into();
    }
    let head = &bytes[..bytes.len().min(1 << 20)];
    let text = String::from_utf8_lossy(head);
    let top = |line: &str, key: &str| {
        line.strip_prefix(key)
            .map(|v| v.trim().trim_matches(['"', '\'']).to_owned())
            .filter(|v| !v.is_empty())
    };
    let (mut api, mut kinds) = (String::new(), Vec::<(String, String)>::new());
    for line in text.lines() {
        if let Some(v) = top(line, "apiVersion:") {
            api = v;
        } else if let Some(k) = top(line, "kind:")
            && !kinds.iter().any(|(_, seen)| *seen == k)
        {
            kinds.push((std::mem::take(&mut api), k));
        }
    }
    if !kinds.is_empty() {
        let argo = kinds.iter().all(|(a, _)| a.starts_with("argoproj.io"));
        let names: Vec<&str> = kinds.iter().map(|(_, k)| k.as_str()).collect();
        return if argo {
            format!(
                "an Argo {} is no batchguard source (only Kubernetes CronJobs are read)",
                names.join(", ")
            )
        } else {
            format!(
                "a Kubernetes {} is no batchguard source (only CronJobs are read)",
                names.join(", ")
            )
        };
    }
    if name == "Chart.yaml" {
        return "a Helm chart's metadata is no batchguard source".into();
    }
    if is_yaml(path) {
        return "neither a batchguard manifest (top-level `version` and `jobs`) nor a \
                registration source"
            .into();
    }
    "neither a batchguard manifest nor a registration source by its name or content (map it \
     in [sources] in batchguard.toml to read it)"
        .into()
}

/// A file to lint, and whether it was named explicitly (then it is read as the kind its
/// name or content says, and listed as not read when it is no source).
struct Candidate {
    path: PathBuf,
    explicit: bool,
    /// What bounds its deploy unit: the current directory when the path given is under
    /// it, else the folder given (for a file named on the command line, its folder).
    bound: PathBuf,
    /// Below which test and example folders count (see [`crate::project::FileOrigin`]).
    given: PathBuf,
}

/// How `lint` walks folders (SPEC 3.6 "Files").
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkOptions {
    /// Also walk hidden files and folders (`--hidden`).
    pub hidden: bool,
}

/// Folders of version-control metadata: never walked, not counted as hidden.
const VCS_DIRS: [&str; 3] = [".git", ".hg", ".svn"];

/// The config's globs, compiled once per run, relative to the config's folder (else the
/// current directory).
struct Globs {
    base: PathBuf,
    include: Option<globset::GlobSet>,
    exclude: Option<globset::GlobSet>,
    kinds: Vec<(crate::sources::SourceKind, globset::GlobSet)>,
    user_column: Option<globset::GlobSet>,
    crontab_timezone: Option<String>,
    /// `[sources] crontab_runner`: the runner of crontabs no deploy file names.
    crontab_runner: Option<crate::sources::runner::CrontabRunner>,
}

impl Globs {
    fn new(settings: &Settings) -> Self {
        use crate::sources::SourceKind;
        let base = settings
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        let build = |globs: &[String]| {
            if globs.is_empty() {
                return None;
            }
            let mut b = globset::GlobSetBuilder::new();
            for g in globs {
                if let Ok(g) = globset::Glob::new(g) {
                    b.add(g);
                }
            }
            b.build().ok()
        };
        let files = &settings.config.files;
        let src = &settings.config.sources;
        // A file several kinds' globs match is read as the first: crontab, pm2, kubernetes.
        let kinds = [
            (SourceKind::Crontab, &src.crontab),
            (SourceKind::Pm2, &src.pm2),
            (SourceKind::Kubernetes, &src.kubernetes),
        ]
        .into_iter()
        .filter_map(|(k, g)| build(g).map(|set| (k, set)))
        .collect();
        Globs {
            base,
            include: build(&files.include),
            exclude: build(&files.exclude),
            kinds,
            user_column: build(&src.crontab_user_column),
            crontab_timezone: src.crontab_timezone.clone(),
            crontab_runner: src
                .crontab_runner
                .as_deref()
                .and_then(|r| crate::config::crontab_runner(r).ok())
                .map(|(name, overlapping)| {
                    use crate::config::RunnerName;
                    use crate::sources::runner::{CrontabRunner, RunnerKind};
                    CrontabRunner {
                        kind: match name {
                            RunnerName::Cron => RunnerKind::Cron,
                            RunnerName::Busybox => RunnerKind::Busybox,
                            RunnerName::Supercronic => RunnerKind::Supercronic,
                        },
                        overlapping,
                        from: "[sources] crontab_runner".into(),
                    }
                }),
        }
    }

    /// What `[sources]` and the deploy files (`role`) tell the readers about `p` (SPEC
    /// 3.6): a runner a Dockerfile or compose file names wins over `crontab_runner`.
    fn read_options(
        &self,
        p: &Path,
        role: Option<&crate::sources::runner::Role>,
    ) -> crate::sources::ReadOptions {
        crate::sources::ReadOptions {
            crontab_timezone: self.crontab_timezone.clone(),
            crontab_user_column: role.is_some_and(|r| r.user_column)
                || self
                    .user_column
                    .as_ref()
                    .is_some_and(|set| set.is_match(self.rel(p))),
            crontab_no_user_column: role.is_some_and(|r| r.no_user_column),
            crontab_runner: role
                .and_then(|r| r.runner.clone())
                .or_else(|| self.crontab_runner.clone()),
        }
    }

    fn rel(&self, p: &Path) -> PathBuf {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        abs.strip_prefix(&self.base)
            .map(Path::to_path_buf)
            .unwrap_or(abs)
    }

    /// `[files]` include/exclude.
    fn wanted(&self, p: &Path) -> bool {
        let rel = self.rel(p);
        if self.exclude.as_ref().is_some_and(|x| x.is_match(&rel)) {
            return false;
        }
        self.include.as_ref().is_none_or(|i| i.is_match(&rel))
    }

    /// The kind `[sources]` maps the file to.
    fn kind(&self, p: &Path) -> Option<crate::sources::SourceKind> {
        if self.kinds.is_empty() {
            return None;
        }
        let rel = self.rel(p);
        self.kinds
            .iter()
            .find(|(_, set)| set.is_match(&rel))
            .map(|(k, _)| *k)
    }

    /// A walked file worth opening: YAML, a source by its name, or mapped by `[sources]`.
    fn candidate(&self, p: &Path) -> bool {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        is_yaml(p)
            || crate::sources::is_source_name(p)
            || self.kind(p).is_some()
            || crate::sources::code::is_code_path(p)
            || name == "package.json"
            || is_dockerfile(name)
    }
}

/// What discovery found: the files to open, and what it saw but will not read.
struct Found {
    candidates: Vec<Candidate>,
    not_read: Vec<NotRead>,
    hidden: Vec<PathBuf>,
}

/// Files named on the command line, then each folder walked (respecting `.gitignore`),
/// in path order. Hidden entries are skipped unless `walk.hidden`, and recorded: a hidden
/// folder counts once (it is not entered), a hidden file when it would have been read.
fn discover(
    opts: &LintOptions,
    walk: WalkOptions,
    globs: &std::sync::Arc<Globs>,
    unreadable: &mut Vec<(PathBuf, String)>,
) -> Found {
    use std::sync::{Arc, Mutex};
    let mut found = Found {
        candidates: Vec::new(),
        not_read: Vec::new(),
        hidden: Vec::new(),
    };
    for root in &opts.paths {
        // Deploy units are bounded by the current directory when the path is under it
        // (`lint deploy k8s` is one project), else by the path itself.
        let abs = std::path::absolute(root).unwrap_or_else(|_| root.clone());
        let cwd = std::env::current_dir().unwrap_or_default();
        let bound = if abs.starts_with(&cwd) {
            cwd
        } else if root.is_file() {
            abs.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            abs.clone()
        };
        if root.is_file() {
            found.candidates.push(Candidate {
                path: root.clone(),
                explicit: true,
                given: bound.clone(),
                bound,
            });
            continue;
        }
        if !root.is_dir() {
            unreadable.push((root.clone(), "no such file or directory".into()));
            continue;
        }
        let hidden: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
        let (seen, g) = (hidden.clone(), globs.clone());
        let show_hidden = walk.hidden;
        let walker = ignore::WalkBuilder::new(root)
            .hidden(false)
            .filter_entry(move |e| {
                if e.depth() == 0 {
                    return true;
                }
                let name = e.file_name().to_string_lossy();
                let dir = e.file_type().is_some_and(|t| t.is_dir());
                if dir && VCS_DIRS.contains(&name.as_ref()) {
                    return false;
                }
                // Dependencies hold no registrations of the app's own (SPEC 3.7).
                if dir && name == "node_modules" {
                    return false;
                }
                if show_hidden || !name.starts_with('.') {
                    return true;
                }
                if (dir || g.candidate(e.path()))
                    && let Ok(mut list) = seen.lock()
                {
                    list.push(e.path().to_path_buf());
                }
                false
            })
            .build();
        let mut files = Vec::new();
        for entry in walker {
            match entry {
                Ok(e) if e.file_type().is_some_and(|t| t.is_file()) => {
                    let p = e.into_path();
                    if globs.candidate(&p) && !skipped_code(root, &p) {
                        files.push(p);
                    }
                }
                Ok(_) => {}
                Err(e) => unreadable.push((root.clone(), e.to_string())),
            }
        }
        files.sort();
        for path in files {
            if globs.wanted(&path) {
                found.candidates.push(Candidate {
                    path,
                    explicit: false,
                    bound: bound.clone(),
                    given: abs.clone(),
                });
            } else {
                found.not_read.push(NotRead {
                    display: display_path(&path),
                    reason: "left out by [files] in batchguard.toml".into(),
                });
            }
        }
        let mut h = hidden.lock().map(|l| l.clone()).unwrap_or_default();
        h.sort();
        found.hidden.extend(h);
    }
    found
}

/// Code under a build, dependency or test folder below the walked root, or a test file
/// (SPEC 3.7): not the app's own schedules. Named on the command line, it is read.
fn skipped_code(root: &Path, p: &Path) -> bool {
    use crate::sources::code;
    if !code::is_code_path(p) {
        return false;
    }
    let rel = p.strip_prefix(root).unwrap_or(p);
    code::is_test_name(p)
        || rel.parent().is_some_and(|d| {
            d.components()
                .any(|c| code::SKIPPED_DIRS.contains(&c.as_os_str().to_string_lossy().as_ref()))
        })
}

pub fn run(opts: &LintOptions) -> LintRun {
    run_with(opts, WalkOptions::default())
}

/// [`run`] with the walk's options (`--hidden`).
pub fn run_with(opts: &LintOptions, walk: WalkOptions) -> LintRun {
    let mut run = read(opts, walk, Checks::All);
    let analysis = crate::project::Analysis::new(&run.project, &run.files, opts.now);
    run.jobs = jobs_count(&analysis);
    run.deploy_sets = analysis.sets.clone();
    for (file, note) in analysis.guarded_notes() {
        if let Some(r) = run.read.get_mut(file) {
            r.notes.push(note);
        }
    }
    let mut all = std::mem::take(&mut run.findings);
    all.extend(cross::run(&analysis));
    run.findings = apply_suppressions(&run.files, all, &opts.settings);
    run.findings.sort_by(|a, b| {
        (a.at.file, a.at.span.start, a.code).cmp(&(b.at.file, b.at.span.start, b.code))
    });
    run
}

/// The summary's `jobs`: every manifest job (twenty manifest jobs that share one command
/// are twenty jobs, whatever BG601 makes of them), and each group of registrations tied to
/// no manifest job and in no manifest job's group once (its duplicates are one job).
fn jobs_count(analysis: &crate::project::Analysis) -> usize {
    let manifest = analysis.project.jobs.len();
    let bare = analysis
        .groups
        .iter()
        .filter(|g| {
            !g.places
                .iter()
                .any(|p| matches!(p, crate::project::Place::Job(_)))
        })
        .count();
    manifest + bare
}

/// Discovery and reading: every file's model and the cross-file project, what `graph`
/// draws from. No rule judges it but those that mask values ([`Checks::Masking`]), so
/// `findings` holds only theirs, and `jobs` is not counted.
pub fn read_project(opts: &LintOptions, walk: WalkOptions) -> LintRun {
    read(opts, walk, Checks::Masking)
}

/// Discovery, reading and the per-file rules `checks` selects, file by file in parallel.
fn read(opts: &LintOptions, walk: WalkOptions, checks: Checks) -> LintRun {
    let mut unreadable = Vec::new();
    let globs = std::sync::Arc::new(Globs::new(&opts.settings));
    let mut found = discover(opts, walk, &globs, &mut unreadable);
    let context = deploy_context(&mut found, &globs);
    let results: Vec<_> = found
        .candidates
        .par_iter()
        .map(|c| match std::fs::read(&c.path) {
            Err(e) => Err((c.path.clone(), crate::text::io_reason(&e))),
            Ok(bytes) => Ok(lint_candidate(c, &bytes, opts, &globs, &context, checks)),
        })
        .collect();
    let mut run = LintRun {
        files: Vec::new(),
        read: Vec::new(),
        not_read: Vec::new(),
        hidden_skipped: found.hidden.len(),
        findings: Vec::new(),
        jobs: 0,
        registrations: 0,
        unreadable,
        project: crate::project::Project {
            run_store: opts.settings.config.run.store.clone(),
            ..crate::project::Project::default()
        },
        deploy_sets: Vec::new(),
    };
    let mut not_read = Vec::new();
    let mut origins: Vec<crate::project::FileOrigin> = Vec::new();
    let mut modules = Vec::new();
    let mut code = CodeFacts::default();
    for (c, r) in found.candidates.iter().zip(results) {
        match r {
            Err(e) => run.unreadable.push(e),
            Ok(Err(skipped)) => {
                code.runners.extend(skipped.code.runners);
                code.hpas.extend(skipped.code.hpas);
                not_read.push(NotRead {
                    display: display_path(&c.path),
                    reason: skipped.reason,
                })
            }
            Ok(Ok((
                kind,
                FileLint {
                    file,
                    findings,
                    jobs,
                    facts,
                    regs,
                    unscheduled,
                    notes,
                    boot,
                    code: facts_of_code,
                },
            ))) => {
                let idx = run.files.len();
                origins.push(crate::project::FileOrigin {
                    path: c.path.clone(),
                    bound: c.bound.clone(),
                    given: c.given.clone(),
                });
                run.project
                    .unscheduled
                    .extend(unscheduled.into_iter().map(|mut u| {
                        u.file = idx;
                        u
                    }));
                if kind == FileKind::Source(crate::sources::SourceKind::Code) {
                    modules.push(crate::sources::code::Module {
                        file: idx,
                        path: crate::sources::code::runners::normalize(&c.path),
                        imports: facts_of_code.imports,
                    });
                }
                code.runners.extend(facts_of_code.runners);
                code.hpas.extend(facts_of_code.hpas);
                run.files.push(file);
                run.read.push(FileRead {
                    kind,
                    jobs,
                    registrations: regs.len(),
                    notes,
                    boot,
                });
                run.project.jobs.extend(facts.into_iter().map(|mut j| {
                    j.file = idx;
                    j
                }));
                run.project.regs.extend(regs.into_iter().map(|mut r| {
                    r.file = idx;
                    r
                }));
                run.findings.extend(findings.into_iter().map(|mut f| {
                    f.at.file = idx;
                    for r in &mut f.related {
                        r.at.file = idx;
                    }
                    f
                }));
            }
        }
    }
    crate::sources::code::link(
        &mut run.project.regs,
        &modules,
        &code.runners,
        &code.hpas,
        &opts.paths,
    );
    run.project.units = crate::project::Units::detect(&origins);
    run.deploy_sets = run.project.units.sets.clone();
    for (file, note) in unscheduled_notes(&run.project) {
        if let Some(r) = run.read.get_mut(file) {
            r.notes.push(note);
        }
    }
    run.not_read = not_read;
    run.not_read.extend(found.not_read);
    run.not_read.extend(found.hidden.iter().map(|p| NotRead {
        display: display_path(p),
        reason: "hidden (--hidden walks it)".into(),
    }));
    run.registrations = run.project.regs.len();
    run
}

/// What the tree's Dockerfiles, compose files and `package.json` scripts say about its
/// other files (SPEC 3.6, `sources::runner`): what runs each crontab, which files they
/// install as crontabs or start as PM2 ecosystem files. A file they install that the walk
/// did not pick by its name becomes a candidate too, when it lies under a walked folder.
fn deploy_context(found: &mut Found, globs: &Globs) -> crate::sources::runner::Context {
    use crate::sources::code::runners::normalize;
    let mut ctx = crate::sources::runner::Context::default();
    let is_deploy = |p: &Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name == "package.json"
            || is_dockerfile(name)
            || crate::sources::runner::is_compose_name(name)
    };
    let mut deploy: Vec<PathBuf> = found
        .candidates
        .iter()
        .filter(|c| is_deploy(&c.path))
        .map(|c| c.path.clone())
        .collect();
    // A file named alone on the command line (a pre-commit step) keeps its runner: the
    // deploy files in its folder and the two above it are read too.
    for c in found.candidates.iter().filter(|c| c.explicit) {
        for dir in c.path.ancestors().skip(1).take(3) {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut near: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && is_deploy(p))
                .collect();
            near.sort();
            deploy.extend(near);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for p in deploy {
        if seen.insert(normalize(&p))
            && let Some(text) = crate::sources::runner::read_small(&p)
        {
            ctx.scan(&p, &text);
        }
    }
    let known: std::collections::HashSet<PathBuf> = found
        .candidates
        .iter()
        .map(|c| normalize(&c.path))
        .collect();
    // Folders the walk entered, with the unit bounds of the walk that entered them.
    let roots: Vec<(PathBuf, &Candidate)> = found
        .candidates
        .iter()
        .filter(|c| !c.explicit)
        .filter_map(|c| c.path.parent().map(|p| (normalize(p), c)))
        .collect();
    let mut added = Vec::new();
    for (path, role) in &ctx.roles {
        if role.kind.is_none() || known.contains(path) || !path.is_file() {
            continue;
        }
        // Only files under a folder the walk entered (the tree being linted).
        let Some((_, walked)) = roots.iter().find(|(r, _)| path.starts_with(r)) else {
            continue;
        };
        let shown = std::env::current_dir()
            .ok()
            .and_then(|cwd| {
                path.strip_prefix(normalize(&cwd))
                    .ok()
                    .map(Path::to_path_buf)
            })
            .unwrap_or_else(|| path.clone());
        if globs.wanted(&shown) {
            added.push(Candidate {
                path: shown,
                explicit: false,
                bound: walked.bound.clone(),
                given: walked.given.clone(),
            });
        }
    }
    if !added.is_empty() {
        found.candidates.extend(added);
        // Files named on the command line first, as given; the walked ones in path order.
        let (mut named, mut walked): (Vec<Candidate>, Vec<Candidate>) =
            std::mem::take(&mut found.candidates)
                .into_iter()
                .partition(|c| c.explicit);
        walked.sort_by(|a, b| a.path.cmp(&b.path));
        named.extend(walked);
        found.candidates = named;
    }
    ctx
}

/// Why a CronJob without a schedule is not reported (BG003 reports the others): it is a
/// kustomize patch or lies in a test fixture. Said in `lint --list-files`.
fn unscheduled_notes(project: &crate::project::Project) -> Vec<(usize, String)> {
    project
        .unscheduled
        .iter()
        .filter_map(|u| {
            let why = unscheduled_excuse(project, u)?;
            Some((
                u.file,
                format!("{} has no spec.schedule: {why}; registers nothing", u.label),
            ))
        })
        .collect()
}

/// Why a CronJob without `spec.schedule` is no error, or `None` when it would be
/// deployed as it is (the API server rejects it: BG003).
pub fn unscheduled_excuse(
    project: &crate::project::Project,
    u: &crate::sources::Unscheduled,
) -> Option<String> {
    let units = &project.units;
    let unit = units.of(u.file).and_then(|i| units.units.get(i));
    if let Some(k) = units.patch_of(u.file) {
        return Some(format!(
            "a patch named by `{k}` (its schedule comes from the base)"
        ));
    }
    if !u.complete {
        return Some("a patch (no container image; its schedule comes from the base)".into());
    }
    if let Some(fx) = unit.and_then(|u| u.fixture.as_ref()) {
        return Some(format!("a test fixture under `{fx}`, not deployed"));
    }
    None
}

/// One file's result; file index 0 is a placeholder the caller renumbers.
pub struct FileLint {
    pub file: SourceFile,
    pub findings: Vec<Finding>,
    pub jobs: usize,
    pub facts: Vec<crate::project::ManifestJob>,
    pub regs: Vec<crate::sources::Registration>,
    /// CronJobs without a schedule (judged with the deploy unit, BG003).
    pub unscheduled: Vec<crate::sources::Unscheduled>,
    /// What the file holds that registers nothing (see [`FileRead::notes`]).
    pub notes: Vec<String>,
    /// Jobs it starts at boot (see [`FileRead::boot`]).
    pub boot: Vec<String>,
    /// A code file's relative imports; what a file starts (SPEC 3.7, linked after reading).
    pub code: CodeFacts,
}

/// What a file tells about application code and what runs it (SPEC 3.7).
#[derive(Default)]
pub struct CodeFacts {
    pub imports: Vec<String>,
    pub runners: Vec<crate::sources::code::Runner>,
    pub hpas: Vec<(String, u64)>,
}

/// A file not read, and why; a file that runs code (a Deployment, a Dockerfile,
/// `package.json`) gives its runners all the same.
struct Skipped {
    reason: String,
    code: CodeFacts,
}

impl From<String> for Skipped {
    fn from(reason: String) -> Self {
        Skipped {
            reason,
            code: CodeFacts::default(),
        }
    }
}

/// What a candidate is read as (SPEC 3.6 "Files"): the kind `[sources]` maps it to; a
/// manifest by its name; a source by its name (or a CronJob by its content); a manifest
/// by its content. Anything else is not read, with the reason.
fn lint_candidate(
    c: &Candidate,
    bytes: &[u8],
    opts: &LintOptions,
    globs: &Globs,
    context: &crate::sources::runner::Context,
    checks: Checks,
) -> Result<(FileKind, FileLint), Skipped> {
    let role = context.role(&c.path);
    let source = |kind| {
        let read_options = globs.read_options(&c.path, role);
        let mut linted =
            registrations::lint_source(kind, &c.path, bytes, opts, &read_options, checks);
        if let Some(r) = role {
            linted.notes.splice(0..0, r.because.iter().cloned());
        }
        Ok((FileKind::Source(kind), linted))
    };
    if let Some(kind) = globs.kind(&c.path) {
        return source(kind);
    }
    // Installed as a crontab or started as a PM2 file by the tree's deploy files.
    if let Some(kind) = role.and_then(|r| r.kind) {
        return source(kind);
    }
    if is_manifest_name(&c.path) {
        return Ok((
            FileKind::Manifest,
            read_manifest(&c.path, bytes, opts, checks),
        ));
    }
    if let Some(kind) = crate::sources::classify(&c.path, bytes, c.explicit) {
        return source(kind);
    }
    if (c.explicit || is_yaml(&c.path)) && looks_like_manifest(bytes) {
        return Ok((
            FileKind::Manifest,
            read_manifest(&c.path, bytes, opts, checks),
        ));
    }
    use crate::sources::code;
    if code::is_code_path(&c.path) {
        return match code::skip_reason(&c.path, bytes) {
            Some(why) => Err(why.into()),
            None => source(crate::sources::SourceKind::Code),
        };
    }
    if c.explicit {
        if let Some(why) = not_text(bytes) {
            return Ok((FileKind::Manifest, named_not_text(&c.path, &why)));
        }
        if nearly_manifest(bytes).is_some() {
            return Ok((
                FileKind::Manifest,
                read_manifest(&c.path, bytes, opts, checks),
            ));
        }
    }
    let text = String::from_utf8_lossy(bytes);
    let name = c.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut facts = CodeFacts::default();
    if name == "package.json" {
        facts.runners = code::runners::package_json(&c.path, &text);
    } else if is_dockerfile(name) {
        facts.runners = code::runners::dockerfile(&c.path, &text);
    } else if is_yaml(&c.path) && code::runners::looks_like_workload(bytes) {
        (facts.runners, facts.hpas) = code::runners::kubernetes(&c.path, &text);
    }
    let mut reason = if name == "package.json" || is_dockerfile(name) {
        "no batchguard source".to_owned()
    } else {
        why_not_read(&c.path, bytes)
    };
    let installs = context.installed_by(&display_path(&c.path));
    if !installs.is_empty() {
        reason.push_str(&format!(
            "; read for the sources it runs or installs: {}",
            installs.join(", ")
        ));
    }
    if !facts.runners.is_empty() || !facts.hpas.is_empty() {
        let starts: Vec<String> = facts.runners.iter().map(|r| r.label.clone()).collect();
        reason.push_str(&format!(
            "; read for what runs application code{}",
            if starts.is_empty() {
                String::new()
            } else {
                format!(": {}", starts.join(", "))
            }
        ));
    }
    Err(Skipped {
        reason,
        code: facts,
    })
}

/// `Dockerfile`, `Dockerfile.prod`, `api.Dockerfile`.
fn is_dockerfile(name: &str) -> bool {
    name == "Dockerfile" || name.starts_with("Dockerfile.") || name.ends_with(".Dockerfile")
}

/// Lints one file's bytes. File index 0 is a placeholder the caller renumbers.
pub fn lint_bytes(
    path: &Path,
    bytes: &[u8],
    opts: &LintOptions,
) -> (SourceFile, Vec<Finding>, usize) {
    let r = lint_manifest(path, bytes, opts);
    (r.file, r.findings, r.jobs)
}

/// Lints one manifest's bytes on its own (suppressions judged in it alone), keeping the
/// facts the cross-file rules need.
/// One manifest's lint, as the audit shows it for a job it cannot evaluate: the file (its
/// secrets masked) and its findings, suppressions judged.
pub fn diagnose_manifest(
    path: &Path,
    bytes: &[u8],
    settings: &Settings,
) -> (SourceFile, Vec<Finding>) {
    let opts = LintOptions {
        paths: vec![path.to_path_buf()],
        settings: settings.clone(),
        now: jiff::Timestamp::now(),
    };
    let linted = lint_manifest(path, bytes, &opts);
    (linted.file, linted.findings)
}

pub fn lint_manifest(path: &Path, bytes: &[u8], opts: &LintOptions) -> FileLint {
    let mut r = read_manifest(path, bytes, opts, Checks::All);
    let findings = std::mem::take(&mut r.findings);
    r.findings = apply_suppressions(std::slice::from_ref(&r.file), findings, &opts.settings);
    r
}

/// One manifest's findings before suppressions are judged (the run judges them once, at
/// the end, with the project rules' findings).
fn read_manifest(path: &Path, bytes: &[u8], opts: &LintOptions, checks: Checks) -> FileLint {
    let (text, loaded) = load::load(bytes);
    // A file over the size limit is not looked at at all (one BG006); text that is not
    // UTF-8 is still shown, lossily, around the first bad byte.
    let text = text.unwrap_or_else(|| {
        if bytes.len() > load::MAX_FILE_BYTES {
            String::new()
        } else {
            String::from_utf8_lossy(bytes).into_owned()
        }
    });
    let mut file = SourceFile::new(path.to_path_buf(), display_path(path), text);
    let mut findings = Vec::new();
    let service = loaded.manifest.service_name(path);
    for d in &loaded.diags {
        let meta = rule_of(d.issue);
        if !checks.wants(meta) {
            continue;
        }
        let at = |span| Location { file: 0, span };
        findings.push(
            Finding::new(meta, at(d.span), d.message.clone())
                .help(d.help.clone())
                .subject(Some(service.clone()), None, None)
                .related(d.related.iter().map(|(span, m)| (at(*span), m.clone()))),
        );
    }
    if let Some(root) = &loaded.root {
        let cx = FileCx {
            root,
            text: &file.text,
        };
        for rule in checks.rules() {
            let mut em = Emitter {
                meta: rule.meta(),
                file: 0,
                service: &service,
                job: None,
                job_line: None,
                out: &mut findings,
            };
            rule.check_file(&cx, &mut em);
        }
    }
    attribute_jobs(&loaded, &file, &mut findings);
    run_job_rules(&loaded, &service, &file, opts, checks, &mut findings);
    if checks == Checks::All {
        // Its findings are the missing-value rules' (BG003, BG201 …), none of them masks.
        placeholder::mark(&loaded, &file, &service, &mut findings);
    }
    for f in &findings {
        if f.rule.masks {
            file.mask(f.at.span);
        }
    }
    let facts = crate::project::manifest_facts(&loaded, &service, &file);
    FileLint {
        file,
        findings,
        jobs: loaded.jobs.len(),
        facts,
        regs: Vec::new(),
        unscheduled: Vec::new(),
        notes: Vec::new(),
        boot: Vec::new(),
        code: CodeFacts::default(),
    }
}

/// Job spans in file order: (start, end of the job's item, name, line of its first key).
fn job_ranges(loaded: &Loaded, file: &SourceFile) -> Vec<(usize, usize, String, usize)> {
    let jobs = loaded
        .manifest
        .jobs
        .value()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut out: Vec<(usize, usize, String, usize)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let start = job.span.start;
        let end = jobs.get(i + 1).map_or(usize::MAX, |n| n.span.start);
        let name = job
            .name
            .value()
            .cloned()
            .unwrap_or_else(|| format!("jobs[{i}]"));
        out.push((start, end, name, file.line_col(start).0));
    }
    out
}

/// Load-time findings inside a job's item belong to that job.
fn attribute_jobs(loaded: &Loaded, file: &SourceFile, findings: &mut [Finding]) {
    let ranges = job_ranges(loaded, file);
    for f in findings.iter_mut().filter(|f| f.job.is_none()) {
        let at = f.at.span.start;
        if let Some((_, _, name, line)) = ranges.iter().find(|(s, e, _, _)| *s <= at && at < *e) {
            f.job = Some(name.clone());
            f.job_line = Some(*line);
        }
    }
}

fn run_job_rules(
    loaded: &Loaded,
    service: &str,
    file: &SourceFile,
    opts: &LintOptions,
    checks: Checks,
    out: &mut Vec<Finding>,
) {
    let manifest = &loaded.manifest;
    let ranges = job_ranges(loaded, file);
    for (i, job) in loaded.jobs.iter().enumerate() {
        let scheduler = manifest.deployment_of(job).scheduler;
        let cx = JobCx {
            job,
            manifest,
            service,
            settings: &opts.settings,
            sched: ScheduleCx {
                name: job.name.value().map_or("(unnamed job)", String::as_str),
                expr: job.schedule.get(),
                zone: job.timezone.get(),
                enabled: job.enabled.value() != Some(&false),
                dialect: scheduler,
                now: opts.now,
                text: &file.text,
                schedule: job.schedule.value().map(|e| Schedule::parse(e, scheduler)),
                tz: match &job.timezone {
                    Field::Absent => Some(TimeZone::UTC),
                    Field::Ok(name) => TimeZone::get(&name.value).ok(),
                    Field::Invalid => None,
                },
            },
            gap_12m: OnceLock::new(),
        };
        let (name, line) = ranges
            .get(i)
            .map(|r| (r.2.as_str(), Some(r.3)))
            .unwrap_or((cx.job_name(), None));
        for rule in checks.rules() {
            let mut em = Emitter {
                meta: rule.meta(),
                file: 0,
                service,
                job: Some(name),
                job_line: line,
                out,
            };
            rule.check_schedule(&cx.sched, &mut em);
            rule.check_job(&cx, &mut em);
        }
    }
}

/// Marks suppressed findings, reports BG901/BG902, applies configured severities: once,
/// over every finding of the run, the per-file rules' and the project rules' alike, so an
/// `allow` of a project rule that suppresses nothing is reported like any other (SPEC 3.3).
/// `findings` point into `files` (by index).
pub(crate) fn apply_suppressions(
    files: &[SourceFile],
    findings: Vec<Finding>,
    settings: &Settings,
) -> Vec<Finding> {
    let mut by_file: Vec<Vec<Finding>> = files.iter().map(|_| Vec::new()).collect();
    let mut out = Vec::with_capacity(findings.len());
    for f in findings {
        match by_file.get_mut(f.at.file) {
            Some(list) => list.push(f),
            None => out.push(f),
        }
    }
    for (i, (file, list)) in files.iter().zip(by_file).enumerate() {
        judge_file(i, file, list, &mut out);
    }
    out.retain_mut(|f| match settings.severity(f.code, f.name, f.severity) {
        Some(sev) => {
            f.severity = sev;
            true
        }
        None => false,
    });
    out
}

/// One file's `batchguard: allow` comments against the findings that point into it.
///
/// Suppressions are judged only in a file that was read whole: after a syntax error
/// (BG001) or a limit (BG006) the rules did not run, so every suppression would look unused.
fn judge_file(index: usize, file: &SourceFile, findings: Vec<Finding>, out: &mut Vec<Finding>) {
    let unread = findings.iter().any(|f| {
        f.code == rules::bg001_yaml_syntax::YamlSyntax::META.code
            || f.code == rules::bg006_input_limit::InputLimit::META.code
    });
    let js = crate::sources::code::is_code_path(&file.path);
    let mut sups = suppress::scan_code(&file.text, js);
    for mut f in findings {
        let line = file.line_col(f.at.span.start).0;
        // Alone on its line, an `allow` covers the job item below it; a project rule's
        // finding has no job item, so the line below.
        let below = |s: &suppress::Suppression| {
            f.job_line == Some(s.line + 1) || (f.rule.scope == Scope::Project && s.line + 1 == line)
        };
        for s in sups.iter_mut().filter(|s| s.reason.is_some()) {
            let applies = s.line == line || (s.own_line && below(s));
            if !applies {
                continue;
            }
            if let Some(c) = s.codes.iter_mut().find(|c| c.0 == f.code || c.0 == f.name) {
                c.2 = true;
                f.suppressed = s.reason.clone();
            }
        }
        out.push(f);
    }
    let at = |span| Location { file: index, span };
    for s in sups.iter().filter(|_| !unread) {
        let meta_901 = &rules::bg901_suppression_without_reason::SuppressionWithoutReason::META;
        let meta_902 = &rules::bg902_unused_suppression::UnusedSuppression::META;
        if s.reason.is_none() {
            out.push(Finding::new(
                meta_901,
                at(s.span),
                format!(
                    "`batchguard: allow {}` has no reason, so it suppresses nothing",
                    s.codes
                        .iter()
                        .map(|c| c.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            continue;
        }
        if s.codes.is_empty() {
            out.push(Finding::new(
                meta_902,
                at(s.span),
                "`batchguard: allow` names no rule",
            ));
        }
        for (code, span, used) in &s.codes {
            if *used {
                continue;
            }
            let message = if crate::REGISTRY.find(code).is_none() {
                format!("`{code}` is not a rule code or name, so this suppresses nothing")
            } else {
                format!("`allow {code}` suppresses nothing here")
            };
            out.push(Finding::new(meta_902, at(*span), message));
        }
    }
}

/// The rule table docs/rules.md carries (a test keeps the two in step).
pub fn rules_markdown() -> String {
    let mut s = String::from("| code | name | default | fires when |\n|---|---|---|---|\n");
    for m in crate::REGISTRY.all() {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            m.code,
            m.name,
            m.severity,
            m.summary.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reading_issue_is_a_registered_rule() {
        for (issue, code) in [
            (Issue::YamlSyntax, "BG001"),
            (Issue::UnknownField, "BG002"),
            (Issue::MissingField, "BG003"),
            (Issue::InvalidValue, "BG004"),
            (Issue::DuplicateKey, "BG005"),
            (Issue::InputLimit, "BG006"),
            (Issue::SourceNotRead, "BG609"),
            (Issue::CrontabFormat, "BG610"),
            (Issue::InvalidCron, "BG101"),
        ] {
            assert_eq!(rule_of(issue).code, code);
            assert!(crate::REGISTRY.find(code).is_some(), "{code}");
        }
    }
}
