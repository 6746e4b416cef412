//! The manifests an audit reads, and why it refuses one it cannot evaluate.
//!
//! A job whose zone, cron expression or dialect the audit cannot read would have no
//! expected slots: its missed runs would go unreported and the audit would look clean.
//! So such a job stops the audit (exit 2) with the diagnostic lint gives for it (the same
//! rule, span and did-you-mean), found by linting the manifest rather than rephrasing it.

use super::{AuditJob, jobs_from_manifest};
use crate::config::Settings;
use crate::finding::{Finding, Severity};
use crate::manifest::load::{self, Loaded, map_get};
use crate::manifest::model::Field;
use crate::manifest::yaml::Node;
use crate::text::Span;
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Lint rules whose findings mean the audit cannot enumerate a job's slots.
const SCHEDULE_RULES: &[&str] = &["BG101", "BG105", "BG106"];

/// One located problem in a manifest, rendered like a lint finding.
#[derive(Debug)]
pub struct Located {
    code: String,
    message: String,
    help: Option<String>,
    src: Arc<NamedSource<String>>,
    span: Span,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Located {}

impl Diagnostic for Located {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&*self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(None, (self.span.start, self.span.len)),
        )))
    }
}

/// Manifest jobs the audit cannot evaluate: exit 2, each problem shown with its place
/// (`crate::report::audit_pretty::render_not_evaluable`).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NotEvaluable {
    pub message: String,
    pub problems: Vec<Located>,
}

/// How a manifest's problems are told: lint's diagnostics for one file (its text with
/// secrets masked, and its findings), handed in by the caller so the audit never imports
/// lint. Without one, each problem is told in a plain located line.
pub type Diagnose =
    fn(&std::path::Path, &[u8], &Settings) -> (crate::text::SourceFile, Vec<Finding>);

/// Why manifests could not be loaded.
#[derive(Debug)]
pub enum ManifestError {
    /// Unreadable file, unknown `--job`: a plain message.
    Io(String),
    NotEvaluable(NotEvaluable),
}

/// Whether `--job` names (`only`; empty keeps all) keep manifest job `j`: by `name` or
/// `service/name`.
pub fn kept(j: &AuditJob, only: &[String]) -> bool {
    only.is_empty()
        || only.iter().any(|w| {
            *w == j.name
                || w.split_once('/')
                    .is_some_and(|(svc, n)| svc == j.service && n == j.name)
        })
}

