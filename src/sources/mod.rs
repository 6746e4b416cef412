//! Registration sources (SPEC 3.6): the places where cron jobs really get registered,
//! besides batchguard manifests. Kubernetes CronJobs, PM2 ecosystem files and crontabs are
//! each read into the same [`Registration`] model, so the cross-file analysis (duplicates,
//! concurrency, drift) and the per-registration platform rules see one shape.
//!
//! Reading never fails: a file that looks like a source but cannot be parsed or evaluated
//! becomes a located [`Problem`] (BG001 for YAML syntax, BG006 for limits, BG609 when the
//! source could not be read at all, BG610 for crontab lines cron misreads), never a silent
//! skip.

pub mod code;
pub mod command;
pub mod crontab;
pub mod kubernetes;
pub mod pm2;
pub mod runner;

use crate::manifest::Issue;
use crate::manifest::yaml::{Node, Value};
use crate::schedule::Dialect;
use crate::text::{Span, Spanned};
pub use command::{batchguard_tie, effective_argv, is_wrapped, split_words};

/// The environment variable `batchguard run` reads its store URL from (SPEC 7.1 item 13).
pub const STORE_ENV: &str = "BATCHGUARD_STORE";
use std::path::Path;

/// Which kind of source a registration came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceKind {
    #[default]
    Kubernetes,
    Pm2,
    Crontab,
    /// Application code: schedules a JavaScript/TypeScript app registers (SPEC 3.7).
    Code,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Kubernetes => "kubernetes",
            SourceKind::Pm2 => "pm2",
            SourceKind::Crontab => "crontab",
            SourceKind::Code => "code",
        }
    }

    /// SPEC 4: the dialect each platform's scheduler speaks.
    pub fn dialect(self) -> Dialect {
        match self {
            SourceKind::Kubernetes => Dialect::Kubernetes,
            SourceKind::Pm2 => Dialect::Pm2,
            SourceKind::Crontab => Dialect::Crontab,
            // Each call is read in its library's dialect; this is node-cron's.
            SourceKind::Code => Dialect::NodeCron,
        }
    }
}

/// A registration's tie to a manifest job (SPEC 3.5 "Ties").
#[derive(Clone, Debug, PartialEq)]
pub struct Tie {
    /// Present for the `batchguard.dev/job: service/name` annotation.
    pub service: Option<String>,
    pub job: String,
    /// `batchguard run --manifest PATH`, when given: helps pick the service.
    pub manifest: Option<String>,
    pub span: Span,
}

/// Kubernetes CronJob fields the platform rules (BG603-BG605) look at.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KubeFields {
    pub concurrency_policy: Option<Spanned<String>>,
    pub starting_deadline_seconds: Option<Spanned<i128>>,
    pub backoff_limit: Option<Spanned<i128>>,
    pub active_deadline_seconds: Option<Spanned<i128>>,
    pub suspend: Option<Spanned<bool>>,
}

/// One place a job is registered to run on a schedule. Readers fill what their source
/// says and leave the rest to `..Registration::default()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Registration {
    pub kind: SourceKind,
    /// Index into the lint run's files (0 until the run renumbers it).
    pub file: usize,
    /// Where the registration is named: CronJob `metadata.name`, PM2 app `name`, crontab line.
    pub span: Span,
    /// How a user recognises it: `CronJob settle`, `PM2 app settle`, `crontab line 4`.
    pub label: String,
    pub schedule: Option<Spanned<String>>,
    pub timezone: Option<Spanned<String>>,
    pub dialect: Dialect,
    /// The command as registered (argv), and where it is written.
    pub command: Vec<String>,
    pub command_span: Span,
    /// Processes that each fire the schedule (PM2 instances; 1 elsewhere).
    pub instances: u64,
    pub instances_span: Option<Span>,
    /// PM2 `exec_mode: cluster`.
    pub cluster: bool,
    pub kube: Option<KubeFields>,
    pub tie: Option<Tie>,
    /// The command runs under `batchguard run` or `flock` (SPEC 3.5 "Wrapped crontab lines").
    pub wrapped: bool,
    /// The working directory the command starts in, when the source says (PM2 `cwd`, a
    /// container's `workingDir`); `cd DIR &&` inside the command is read from the command.
    pub workdir: Option<Spanned<String>>,
    /// Kubernetes `metadata.namespace`: CronJobs in different namespaces are never
    /// duplicates of each other (SPEC 3.6).
    pub namespace: Option<Spanned<String>>,
    /// The zone is not written in the source but assumed (a crontab line without
    /// `CRON_TZ=`: `[sources] crontab_timezone`, else UTC); messages that rely on it say so.
    pub zone_assumed: bool,
    /// Environment entries the source sets for the command (Kubernetes `env[]` with a
    /// literal `value`, PM2 `env`), name and value located, for BG801.
    pub env: Vec<(Spanned<String>, Spanned<String>)>,
    /// `BATCHGUARD_STORE` as the source sets it for the command (a crontab env line above
    /// the job line, a container's `env`, PM2 `env`), where `batchguard run` finds its store
    /// when no `--store` is given (SPEC 7.1 item 13). A value the file does not write (a
    /// `valueFrom`, a value computed in an ecosystem file) is kept as a reference: `$(…)`.
    pub store_env: Option<Spanned<String>>,
    /// An in-process schedule's own facts (SPEC 3.7).
    pub code: Option<Box<code::CodeFields>>,
    /// A crontab line: the program that runs its file, when known (Dockerfile, compose
    /// file, `[sources] crontab_runner`); `None` is Debian cron, assumed.
    pub crontab_runner: Option<runner::CrontabRunner>,
    /// A PM2 `cron_restart` on a one-shot that PM2 restarts on exit: it loops (BG613).
    pub restart_loop: Option<pm2::RestartLoop>,
}

