use crate::declare_rule;
use crate::finding::Location;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::manifest::model::LockStore;
use crate::project::{Analysis, Place, Scheme, StoreFrom, StoreOfRun, shared};
use crate::sources::SourceKind;
use crate::sources::pm2::describe_instances;
use std::collections::HashMap;

declare_rule! {
    /// ## What it does
    /// Looks at every registration that calls `batchguard run` for a manifest job (a
    /// crontab line, a CronJob container's command, a PM2 app's script and args) and at
    /// the store `run` will use there: `--store URL`, else `BATCHGUARD_STORE` in the
    /// registration's environment (in front of the command, a crontab env line above it, the
    /// container's `env`, the PM2 app's `env`), else `[run] store` in `batchguard.toml`
    /// (SPEC 7.1 item 13). It reports:
    ///
    /// - a job whose `lock.store` is `postgres`, `mysql` or `redis` called with none of
    ///   the three, on a platform with several hosts: a Kubernetes CronJob, a PM2 app with
    ///   more than one instance or in cluster mode, a job registered in more than one place
    ///   (two crontabs on two hosts), or a manifest job with `deployment.instances` > 1 or
    ///   `platform: kubernetes`;
    /// - a store URL whose kind is not the job's `lock.store` (`--store redis://…` for a
    ///   `lock: {store: postgres}` job), or a value that is no store URL at all
    ///   (`postgress://…`, `store.db`): `run` refuses both at every tick.
    ///
    /// A value lint cannot read (`--store "$STORE"`, `$(VAR)`, a `valueFrom` or an
    /// `envFrom` in the container, a value an ecosystem file computes) counts as given: the
    /// wiring that keeps a password out of the repository is not reported. Its kind is
    /// checked only when its scheme is written out (`postgres://batch:$PW@db/ops`). One
    /// crontab line on one host with no store is not reported: `run` refuses it on its
    /// first tick, and nothing runs twice.
    ///
    /// ## Why it matters
    /// A lock guards only the processes that take it in the same place. Without a store,
    /// each host would lock a file of its own (`.batchguard/store.db`), every host would
    /// win its own lock, and every host would run the slot: the incident this tool exists
    /// to prevent, recreated by one missing flag. `run` refuses such a job (exit 125)
    /// rather than fall back to a local file, so the job does not run at all until the
    /// store is given; a store of another kind is refused the same way. Lint says it
    /// before the deploy, not at the first tick.
    ///
    /// ## Example
    /// ```text
    /// billing.batchguard.yaml   settle-payments: lock: {store: postgres, …}
    /// hosts/batch-01.crontab    0 * * * * batchguard run --job settle-payments -- node jobs/settle.js
    /// hosts/batch-02.crontab    0 * * * * batchguard run --job settle-payments -- node jobs/settle.js
    /// ```
    ///
    /// Use instead: give every registration the job's store, in one of three ways:
    /// ```text
    /// 0 * * * * batchguard run --job settle-payments --store postgres://batch@db/ops -- node jobs/settle.js
    /// BATCHGUARD_STORE=postgres://batch@db/ops          (an env line above the job lines)
    /// [run] store = "postgres://batch@db/ops"           (batchguard.toml)
    /// ```
    pub struct RunWithoutStore {
        code: "BG614",
        name: "run-without-store",
        severity: Error,
        scope: Project,
        summary: "a registration calls `batchguard run` for a job whose `lock.store` is postgres, mysql or redis with no store URL (no `--store`, no `BATCHGUARD_STORE`, no `[run] store`) on several hosts, or with a store URL of another kind",
        help: "give `run` the job's store: `--store URL`, `BATCHGUARD_STORE=URL` in the registration's environment, or `[run] store` in batchguard.toml",
    }
}

/// Registrations named in a message; the count is always said.
const MAX_LISTED: usize = 5;

/// The help line: the three ways, with the job's store kind in them.
fn three_ways(kind: LockStore) -> String {
    let url = match kind {
        LockStore::Sqlite => "sqlite:PATH".to_owned(),
        _ => format!("{}://…", kind.as_str()),
    };
    format!(
        "give `run` the job's {kind} store in one of three ways: `--store {url}` on the command, `BATCHGUARD_STORE={url}` in the registration's environment, or `[run] store = \"{url}\"` in batchguard.toml",
        kind = kind.as_str()
    )
}

