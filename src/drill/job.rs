//! The job as a drill needs it: the guard's plan (schedule, lock, timings: the same checks
//! `run` makes) plus what only a drill reads (`replay`, `snapshot.key`, the runbook).

use super::Options;
use super::records::Format;
use crate::guard::{self, plan::Plan};
use crate::manifest::model::{Command, Field};
use std::time::Duration;

pub struct DrillJob {
    pub plan: Plan,
    pub replay: Vec<String>,
    pub verify: Option<Vec<String>>,
    /// `replay.setup` and `replay.teardown`: run once per sandbox (SPEC 7.3).
    pub setup: Option<Vec<String>>,
    pub teardown: Option<Vec<String>>,
    pub key: String,
    pub format: Format,
    pub expected: Duration,
    pub runbook: Runbook,
}

/// The runbook fields the quarterly record names.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Runbook {
    pub owner: Option<String>,
    pub on_call: Option<String>,
    pub communication: Option<String>,
    pub emergency_stop: Option<String>,
    pub resume: Option<String>,
}

fn text(f: &Field<String>) -> Option<String> {
    f.value().cloned().filter(|s| !s.trim().is_empty())
}

fn argv(c: &Field<Command>, what: &str, job: &str) -> Result<Option<Vec<String>>, String> {
    match c {
        Field::Absent => Ok(None),
        Field::Invalid => Err(format!("job `{job}` has an invalid `{what}`")),
        Field::Ok(c) => match &c.value {
            Command::Argv(v) if v.is_empty() => Err(format!("job `{job}`: `{what}` is empty")),
            Command::Argv(v) => Ok(Some(v.iter().map(|s| s.value.clone()).collect())),
            Command::Shell(s) => Err(format!(
                "job `{job}` has a one-string `{what}` (`{s}`): write it as an argv list; a drill never hands a command to a shell"
            )),
        },
    }
}

pub fn load(opts: &Options) -> Result<DrillJob, String> {
    let shown = opts.manifest.display().to_string();
    let bytes = guard::plan::read_manifest(&opts.manifest)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let (source, loaded) = crate::manifest::load::load(&bytes);
    // The guard's own reading gives the located message for a file that is no manifest
    // and the did-you-mean for a job name; so it goes first.
    let job = loaded.job(&opts.job).ok();
    let name = &opts.job;
    unknown_replay_key(&loaded, name, source.as_deref()).map_err(|e| format!("{shown}:{e}"))?;
    let replay_field = job.and_then(|j| j.replay.value());
    let replay = match replay_field.map(|r| argv(&r.command, "replay.command", name)) {
        Some(Ok(Some(v))) => Some(v),
        Some(Err(e)) => return Err(format!("{shown}: {e}")),
        _ => None,
    };
    let gopts = guard::Options {
        manifest: opts.manifest.clone(),
        job: opts.job.clone(),
        store: Some("sqlite:drill".into()),
        ledger: None,
        scheduled_at: None,
        instance: None,
        manual: false,
        reason: None,
        report: None,
        config: None,
        link: false,
        command: replay.clone().unwrap_or_default(),
        rule_code: opts.rule_code,
        drill: guard::Drill {
            snapshot: Some(opts.snapshot.clone()),
            barrier: false,
            no_delay: true,
        },
    };
    // Without a replay command the guard would fall back to the job's `command` (or say
    // there is none): a drill replays through `replay.command` only.
    let replay = match (job, replay) {
        (Some(_), None) => Err(format!(
            "{shown}: job `{name}` has no `replay.command`: a drill replays the slot's snapshot through it (e.g. replay: {{command: [\"node\", \"jobs/settle.js\", \"--input\", \"{{snapshot}}\"]}})"
        )),
        (_, r) => Ok(r),
    }?;
    let plan = guard::plan::plan(&gopts).map_err(|e| e.message)?;
    let job = job.ok_or_else(|| format!("{shown}: no job named `{name}`"))?;
    let replay = replay.ok_or_else(|| {
        format!(
            "{shown}: job `{name}` has no `replay.command`: a drill replays the slot's snapshot through it (e.g. replay: {{command: [\"node\", \"jobs/settle.js\", \"--input\", \"{{snapshot}}\"]}})"
        )
    })?;
    let replay_argv =
        |f: fn(&crate::manifest::model::Replay) -> &Field<Command>, what| match replay_field {
            Some(r) => argv(f(r), what, name).map_err(|e| format!("{shown}: {e}")),
            None => Ok(None),
        };
    let verify = replay_argv(|r| &r.verify, "replay.verify")?;
    let setup = replay_argv(|r| &r.setup, "replay.setup")?;
    let teardown = replay_argv(|r| &r.teardown, "replay.teardown")?;
    let snap = job.snapshot.value();
    let key = snap.and_then(|s| text(&s.key)).ok_or_else(|| {
        format!(
            "{shown}: job `{name}` has no `snapshot.key`: a drill counts the snapshot's records by it"
        )
    })?;
    let format = Format::of(
        snap.and_then(|s| s.format.value()).map(|f| f.as_str()),
        &opts.snapshot,
    );
    let expected = job
        .expected_duration
        .value()
        .map(|d| Duration::from_secs(d.secs()))
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!(
                "{shown}: job `{name}` has no valid `expected_duration`: a drill's time limit is 10 x it (or give --time-limit)"
            )
        });
    let expected = match (expected, opts.time_limit) {
        (Ok(d), _) => d,
        (Err(_), Some(limit)) => limit / 10,
        (Err(e), None) => return Err(e),
    };
    let runbook = job
        .runbook
        .value()
        .map(|r| Runbook {
            owner: text(&r.owner),
            on_call: text(&r.on_call),
            communication: text(&r.communication),
            emergency_stop: text(&r.emergency_stop),
            resume: text(&r.resume),
        })
        .unwrap_or_default();
    Ok(DrillJob {
        plan,
        replay,
        verify,
        setup,
        teardown,
        key,
        format,
        expected,
        runbook,
    })
}

