//! The cross-file model (SPEC 3.5): after every file is read, all manifest jobs and all
//! registrations are looked at together, for the rules no single file can decide:
//! duplicates (BG601), effective concurrency (BG602, BG606), drift (BG608) and the
//! dependency graph (BG701-BG703). `batchguard graph` draws the same [`Analysis`]; lint's project rules read it.
//!
//! Cost stays linear-ish: ties and `service/name` keys are hash lookups; the "same command,
//! overlapping schedule" test buckets places by a key every matching command shares
//! (program basename and the last path component of each argument, SPEC 3.6), compares
//! command identities only within a bucket and slots only between matching commands (once
//! per distinct schedule), so 10,000 jobs with distinct commands cost no slot enumeration.
//!
//! | room | holds |
//! |---|---|
//! | `mod.rs` | the model: [`ManifestJob`], [`Project`], [`Place`], [`Group`], [`Dep`], [`Analysis`] and how a place is named |
//! | `facts.rs` | a loaded manifest -> its [`ManifestJob`]s |
//! | `ties.rs` | registrations tied to manifest jobs |
//! | `groups.rs` | places that are one job: same key, ties, same command on a shared slot; runners per group |
//! | `stores.rs` | the store each `batchguard run` registration resolves; groups guarded by one shared store |
//! | `slots.rs` | a schedule's slots over the year ahead, compared between places |
//! | `deps.rs` | the `depends_on` graph and its cycles |
//! | `units.rs` | deploy units: the parts of the tree deployed separately, and what ties them |

mod deps;
mod facts;
mod groups;
mod slots;
mod stores;
mod ties;
mod units;

pub use facts::manifest_facts;
pub use slots::year_slots;
pub use stores::{Scheme, StoreFrom, StoreOfRun, guard_note, registrations, shared};
pub use units::{DeploySet, FileOrigin, UnitKind, Units};

use crate::finding::Location;
use crate::schedule::Dialect;
use crate::sources::command;
use crate::sources::{Registration, SourceKind};
use crate::text::{SourceFile, Span, Spanned};
use jiff::Timestamp;
use std::collections::HashMap;

/// What the analysis needs of one manifest job.
#[derive(Clone, Debug)]
pub struct ManifestJob {
    pub file: usize,
    pub service: String,
    pub name: String,
    /// The job's `name:` value (or the job item when unnamed).
    pub span: Span,
    pub job_line: usize,
    pub schedule: Option<Spanned<String>>,
    pub timezone: Option<Spanned<String>>,
    pub dialect: Dialect,
    /// The command's argv as written (a shell string split into words); compared by its
    /// identity (SPEC 3.6).
    pub command: Vec<String>,
    /// The command as written, for messages: the shell string, or the argv list quoted.
    pub command_text: String,
    pub instances: u64,
    pub instances_span: Option<Span>,
    /// A lock is declared and not disabled.
    pub locked: bool,
    /// The lock lives in a store of one host (`lock.store: sqlite`): it does not guard
    /// instances on other hosts.
    pub one_host_lock: bool,
    /// `lock.store` as declared, when the lock is not disabled.
    pub lock_store: Option<crate::manifest::model::LockStore>,
    /// The job runs on Kubernetes: its instances are pods, on any node.
    pub kubernetes: bool,
    pub lock_span: Option<Span>,
    pub depends_on: Vec<Spanned<String>>,
    pub expected_secs: Option<u64>,
    pub enabled: bool,
}

impl ManifestJob {
    pub fn key(&self) -> String {
        format!("{}/{}", self.service, self.name)
    }
    pub fn zone(&self) -> &str {
        self.timezone.as_ref().map_or("UTC", |t| t.value.as_str())
    }
}

/// Everything read in a lint run that the cross-file rules look at.
#[derive(Clone, Debug, Default)]
pub struct Project {
    pub jobs: Vec<ManifestJob>,
    pub regs: Vec<Registration>,
    /// `[run] store` of `batchguard.toml`: the store of every `batchguard run` that names
    /// none itself (SPEC 7.1 item 13).
    pub run_store: Option<String>,
    /// The deploy unit of each file (empty when not detected: one unit).
    pub units: Units,
    /// Kubernetes CronJobs without `spec.schedule` (they register nothing): an error where
    /// they would be deployed, nothing for a patch or a test fixture.
    pub unscheduled: Vec<crate::sources::Unscheduled>,
}

/// A place a job is declared or registered: a manifest job or a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    Job(usize),
    Reg(usize),
}