/// Why registration `r` of job `j` runs on several hosts, when it does. `tied`: the
/// unsuspended registrations of each job.
fn several_hosts(
    cx: &Analysis,
    r: usize,
    j: usize,
    tied: &HashMap<usize, Vec<usize>>,
) -> Option<String> {
    let reg = &cx.project.regs[r];
    if reg.kind == SourceKind::Kubernetes {
        return Some("a Kubernetes CronJob, whose pods run on any node".to_owned());
    }
    if reg.kind == SourceKind::Pm2 && (reg.instances > 1 || reg.cluster) {
        let mode = if reg.cluster { "cluster" } else { "fork" };
        if reg.instances < 2 {
            return Some(format!("a PM2 app in {mode} mode"));
        }
        let written = reg
            .instances_span
            .and_then(|s| cx.files.get(reg.file)?.text.get(s.start..s.end()))
            .unwrap_or("");
        return Some(format!(
            "a PM2 app in {mode} mode with {}",
            describe_instances(written, reg.instances)
        ));
    }
    let regs = tied.get(&j).map(Vec::as_slice).unwrap_or_default();
    let mut places: Vec<String> = regs
        .iter()
        .take(MAX_LISTED)
        .map(|&k| {
            let label = &cx.project.regs[k].label;
            format!("{label} at {}", cx.where_(Place::Reg(k)))
        })
        .collect();
    if regs.len() > 1 {
        if regs.len() > MAX_LISTED {
            places.push(format!("and {} more", regs.len() - MAX_LISTED));
        }
        return Some(format!(
            "registered in {} places: {}",
            regs.len(),
            places.join(", ")
        ));
    }
    let job = &cx.project.jobs[j];
    if job.instances > 1 {
        return Some(format!("deployment.instances: {}", job.instances));
    }
    job.kubernetes
        .then(|| "deployment.platform: kubernetes".to_owned())
}

impl Rule for RunWithoutStore {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        let mut tied: HashMap<usize, Vec<usize>> = HashMap::new();
        for (r, reg) in cx.project.regs.iter().enumerate() {
            if let Some(j) = cx.ties[r]
                && !reg.suspended()
            {
                tied.entry(j).or_default().push(r);
            }
        }
        for (r, reg) in cx.project.regs.iter().enumerate() {
            let Some(j) = cx.ties[r] else { continue };
            if reg.suspended() {
                continue;
            }
            let job = &cx.project.jobs[j];
            let Some(declared) = job.lock_store else {
                continue;
            };
            let Some(store) = cx.store_of_run(r) else {
                continue; // not a `batchguard run`: BG602/BG607 speak of it
            };
            let subject = format!("job `{}`", job.key());
            let here = Location {
                file: reg.file,
                span: reg.span,
            };
            let (at, message) = match store {
                None => {
                    if !shared(declared) {
                        continue; // a SQLite job falls back to the local file, as meant
                    }
                    let Some(why) = several_hosts(cx, r, j, &tied) else {
                        continue;
                    };
                    (
                        here,
                        format!(
                            "{} calls `batchguard run` for {subject} (lock.store: {}) with no store: no `--store`, no `BATCHGUARD_STORE` in its environment, no `[run] store` in batchguard.toml. It runs on several hosts ({why}), each of which would lock a local file of its own and run every slot, so `run` refuses the job (exit 125) at every tick",
                            reg.label,
                            declared.as_str()
                        ),
                    )
                }
                Some(StoreOfRun {
                    scheme: Scheme::Kind(kind),
                    ..
                }) if kind == declared || declared == LockStore::Other => continue,
                Some(StoreOfRun {
                    scheme: Scheme::Reference,
                    ..
                }) => continue,
                Some(s) => {
                    let what = match s.scheme {
                        Scheme::Kind(kind) => format!(
                            "a {} store, but the job's lock.store is {}",
                            kind.as_str(),
                            declared.as_str()
                        ),
                        _ => "not a store URL (sqlite:PATH, postgres://…, mysql://…, redis://… or rediss://…)".to_owned(),
                    };
                    let at = match (s.from, s.span) {
                        (StoreFrom::Flag | StoreFrom::Env, Some(span)) => Location {
                            file: reg.file,
                            span,
                        },
                        _ => here,
                    };
                    (
                        at,
                        format!(
                            "{} calls `batchguard run` for {subject} with `{}` from {}: {what}; `run` refuses it (exit 125) at every tick, so the job never runs",
                            reg.label,
                            s.shown,
                            s.from.phrase()
                        ),
                    )
                }
            };
            out.emit(
                at,
                Some(job.service.clone()),
                Some(job.name.clone()),
                message,
                three_ways(declared),
                Vec::new(),
            );
        }
    }
}
