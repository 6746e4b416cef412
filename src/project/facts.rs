//! A loaded manifest's jobs as the cross-file model needs them (defaults merged in).

use super::ManifestJob;
use crate::sources::command;
use crate::text::{SourceFile, Spanned};

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
            let dialect = deployment.scheduler;
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
                one_host_lock: lock.is_some_and(|l| {
                    !l.value.is_disabled()
                        && l.value.store.value() == Some(&crate::manifest::model::LockStore::Sqlite)
                }),
                lock_store: lock
                    .filter(|l| !l.value.is_disabled())
                    .and_then(|l| l.value.store.value().copied()),
                kubernetes: deployment.platform
                    == Some(crate::manifest::model::Platform::Kubernetes),
                lock_span: lock.map(|l| l.span),
                depends_on,
                expected_secs: job.expected_duration.value().map(|d| d.secs()),
                enabled: job.enabled.value() != Some(&false),
            }
        })
        .collect()
}
