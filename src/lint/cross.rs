//! Cross-file analysis (SPEC 3.5): after every file is read, all manifest jobs and all
//! registrations are looked at together, for the rules no single file can decide:
//! duplicates (BG601), effective concurrency (BG602, BG606), drift (BG608) and the
//! dependency graph (BG701-BG703). `batchguard graph` draws the same [`Analysis`].
//!
//! Cost stays linear-ish: ties and `service/name` keys are hash lookups; the "same command,
//! overlapping schedule" test buckets places by a key every matching command shares
//! (program basename and the last path component of each argument, SPEC 3.6), compares
//! command identities only within a bucket and slots only between matching commands (once
//! per distinct schedule), so 10,000 jobs with distinct commands cost no slot enumeration.

use crate::finding::RuleMeta;
use crate::finding::{Finding, Location};
use crate::schedule::{Dialect, Schedule};
use crate::sources::command::{self, Identity};
use crate::sources::{Registration, SourceKind};
use crate::text::SourceFile;
use crate::text::Span;
use crate::text::Spanned;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use petgraph::graph::{DiGraph, NodeIndex};
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
}

const YEAR_SECS: i64 = 366 * 24 * 3600;

/// Distinct schedules of one command compared slot by slot. Real trees have a handful; the
/// cap bounds time and memory (a minutely schedule is ~527,000 slots a year) on hostile input.
pub const MAX_SCHEDULES_PER_COMMAND: usize = 32;

type ScheduleKey = (Option<String>, Dialect, String);

fn tz_of(name: &str) -> Option<TimeZone> {
    TimeZone::get(name).ok()
}

/// Slots of a schedule in the 12 months from `now`, as seconds; None when it cannot be read.
pub fn year_slots(expr: &str, dialect: Dialect, zone: &str, now: Timestamp) -> Option<Vec<i64>> {
    let s = Schedule::parse(expr, dialect).ok()?;
    let tz = tz_of(zone)?;
    let to = Timestamp::from_second(now.as_second().saturating_add(YEAR_SECS)).ok()?;
    Some(
        s.slots(&tz, now, to)
            .into_iter()
            .map(|t| t.as_second())
            .collect(),
    )
}