impl Registration {
    /// The command the registration finally runs, without the wrapper: `batchguard run …
    /// -- CMD` and `flock [opts] FILE CMD` give CMD. Leading `./` is dropped from each word.
    pub fn effective_argv(&self) -> Vec<String> {
        effective_argv(&self.command)
    }

    /// A Kubernetes CronJob with `suspend: true` fires nothing.
    pub fn suspended(&self) -> bool {
        self.kube
            .as_ref()
            .and_then(|k| k.suspend.as_ref())
            .is_some_and(|s| s.value)
    }

    /// The timezone name in force (UTC when none is given).
    pub fn zone(&self) -> &str {
        self.timezone.as_ref().map_or("UTC", |t| t.value.as_str())
    }

    /// The zone as messages show it: an assumed zone says so and where it came from.
    pub fn zone_label(&self) -> String {
        match (self.zone_assumed, &self.timezone) {
            (false, _) => self.zone().to_owned(),
            (true, Some(z)) => format!(
                "{} (from [sources] crontab_timezone: no CRON_TZ= line)",
                z.value
            ),
            (true, None) => format!(
                "{} (assumed: no CRON_TZ= line; set [sources] crontab_timezone)",
                self.zone()
            ),
        }
    }
}

/// A Kubernetes CronJob without `spec.schedule`: it registers nothing. A whole resource
/// (a container with an image) is rejected by the API server; a partial one is a kustomize
/// patch whose schedule comes from its base. Judged with the file's deploy unit (BG003).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unscheduled {
    /// Index into the lint run's files (0 until the run renumbers it).
    pub file: usize,
    /// `metadata.name`, else the `kind` value.
    pub span: Span,
    /// `CronJob `name``.
    pub label: String,
    /// Its job template has a container with an `image`: a whole resource, not a patch.
    pub complete: bool,
}

/// A problem found while reading a source, located in its file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub issue: Issue,
    pub span: Span,
    pub message: String,
    pub help: String,
}

/// What reading one source file gives.
#[derive(Debug, Default)]
pub struct Read {
    pub registrations: Vec<Registration>,
    pub problems: Vec<Problem>,
    /// The text to show in reports (the file as written).
    pub text: String,
    /// YAML trees (spans into `text`) that whole-file rules such as BG801 look at: each
    /// CronJob document, a PM2 `.json`/`.yaml` file.
    pub roots: Vec<Node>,
    /// What the file holds that registers nothing, said in `lint --list-files` (a PM2
    /// restart schedule of a long-running app).
    pub notes: Vec<String>,
    /// A code file's relative imports (SPEC 3.7), followed when linking.
    pub imports: Vec<String>,
    /// What the file starts, for in-process schedules: PM2 apps, Deployments.
    pub runners: Vec<code::Runner>,
    /// HorizontalPodAutoscalers: target `Kind/name` and `minReplicas`.
    pub hpas: Vec<(String, u64)>,
    /// Jobs that run at boot (`@reboot` crontab lines): listed (`--list-files`, graph),
    /// never a schedule.
    pub boot: Vec<String>,
    /// CronJobs without a schedule.
    pub unscheduled: Vec<Unscheduled>,
}

/// A file that is a source by its name alone (PM2 ecosystem files, crontabs).
pub fn is_source_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    pm2::is_pm2_name(name) || crontab::is_crontab_path(path)
}

/// Which source a file is, by its name and (for Kubernetes) its content: a YAML file with
/// a `kind: CronJob`, or any file named on the command line (`explicit`) with one.
pub fn classify(path: &Path, bytes: &[u8], explicit: bool) -> Option<SourceKind> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if pm2::is_pm2_name(name) {
        return Some(SourceKind::Pm2);
    }
    if crontab::is_crontab_path(path) {
        return Some(SourceKind::Crontab);
    }
    let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
    // A kustomization names CronJobs (a patch's `target: {kind: CronJob}`) but is none.
    let kustomization = kubernetes::KUSTOMIZATION_NAMES.contains(&name);
    if (yaml || explicit) && !kustomization && kubernetes::looks_like_cronjob(bytes) {
        return Some(SourceKind::Kubernetes);
    }
    None
}