/// A key of the job's `replay` (or of `defaults.replay`) that the manifest format does
/// not know: refused, with its line and column, rather than a drill that runs without
/// what the key meant to say (a misspelt `teardown` would leave every sandbox's database
/// schema behind).
fn unknown_replay_key(
    loaded: &crate::manifest::load::Loaded,
    job: &str,
    text: Option<&str>,
) -> Result<(), String> {
    use crate::manifest::model::Replay;
    use crate::manifest::yaml::{Node, Value};
    /// A mapping's value at `key` (`sources/` has the same; the drill does not import it).
    fn get<'n>(n: &'n Node, key: &str) -> Option<&'n Node> {
        let Value::Map(kv) = &n.value else {
            return None;
        };
        kv.iter()
            .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
            .map(|(_, v)| v)
    }
    let Some(root) = &loaded.root else {
        return Ok(());
    };
    let mut replays: Vec<&Node> = get(root, "defaults")
        .and_then(|d| get(d, "replay"))
        .into_iter()
        .collect();
    if let Some(Value::Seq(jobs)) = get(root, "jobs").map(|j| &j.value) {
        replays.extend(
            jobs.iter()
                .filter(|j| get(j, "name").is_some_and(|n| n.value == Value::Str(job.into())))
                .filter_map(|j| get(j, "replay")),
        );
    }
    for r in replays {
        let Value::Map(kv) = &r.value else { continue };
        for (k, _) in kv {
            let Value::Str(name) = &k.value else { continue };
            if Replay::FIELDS.contains(&name.as_str()) {
                continue;
            }
            let at = text.map_or_else(String::new, |t| {
                let file =
                    crate::text::SourceFile::new(Default::default(), String::new(), t.into());
                let (line, col) = file.line_col(k.span.start);
                format!("{line}:{col}:")
            });
            let hint = crate::text::closest(name, Replay::FIELDS)
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            return Err(format!(
                "{at} unknown field `{name}` in `replay`{hint}: a drill does not run a job whose replay it cannot read whole (its keys are {})",
                Replay::FIELDS.join(", ")
            ));
        }
    }
    Ok(())
}