fn share_a_slot(a: &[i64], b: &[i64]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

struct Dsu(Vec<usize>);
impl Dsu {
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
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
        };
        a.resolve_ties();
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
                            f.shown_text()
                                .get(reg.command_span.start..reg.command_span.end())
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

    fn by_key(&self) -> HashMap<String, Vec<usize>> {
        let mut m: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            m.entry(j.key()).or_default().push(i);
        }
        m
    }

    fn resolve_ties(&mut self) {
        let keys = self.by_key();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            by_name.entry(j.name.as_str()).or_default().push(i);
        }
        self.ties = self
            .project
            .regs
            .iter()
            .map(|r| {
                let tie = r.tie.as_ref()?;
                if let Some(svc) = &tie.service {
                    return keys.get(&format!("{svc}/{}", tie.job))?.first().copied();
                }
                let cands = by_name.get(tie.job.as_str())?;
                if cands.len() == 1 {
                    return cands.first().copied();
                }
                // `--manifest PATH` picks among services by the manifest's file name.
                let m = tie.manifest.as_deref()?;
                let base = m.rsplit('/').next().unwrap_or(m);
                let hits: Vec<usize> = cands
                    .iter()
                    .copied()
                    .filter(|&j| {
                        self.files
                            .get(self.project.jobs[j].file)
                            .is_some_and(|f| f.display.ends_with(base))
                    })
                    .collect();
                (hits.len() == 1).then(|| hits[0])
            })
            .collect();
    }

    /// The namespace that separates a place from CronJobs of other namespaces (SPEC 3.6):
    /// a Kubernetes registration's `metadata.namespace`; None (any) elsewhere.
    fn namespace(&self, p: Place) -> Option<&str> {
        match p {
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                (reg.kind == SourceKind::Kubernetes)
                    .then(|| reg.namespace.as_ref().map(|n| n.value.as_str()))
                    .flatten()
            }
            Place::Job(_) => None,
        }
    }

    /// The command identity of a place that takes part in "same command" duplicates:
    /// enabled manifest jobs and untied, unsuspended registrations with a command.
    fn identity_of(&self, p: Place) -> Option<Identity> {
        let id = match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                if !job.enabled {
                    return None;
                }
                command::identity(&job.command, None)
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                if self.ties[r].is_some() || reg.suspended() {
                    return None;
                }
                command::identity(&reg.command, reg.workdir.as_ref().map(|w| w.value.as_str()))
            }
        };
        (!id.is_empty()).then_some(id)
    }

    fn build_groups(&mut self) {
        let nj = self.project.jobs.len();
        let nr = self.project.regs.len();
        let idx = |p: Place| match p {
            Place::Job(j) => j,
            Place::Reg(r) => nj + r,
        };
        let mut dsu = Dsu((0..nj + nr).collect());
        for same in self.by_key().values() {
            for w in same.windows(2) {
                dsu.union(w[0], w[1]);
            }
        }
        for (r, t) in self.ties.iter().enumerate() {
            if let Some(j) = t {
                dsu.union(nj + r, *j);
            }
        }
        // Same command (SPEC 3.6), then slots. Places are bucketed by a key every matching
        // command shares (program basename, last path component of each argument), so
        // distinct commands are never compared, let alone their slots enumerated.
        let places: Vec<(Place, Identity)> = (0..nj)
            .map(Place::Job)
            .chain((0..nr).map(Place::Reg))
            .filter_map(|p| self.identity_of(p).map(|id| (p, id)))
            .collect();
        let mut buckets: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
        for (i, (_, id)) in places.iter().enumerate() {
            buckets.entry(id.bucket_key()).or_default().push(i);
        }
        for bucket in buckets.values().filter(|b| b.len() > 1) {
            self.join_same_commands(&places, bucket, &mut |a, b| dsu.union(idx(a), idx(b)));
        }
        let mut roots: HashMap<usize, usize> = HashMap::new();
        let all = (0..nj).map(Place::Job).chain((0..nr).map(Place::Reg));
        for p in all {
            let root = dsu.find(idx(p));
            let g = *roots.entry(root).or_insert_with(|| {
                self.groups.push(Group::default());
                self.groups.len() - 1
            });
            self.groups[g].places.push(p);
            self.group_of.insert(p, g);
        }
        let mut tie_count: HashMap<usize, u64> = HashMap::new();
        for (r, t) in self.ties.iter().enumerate() {
            if let Some(j) = t
                && !self.project.regs[r].suspended()
            {
                *tie_count.entry(*j).or_default() += 1;
            }
        }
        let mut groups = std::mem::take(&mut self.groups);
        for g in &mut groups {
            g.places
                .sort_by(|a, b| self.order_key(*a).cmp(&self.order_key(*b)));
            // CronJobs of different namespaces are separate runners (staging and
            // production of one job): count per namespace, with the places that have none
            // (manifest jobs, other sources) in every count.
            let mut namespaces: Vec<&str> =
                g.places.iter().filter_map(|p| self.namespace(*p)).collect();
            namespaces.sort_unstable();
            namespaces.dedup();
            let passes: Vec<Option<&str>> = if namespaces.is_empty() {
                vec![None]
            } else {
                namespaces.into_iter().map(Some).collect()
            };
            let (mut most_runners, mut most_instances) = (0u64, 0u64);
            for ns in passes {
                let mut runners = 0u64;
                let mut instances = 0u64;
                for p in &g.places {
                    if ns.is_some() && self.namespace(*p).is_some_and(|n| Some(n) != ns) {
                        continue;
                    }
                    match *p {
                        Place::Job(j) => {
                            // A job with registrations runs where they are.
                            if tie_count.get(&j).copied().unwrap_or(0) == 0 {
                                runners += 1;
                                instances =
                                    instances.saturating_add(self.project.jobs[j].instances);
                            }
                        }
                        Place::Reg(r) => {
                            let reg = &self.project.regs[r];
                            if reg.suspended() {
                                continue;
                            }
                            runners += 1;
                            instances = instances.saturating_add(reg.instances);
                        }
                    }
                }
                most_runners = most_runners.max(runners);
                most_instances = most_instances.max(instances);
            }
            g.instances = most_instances;
            g.duplicate = most_runners >= 2;
        }
        self.groups = groups;
    }

    /// Joins the places of one bucket that run the same command on schedules sharing a
    /// slot. Equal identities form one class (compared once); classes are compared
    /// pairwise with the tail rule. Slots are enumerated once per distinct schedule.
    fn join_same_commands(
        &self,
        places: &[(Place, Identity)],
        bucket: &[usize],
        union: &mut dyn FnMut(Place, Place),
    ) {
        type Sub = (usize, Vec<Place>);
        let mut class_of: HashMap<(&Identity, Option<&str>), usize> = HashMap::new();
        // (identity, namespace, places by schedule: (index into `scheds`, places))
        let mut classes: Vec<(&Identity, Option<&str>, Vec<Sub>)> = Vec::new();
        let mut sched_of: HashMap<ScheduleKey, usize> = HashMap::new();
        let mut scheds: Vec<Place> = Vec::new();
        for &i in bucket {
            let (p, id) = (&places[i].0, &places[i].1);
            let ns = self.namespace(*p);
            let c = *class_of.entry((id, ns)).or_insert_with(|| {
                classes.push((id, ns, Vec::new()));
                classes.len() - 1
            });
            let key = self.schedule_key(*p);
            let s = match sched_of.get(&key) {
                Some(&s) => s,
                None if scheds.len() < MAX_SCHEDULES_PER_COMMAND => {
                    sched_of.insert(key, scheds.len());
                    scheds.push(*p);
                    scheds.len() - 1
                }
                None => continue,
            };
            let subs = &mut classes[c].2;
            match subs.iter_mut().find(|(k, _)| *k == s) {
                Some((_, ps)) => ps.push(*p),
                None => subs.push((s, vec![*p])),
            }
        }
        // Classes without relative words can match only classes with the same exact key
        // (or a relative one, which compares itself with every class): thousands of
        // `node /srv/app-N/index.js` in one bucket are not compared pairwise.
        let all_classes: Vec<usize> = (0..classes.len()).collect();
        let mut exact: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
        for (c, (id, _, _)) in classes.iter().enumerate() {
            if !id.has_relative() {
                exact.entry(id.exact_key()).or_default().push(c);
            }
        }
        let slots: Vec<Option<Vec<i64>>> = scheds.iter().map(|&p| self.slots_of(p)).collect();
        let meets = |a: usize, b: usize| match (&slots[a], &slots[b]) {
            (Some(x), Some(y)) => share_a_slot(x, y),
            _ => false,
        };
        for (c, (id, ns, subs)) in classes.iter().enumerate() {
            for (k, (s, ps)) in subs.iter().enumerate() {
                if slots[*s].as_ref().is_some_and(|v| !v.is_empty()) {
                    for w in ps.windows(2) {
                        union(w[0], w[1]);
                    }
                }
                for (t, qs) in &subs[k + 1..] {
                    if meets(*s, *t) {
                        union(ps[0], qs[0]);
                    }
                }
            }
            let relative = id.has_relative();
            let others: &[usize] = if relative {
                &all_classes
            } else {
                exact.get(&id.exact_key()).map_or(&[], Vec::as_slice)
            };
            for &d in others {
                let (id2, ns2, subs2) = &classes[d];
                // Each pair is met once: a relative class meets every class (another
                // relative one only from the first of the two), an exact group its
                // later members.
                if d == c || ((!relative || id2.has_relative()) && d < c) {
                    continue;
                }
                let other_namespace = matches!((ns, ns2), (Some(a), Some(b)) if a != b);
                if other_namespace || !id.same_command(id2) {
                    continue;
                }
                for (s, ps) in subs {
                    for (t, qs) in subs2 {
                        if meets(*s, *t) {
                            union(ps[0], qs[0]);
                        }
                    }
                }
            }
        }
    }

    fn schedule_key(&self, p: Place) -> ScheduleKey {
        match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                (
                    job.schedule.as_ref().map(|s| s.value.clone()),
                    job.dialect,
                    job.zone().to_owned(),
                )
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                (
                    reg.schedule.as_ref().map(|s| s.value.clone()),
                    reg.dialect,
                    reg.zone().to_owned(),
                )
            }
        }
    }

    fn slots_of(&self, p: Place) -> Option<Vec<i64>> {
        match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                let s = job.schedule.as_ref()?;
                year_slots(&s.value, job.dialect, job.zone(), self.now)
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                let s = reg.schedule.as_ref()?;
                year_slots(&s.value, reg.dialect, reg.zone(), self.now)
            }
        }
    }

    fn build_graph(&mut self) {
        let jobs = &self.project.jobs;
        let keys = self.by_key();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            by_name.entry(j.name.as_str()).or_default().push(i);
        }
        let names: Vec<&str> = keys.keys().map(String::as_str).collect();
        self.deps = jobs
            .iter()
            .map(|job| {
                job.depends_on
                    .iter()
                    .map(|d| {
                        let want = d.value.as_str();
                        if want.contains('/') {
                            return match keys.get(want).and_then(|v| v.first()) {
                                Some(&j) => Dep::Resolved(j),
                                None => Dep::Unknown {
                                    suggestion: crate::text::closest(want, &names)
                                        .map(str::to_owned),
                                },
                            };
                        }
                        if let Some(&j) = keys
                            .get(&format!("{}/{want}", job.service))
                            .and_then(|v| v.first())
                        {
                            return Dep::Resolved(j);
                        }
                        match by_name.get(want).map(Vec::as_slice) {
                            Some([j]) => Dep::Resolved(*j),
                            Some(many) if !many.is_empty() => {
                                let mut c: Vec<String> =
                                    many.iter().map(|&j| jobs[j].key()).collect();
                                c.sort();
                                c.dedup();
                                if c.len() == 1 {
                                    Dep::Resolved(many[0])
                                } else {
                                    Dep::Ambiguous(c)
                                }
                            }
                            _ => {
                                let local: Vec<&str> = jobs
                                    .iter()
                                    .filter(|j| j.service == job.service)
                                    .map(|j| j.name.as_str())
                                    .collect();
                                Dep::Unknown {
                                    suggestion: crate::text::closest(want, &local)
                                        .map(str::to_owned),
                                }
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let nodes: Vec<NodeIndex> = (0..jobs.len()).map(|j| g.add_node(j)).collect();
        for (j, deps) in self.deps.iter().enumerate() {
            for d in deps {
                if let Dep::Resolved(t) = d {
                    g.update_edge(nodes[j], nodes[*t], ());
                }
            }
        }
        for scc in petgraph::algo::tarjan_scc(&g) {
            let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
            if scc.len() < 2 && !self_loop {
                continue;
            }
            let members: Vec<usize> = scc.iter().map(|n| g[*n]).collect();
            let Some(&start) = members.iter().min_by(|a, b| {
                self.order_key(Place::Job(**a))
                    .cmp(&self.order_key(Place::Job(**b)))
            }) else {
                continue;
            };
            self.cycles.push(self.cycle_from(start, &members));
        }
        let mut cycles = std::mem::take(&mut self.cycles);
        cycles.sort_by(|a, b| {
            self.order_key(Place::Job(a[0]))
                .cmp(&self.order_key(Place::Job(b[0])))
        });
        self.cycles = cycles;
    }

    /// A shortest cycle through `start` inside the strongly connected `members`.
    fn cycle_from(&self, start: usize, members: &[usize]) -> Vec<usize> {
        let members: std::collections::HashSet<usize> = members.iter().copied().collect();
        let inside = |j: usize| members.contains(&j);
        let succ = |j: usize| -> Vec<usize> {
            self.deps[j]
                .iter()
                .filter_map(|d| match d {
                    Dep::Resolved(t) if inside(*t) => Some(*t),
                    _ => None,
                })
                .collect()
        };
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(j) = queue.pop_front() {
            for t in succ(j) {
                if t == start {
                    let mut path = vec![j];
                    let mut cur = j;
                    while cur != start {
                        cur = parent.get(&cur).copied().unwrap_or(start);
                        path.push(cur);
                    }
                    path.reverse();
                    return path;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(t) {
                    e.insert(j);
                    queue.push_back(t);
                }
            }
        }
        vec![start]
    }
}

/// What a per-registration rule sees.
pub struct RegCx<'a> {
    pub reg: &'a Registration,
    pub text: &'a str,
}

/// Reads one registration source and runs the per-registration rules on it.
pub fn lint_source(
    kind: crate::sources::SourceKind,
    path: &std::path::Path,
    bytes: &[u8],
    opts: &super::LintOptions,
    read_options: &crate::sources::ReadOptions,
) -> super::FileLint {
    let read = crate::sources::read(kind, path, bytes, read_options);
    let mut file = SourceFile::new(path.to_path_buf(), super::display_path(path), read.text);
    let mut findings = Vec::new();
    for root in &read.roots {
        let cx = super::FileCx {
            root,
            text: &file.text,
        };
        for rule in crate::lint::rules::all() {
            let mut em = super::rule::Emitter {
                meta: rule.meta(),
                file: 0,
                service: "",
                job: None,
                job_line: None,
                out: &mut findings,
            };
            rule.check_file(&cx, &mut em);
        }
    }
    for p in &read.problems {
        let Some(meta) = crate::REGISTRY.find(p.code) else {
            continue;
        };
        findings.push(
            Finding::new(
                meta,
                Location {
                    file: 0,
                    span: p.span,
                },
                p.message.clone(),
            )
            .help(p.help.clone()),
        );
    }
    for reg in &read.registrations {
        let cx = RegCx {
            reg,
            text: &file.text,
        };
        let service = reg
            .tie
            .as_ref()
            .and_then(|t| t.service.clone())
            .unwrap_or_default();
        let line = file.line_col(reg.span.start).0;
        for rule in crate::lint::rules::all() {
            let mut em = super::rule::Emitter {
                meta: rule.meta(),
                file: 0,
                service: &service,
                job: Some(&reg.label),
                job_line: Some(line),
                out: &mut findings,
            };
            rule.check_registration(&cx, &mut em);
        }
    }
    for reg in &read.registrations {
        schedule_rules(reg, &file, opts, &mut findings);
    }
    for f in &mut findings {
        if f.service.as_deref() == Some("") {
            f.service = None;
        }
        if f.code == super::rules::bg801_plaintext_secret::PlaintextSecret::META.code {
            file.mask(f.at.span);
        }
    }
    let findings = super::apply_suppressions(&file, findings, &opts.settings);
    super::FileLint {
        file,
        findings,
        jobs: 0,
        facts: Vec::new(),
        regs: read.registrations,
        notes: read.notes,
    }
}

/// The schedule and timezone rules (SPEC 3.5: BG1xx apply to registrations) that need no
/// manifest declaration. BG104 and BG408 compare with `expected_duration` and the retry
/// policy, which only a manifest carries.
const REGISTRATION_SCHEDULE_RULES: &[&str] = &[
    "BG101", "BG102", "BG103", "BG105", "BG106", "BG107", "BG108",
];

/// Runs the schedule rules on a registration by presenting it as a job whose only
/// declarations are its schedule, zone and dialect, so the rules stay written once.
fn schedule_rules(
    reg: &Registration,
    file: &SourceFile,
    opts: &super::LintOptions,
    out: &mut Vec<Finding>,
) {
    use crate::manifest::model::{Deployment, Field, Job, Manifest, Scheduler};
    use crate::text::Spanned;
    let Some(sched) = &reg.schedule else {
        return;
    };
    let Some(scheduler) = Scheduler::from_word(reg.dialect.as_str()) else {
        return;
    };
    let sp = |a: &Spanned<String>| {
        Field::Ok(Spanned {
            value: a.value.clone(),
            span: a.span,
        })
    };
    let manifest = Manifest {
        deployment: Field::Ok(Spanned {
            value: Deployment {
                scheduler: Field::Ok(Spanned {
                    value: scheduler,
                    span: reg.span,
                }),
                ..Deployment::default()
            },
            span: reg.span,
        }),
        ..Manifest::default()
    };
    let job = Job {
        name: Field::Ok(Spanned {
            value: reg.label.replace('`', ""),
            span: reg.span,
        }),
        schedule: sp(sched),
        timezone: reg.timezone.as_ref().map_or(Field::Absent, sp),
        enabled: Field::Ok(Spanned {
            value: !reg.suspended(),
            span: reg.span,
        }),
        span: reg.span,
        ..Job::default()
    };
    let cx = super::JobCx {
        job: &job,
        manifest: &manifest,
        service: "",
        scheduler,
        settings: &opts.settings,
        now: opts.now,
        text: &file.text,
        schedule: Some(Schedule::parse(&sched.value, reg.dialect)),
        tz: match &reg.timezone {
            None => Some(TimeZone::UTC),
            Some(z) => TimeZone::get(&z.value).ok(),
        },
        gap_12m: std::sync::OnceLock::new(),
    };
    let line = file.line_col(reg.span.start).0;
    let before = out.len();
    for rule in crate::lint::rules::all()
        .iter()
        .filter(|r| REGISTRATION_SCHEDULE_RULES.contains(&r.meta().code))
    {
        let mut em = super::rule::Emitter {
            meta: rule.meta(),
            file: 0,
            service: "",
            job: Some(&reg.label),
            job_line: Some(line),
            out: &mut *out,
        };
        rule.check_job(&cx, &mut em);
    }
    if reg.zone_assumed {
        // BG103 speaks of the zone: say that it was assumed, not written.
        for f in out.iter_mut().skip(before).filter(|f| f.code == "BG103") {
            f.message.push_str(&format!("; zone: {}", reg.zone_label()));
        }
    }
}

/// The facts of a manifest's jobs that the cross-file rules need (defaults merged in).
pub fn manifest_facts(
    loaded: &crate::manifest::load::Loaded,
    service: &str,
    file: &SourceFile,
) -> Vec<ManifestJob> {
    use crate::manifest::model::Command;
    let sat = |f: &crate::manifest::model::Field<String>| {
        f.get().map(|s| Spanned {
            value: s.value.clone(),
            span: s.span,
        })
    };
    loaded
        .jobs
        .iter()
        .enumerate()
        .map(|(i, job)| {
            let span = job.name.get().map_or(job.span, |n| n.span);
            // Each job's own deployment over the manifest's (SPEC 2).
            let deployment = loaded.manifest.deployment_of(job);
            let dialect = super::dialect_of(deployment.scheduler);
            let instances = deployment.instances.as_ref();
            let (command, command_text) = match job.command.value() {
                Some(Command::Argv(v)) => {
                    let argv: Vec<String> = v.iter().map(|s| s.value.clone()).collect();
                    let text = command::shell_join(&argv);
                    (argv, text)
                }
                Some(Command::Shell(s)) => (crate::sources::split_words(s), s.clone()),
                None => (Vec::new(), String::new()),
            };
            let lock = job.lock.get();
            let depends_on = match job.depends_on.value() {
                Some(list) => list
                    .iter()
                    .map(|d| Spanned {
                        value: d.value.clone(),
                        span: d.span,
                    })
                    .collect(),
                None => Vec::new(),
            };
            ManifestJob {
                file: 0,
                service: service.to_owned(),
                name: job
                    .name
                    .value()
                    .cloned()
                    .unwrap_or_else(|| format!("jobs[{i}]")),
                span,
                job_line: file.line_col(job.span.start).0,
                schedule: sat(&job.schedule),
                timezone: sat(&job.timezone),
                dialect,
                command,
                command_text,
                instances: instances.map_or(1, |n| n.value.max(1)),
                instances_span: instances.map(|n| n.span),
                locked: lock.is_some_and(|l| !l.value.is_disabled()),
                lock_span: lock.map(|l| l.span),
                depends_on,
                expected_secs: job.expected_duration.value().map(|d| d.secs()),
                enabled: job.enabled.value() != Some(&false),
            }
        })
        .collect()
}

/// Collects one cross-file rule's findings.
pub struct CrossEmitter<'a> {
    pub(crate) meta: &'static RuleMeta,
    pub(crate) out: &'a mut Vec<Finding>,
}

impl CrossEmitter<'_> {
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &mut self,
        at: Location,
        service: Option<String>,
        job: Option<String>,
        message: String,
        help: String,
        related: Vec<(Location, String)>,
    ) {
        self.out.push(
            Finding::new(self.meta, at, message)
                .help(help)
                .subject(service, job, None)
                .related(related),
        );
    }
}

/// Codes whose findings come from the cross-file pass. A per-file pass cannot tell whether
/// an `allow` of one of them is used, so it leaves them to [`run`] (which never reports
/// them as unused: BG902 does not cover these codes).
pub const CROSS_CODES: &[&str] = &[
    "BG601", "BG602", "BG606", "BG608", "BG701", "BG702", "BG703",
];

/// True for a code or name of a cross-file rule.
pub fn is_cross_code(code: &str) -> bool {
    crate::REGISTRY
        .find(code)
        .is_some_and(|m| CROSS_CODES.contains(&m.code))
}

/// Runs every cross-file rule over the project and applies `batchguard: allow` comments on
/// the line of each finding (or alone on the line above it).
pub fn run(analysis: &Analysis) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in crate::lint::rules::all() {
        let mut em = CrossEmitter {
            meta: rule.meta(),
            out: &mut out,
        };
        rule.check_project(analysis, &mut em);
    }
    let mut scanned: HashMap<usize, Vec<super::suppress::Suppression>> = HashMap::new();
    for f in &mut out {
        let Some(file) = analysis.files.get(f.at.file) else {
            continue;
        };
        let sups = scanned
            .entry(f.at.file)
            .or_insert_with(|| super::suppress::scan(&file.text));
        let line = file.line_col(f.at.span.start).0;
        for s in sups.iter().filter(|s| s.reason.is_some()) {
            let applies = s.line == line || (s.own_line && s.line + 1 == line);
            if applies && s.codes.iter().any(|c| c.0 == f.code || c.0 == f.name) {
                f.suppressed = s.reason.clone();
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_sets_intersect() {
        assert!(share_a_slot(&[1, 5, 9], &[2, 9]));
        assert!(!share_a_slot(&[1, 5], &[2, 6]));
    }
}