/// What `batchguard.toml` `[sources]` tells the readers (SPEC 3.6).
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The zone of crontab lines without `CRON_TZ=` (`crontab_timezone`); UTC when unset.
    pub crontab_timezone: Option<String>,
    /// The file is declared system-format (`crontab_user_column` globs), or copied into
    /// `/etc/cron.d` by a Dockerfile: a user column sits between the schedule and the
    /// command.
    pub crontab_user_column: bool,
    /// The file is installed as a busybox `crontabs/<user>` file: no user column.
    pub crontab_no_user_column: bool,
    /// What runs the crontab (a Dockerfile, compose file or `[sources] crontab_runner`);
    /// `None`: Debian cron, assumed.
    pub crontab_runner: Option<runner::CrontabRunner>,
}

/// Reads one source file. Never fails: every problem is a located [`Problem`].
pub fn read(kind: SourceKind, path: &Path, bytes: &[u8], opts: &ReadOptions) -> Read {
    if kind == SourceKind::Code {
        // Its bounds are its own (size, minified, nesting) and bytes are read lossily.
        return code::read(path, bytes);
    }
    if bytes.len() > crate::manifest::load::MAX_FILE_BYTES {
        return Read {
            problems: vec![Problem {
                issue: Issue::InputLimit,
                span: Span::default(),
                message: format!(
                    "the file is {} bytes, over the {} MiB limit",
                    bytes.len(),
                    crate::manifest::load::MAX_FILE_BYTES / 1024 / 1024
                ),
                help: "split the file; registration sources are small".into(),
            }],
            ..Read::default()
        };
    }
    if kind == SourceKind::Crontab {
        // cron reads bytes: a byte that is not UTF-8 costs its line, not the file.
        return crontab::read_bytes(path, bytes, opts);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.to_owned(),
        Err(e) => {
            return Read {
                problems: vec![Problem {
                    issue: Issue::YamlSyntax,
                    span: Span::new(e.valid_up_to(), 1),
                    message: format!(
                        "the file is not valid UTF-8 (byte {} is not part of a character)",
                        e.valid_up_to()
                    ),
                    help: "save the file as UTF-8 text".into(),
                }],
                text: String::from_utf8_lossy(bytes).into_owned(),
                ..Read::default()
            };
        }
    };
    let mut read = match kind {
        // Read from its bytes above.
        SourceKind::Code => Read::default(),
        SourceKind::Kubernetes => {
            let mut read = kubernetes::read(&text);
            (read.runners, read.hpas) = code::runners::kubernetes(path, &text);
            read
        }
        SourceKind::Pm2 => pm2::read(path, &text),
        SourceKind::Crontab => crontab::read(path, &text, opts),
    };
    read.text = text;
    read
}

/// The value at `key` of a mapping node.
pub(crate) fn get<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
            .map(|(_, v)| v),
        _ => None,
    }
}

pub(crate) fn str_at(node: &Node) -> Option<Spanned<String>> {
    match &node.value {
        Value::Str(s) => Some(Spanned {
            value: s.clone(),
            span: node.span,
        }),
        Value::Int(i) => Some(Spanned {
            value: i.to_string(),
            span: node.span,
        }),
        _ => None,
    }
}

pub(crate) fn int_at(node: &Node) -> Option<Spanned<i128>> {
    match &node.value {
        Value::Int(i) => Some(Spanned {
            value: *i,
            span: node.span,
        }),
        _ => None,
    }
}

/// Argv words of a list node (non-strings skipped).
pub(crate) fn words(node: &Node) -> Vec<String> {
    match &node.value {
        Value::Seq(items) => items
            .iter()
            .filter_map(|n| str_at(n).map(|s| s.value))
            .collect(),
        Value::Str(s) => split_words(s),
        _ => Vec::new(),
    }
}

/// Finds `needle` in `text` at or after `from`, as a quoted or plain token; used to point
/// into a `.js` ecosystem file whose values were read by evaluating it.
pub(crate) fn find_token(text: &str, needle: &str, from: usize) -> Option<Span> {
    if needle.is_empty() {
        return None;
    }
    let hay = text.get(from..)?;
    for q in ["\"", "'", "`"] {
        let quoted = format!("{q}{needle}{q}");
        if let Some(i) = hay.find(&quoted) {
            return Some(Span::new(from + i, quoted.len()));
        }
    }
    hay.find(needle).map(|i| Span::new(from + i, needle.len()))
}