/// Reads the manifests and their jobs (`only`: `--job` names to keep; empty keeps all).
/// Fails when a manifest is not YAML, a `--job` name is no manifest job, or a kept,
/// enabled job has a schedule, zone or dialect the audit cannot read.
pub fn load_jobs(
    paths: &[PathBuf],
    settings: &Settings,
    only: &[String],
    diagnose: Option<Diagnose>,
) -> Result<Vec<AuditJob>, ManifestError> {
    let keep = |j: &AuditJob| kept(j, only);
    let mut all_names: Vec<String> = Vec::new();
    let mut jobs = Vec::new();
    let mut problems = Vec::new();
    let mut blocked_jobs = 0usize;
    for path in paths {
        let bytes = std::fs::read(path).map_err(|e| {
            ManifestError::Io(format!("cannot read manifest {}: {e}", path.display()))
        })?;
        let (_, loaded) = load::load(&bytes);
        let (file, findings) = match diagnose {
            Some(d) => d(path, &bytes, settings),
            None => (
                crate::text::SourceFile::new(
                    path.clone(),
                    path.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ),
                Vec::new(),
            ),
        };
        let src = Arc::new(
            NamedSource::new(&file.display, file.shown_text().to_owned()).with_language("yaml"),
        );
        let located = |f: &Finding| Located {
            code: format!("{} {}", f.code, f.name),
            message: f.message.clone(),
            help: (!f.help.is_empty()).then(|| f.help.clone()),
            src: src.clone(),
            span: file.shown_span(f.at.span),
        };
        if loaded.root.is_none() {
            let before = problems.len();
            problems.extend(
                findings
                    .iter()
                    .filter(|f| f.severity == Severity::Error)
                    .take(3)
                    .map(located),
            );
            if problems.len() == before {
                problems.push(Located {
                    code: "manifest".into(),
                    message: format!("{} is not a manifest", file.display),
                    help: None,
                    src: src.clone(),
                    span: Span::new(0, 0),
                });
            }
            blocked_jobs += 1;
            continue;
        }
        let service = loaded.manifest.service_name(path);
        let every = jobs_from_manifest(&loaded, &service);
        for j in &every {
            all_names.push(j.name.clone());
            all_names.push(format!("{}/{}", j.service, j.name));
        }
        let file_jobs: Vec<AuditJob> = every.into_iter().filter(|j| keep(j)).collect();
        let evaluated = file_jobs.iter().any(|j| j.enabled);
        if evaluated && let Some(node) = bad_dialect(&loaded) {
            let before = problems.len();
            problems.extend(
                findings
                    .iter()
                    .filter(|f| within(f.at.span, node.span))
                    .map(located),
            );
            if problems.len() == before {
                problems.push(Located {
                    code: "manifest".into(),
                    message: "the deployment's scheduler or platform is not one batchguard knows"
                        .into(),
                    help: None,
                    src: src.clone(),
                    span: node.span,
                });
            }
            blocked_jobs += file_jobs.iter().filter(|j| j.enabled).count();
        } else {
            for j in file_jobs.iter().filter(|j| j.enabled) {
                let Some(why) = &j.schedule_error else {
                    continue;
                };
                blocked_jobs += 1;
                let before = problems.len();
                problems.extend(
                    findings
                        .iter()
                        .filter(|f| f.job.as_deref() == Some(j.name.as_str()))
                        .filter(|f| {
                            SCHEDULE_RULES.contains(&f.code)
                                || (f.severity == Severity::Error
                                    && (f.message.contains("`schedule`")
                                        || f.message.contains("`timezone`")))
                        })
                        .map(located),
                );
                if problems.len() == before {
                    problems.push(Located {
                        code: "manifest".into(),
                        message: format!("job `{}`: {why}", j.name),
                        help: None,
                        src: src.clone(),
                        span: job_span(&loaded, &j.name).unwrap_or(Span::new(0, 0)),
                    });
                }
            }
        }
        jobs.extend(file_jobs);
    }
    for w in only.iter().filter(|_| !paths.is_empty()) {
        if !all_names.iter().any(|n| n == w) {
            let refs: Vec<&str> = all_names.iter().map(String::as_str).collect();
            let hint = crate::text::closest(w, &refs)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(ManifestError::Io(format!(
                "--job `{w}` is no job of the manifests{hint}"
            )));
        }
    }
    if problems.is_empty() {
        return Ok(jobs);
    }
    Err(ManifestError::NotEvaluable(NotEvaluable {
        message: format!(
            "the audit cannot evaluate {blocked_jobs} manifest job{}: without a schedule it can read, {} missed runs would go unreported; fix the manifest (`batchguard lint` checks it)",
            if blocked_jobs == 1 { "" } else { "s" },
            if blocked_jobs == 1 { "its" } else { "their" }
        ),
        problems,
    }))
}

/// The `deployment.scheduler` (or, without one, `deployment.platform`) value that did
/// not load, when one did not.
fn bad_dialect(loaded: &Loaded) -> Option<&Node> {
    let root = loaded.root.as_ref()?;
    let deployment = map_get(root, "deployment")?;
    let d = loaded.manifest.deployment.value();
    let scheduler = d.map(|d| &d.scheduler);
    if matches!(scheduler, Some(Field::Invalid)) {
        return map_get(deployment, "scheduler");
    }
    let platform_bad = d.is_some_and(|d| matches!(d.platform, Field::Invalid));
    if matches!(scheduler, None | Some(Field::Absent)) && platform_bad {
        return map_get(deployment, "platform");
    }
    None
}

fn within(inner: Span, outer: Span) -> bool {
    inner.start >= outer.start && inner.start + inner.len <= outer.start + outer.len
}

/// Where a job's item starts, for a problem lint has no finding for.
fn job_span(loaded: &Loaded, name: &str) -> Option<Span> {
    let jobs = loaded.manifest.jobs.value()?;
    let job = jobs
        .iter()
        .find(|j| j.name.value().is_some_and(|n| n == name))?;
    Some(job.name.get().map_or(job.span, |n| n.span))
}

/// `*.batchguard.yaml` / `.yml` files, and other YAML files whose top level has `version:`
/// and `jobs:`, under `dir` (honouring `.gitignore`), sorted; a file is returned as is.
pub fn discover(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found = Vec::new();
    for entry in ignore::WalkBuilder::new(path).build() {
        let e = entry.map_err(|e| format!("cannot walk {}: {e}", path.display()))?;
        if !e.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let p = e.into_path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let named = name.ends_with(".batchguard.yaml") || name.ends_with(".batchguard.yml");
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        if named || (yaml && looks_like_manifest(&p)) {
            found.push(p);
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(format!(
            "--manifest {}: no manifest found (`*.batchguard.yaml`, or YAML with top-level `version` and `jobs`)",
            path.display()
        ));
    }
    Ok(found)
}

/// Top-level `version:` and `jobs:` keys, judged on the text (as lint does).
fn looks_like_manifest(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(1 << 20).read_to_end(&mut head).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    let (mut version, mut jobs) = (false, false);
    for line in text.lines() {
        version |= line.starts_with("version:");
        jobs |= line.starts_with("jobs:");
    }
    version && jobs
}