/// Places that are one job: a manifest job, its tied registrations, and every place that
/// duplicates it.
#[derive(Clone, Debug, Default)]
pub struct Group {
    /// In path order.
    pub places: Vec<Place>,
    /// Processes that fire each slot: one per runner (a manifest job without registrations
    /// counts its `deployment.instances`; a registration its own instances).
    pub instances: u64,
    /// Two or more places run the job (SPEC 3.5 "Duplicates").
    pub duplicate: bool,
    /// Every place that runs it is a `batchguard run` of one manifest job on one shared
    /// store: the store's lock lets one of them work each slot (the HA pattern), so the
    /// places are no duplicate (BG601). The store as shown (password masked).
    pub guarded: Option<String>,
    /// The places that duplicate each other: those of the deploy set (one unit, or units
    /// the tree ties together) where the most runners (then instances) fire the job; all
    /// places when the group lies in one unit. BG601 and BG602 report these.
    pub duplicated: Vec<Place>,
    /// What ties the units of `duplicated` when they are more than one (a kustomization, a
    /// manifest), for BG601's message.
    pub tie: Option<String>,
}

/// A resolved `depends_on` edge, or why it does not resolve.
#[derive(Clone, Debug)]
pub enum Dep {
    Resolved(usize),
    Unknown { suggestion: Option<String> },
    Ambiguous(Vec<String>),
}

pub struct Analysis<'a> {
    pub project: &'a Project,
    pub files: &'a [SourceFile],
    pub now: Timestamp,
    /// For each registration, the manifest job it is tied to.
    pub ties: Vec<Option<usize>>,
    pub groups: Vec<Group>,
    /// For each place, its group.
    pub group_of: HashMap<Place, usize>,
    /// For each job, its `depends_on` entries resolved (same order).
    pub deps: Vec<Vec<Dep>>,
    /// Dependency cycles, each as job indices in order (the first is the first in path order).
    pub cycles: Vec<Vec<usize>>,
    /// Units deployed together: the tree's deploy sets and the manifests' (a manifest
    /// whose jobs are registered in several units ties them).
    pub sets: Vec<DeploySet>,
    /// For each unit, the deploy sets it is in.
    sets_of: Vec<Vec<usize>>,
    /// For each manifest file, the units it declares jobs for: its own, and every unit
    /// below its folder that is not a test fixture.
    covered: HashMap<usize, Vec<usize>>,
}

impl<'a> Analysis<'a> {
    pub fn new(project: &'a Project, files: &'a [SourceFile], now: Timestamp) -> Self {
        let mut a = Analysis {
            project,
            files,
            now,
            ties: Vec::new(),
            groups: Vec::new(),
            group_of: HashMap::new(),
            deps: Vec::new(),
            cycles: Vec::new(),
            sets: Vec::new(),
            sets_of: Vec::new(),
            covered: HashMap::new(),
        };
        a.resolve_ties();
        a.build_sets();
        a.build_groups();
        a.build_graph();
        a
    }

    /// The file path and offset of a place, for path order.
    pub fn location(&self, p: Place) -> Location {
        match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                Location {
                    file: job.file,
                    span: job.span,
                }
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                Location {
                    file: reg.file,
                    span: reg.span,
                }
            }
        }
    }

    pub fn display(&self, file: usize) -> &str {
        self.files.get(file).map_or("?", |f| f.display.as_str())
    }

    fn order_key(&self, p: Place) -> (&str, usize) {
        let at = self.location(p);
        (self.display(at.file), at.span.start)
    }

    /// `path:line` of a place.
    pub fn where_(&self, p: Place) -> String {
        let at = self.location(p);
        let line = self
            .files
            .get(at.file)
            .map_or(0, |f| f.line_col(at.span.start).0);
        format!("{}:{line}", self.display(at.file))
    }

    /// The command of a place as its source writes it (a crontab line's own text, an argv
    /// list quoted where needed), with every secret BG801 found masked; None without one.
    pub fn command_text(&self, p: Place) -> Option<String> {
        let (file, text) = match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                (job.file, job.command_text.clone())
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                let written = (reg.kind == SourceKind::Crontab)
                    .then(|| {
                        self.files.get(reg.file).and_then(|f| {
                            let span = f.shown_span(reg.command_span);
                            f.shown_text().get(span.start..span.end())
                        })
                    })
                    .flatten()
                    .map(|t| t.trim().to_owned());
                (
                    reg.file,
                    written.unwrap_or_else(|| command::shell_join(&reg.command)),
                )
            }
        };
        let text = match self.files.get(file) {
            Some(f) => f.redact(&text),
            None => text,
        };
        (!text.is_empty()).then_some(text)
    }

    /// How a user recognises a place: `manifest job billing/settle` or `CronJob settle`.
    pub fn describe(&self, p: Place) -> String {
        match p {
            Place::Job(j) => format!("manifest job `{}`", self.project.jobs[j].key()),
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                format!("{} ({})", reg.label, reg.kind.as_str())
            }
        }
    }
}

/// The service and job name a group is reported under: its first manifest job, else the
/// first registration's label.
pub fn group_subject(a: &Analysis, g: &Group) -> (Option<String>, String) {
    for p in &g.places {
        if let Place::Job(j) = p {
            let job = &a.project.jobs[*j];
            return (Some(job.service.clone()), job.name.clone());
        }
    }
    let label = g
        .places
        .first()
        .map_or_else(String::new, |p| a.describe(*p));
    (None, label)
}
