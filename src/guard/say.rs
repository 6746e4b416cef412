//! What `run` says: the replay line of a slot left unworked (a `run … --scheduled-at` line,
//! or the `guard()` call for a link run), why it cannot run, and one line on stderr for
//! every outcome but a success (SPEC 7.1 items 10, 18, 25).

use super::plan::Plan;
use super::{CANNOT_RUN, Guard, Options, classify, link};
use crate::process;
use crate::store;
use classify::Class;
use jiff::Timestamp;

/// The exact command that works `slot` again, for every message that leaves a slot
/// unworked.
pub(super) fn replay_line(opts: &Options, plan: Option<&Plan>, slot: Option<Timestamp>) -> String {
    replay_with(opts, plan, slot, "")
}

/// [`replay_line`] with more options before the command's `--`. A `run --link` has no
/// command to replay, so its line is the `guard()` call that works the slot again
/// ([`replay_guard`]; `--manual` in `more` becomes `manual: true, reason`).
pub(super) fn replay_with(
    opts: &Options,
    plan: Option<&Plan>,
    slot: Option<Timestamp>,
    more: &str,
) -> String {
    if opts.link {
        return replay_guard(opts, plan, slot, more.contains("--manual"));
    }
    let slot = slot.map_or_else(|| "SLOT".to_owned(), store::rfc3339);
    let mut s = format!(
        "batchguard run --manifest {} --job {}",
        shell_quote(&opts.manifest.display().to_string()),
        shell_quote(&opts.job)
    );
    let raw = plan.map(|p| p.store.raw()).or(opts.store.as_deref());
    if let Some(p) = plan.filter(|p| p.store.raw() != store::DEFAULT_URL) {
        s.push_str(&format!(" --store '{}'", p.store));
    }
    if let Some(l) = opts.ledger.as_ref().filter(|l| Some(l.as_str()) != raw) {
        s.push_str(&format!(" --ledger '{}'", crate::db::mask(l)));
    }
    s.push_str(&format!(" --scheduled-at {slot}{more}"));
    if !opts.command.is_empty() {
        s.push_str(" --");
        for a in &opts.command {
            s.push(' ');
            s.push_str(&shell_quote(a));
        }
    }
    s
}

/// The replay of a `run --link` slot (SPEC 7.1 item 25): a `run` line would exit 125 for
/// a job whose work is a callback, so the hint is the npm package's call.
pub(super) fn replay_guard(
    opts: &Options,
    plan: Option<&Plan>,
    slot: Option<Timestamp>,
    manual: bool,
) -> String {
    let js = |v: &str| serde_json::Value::from(v).to_string();
    let slot = slot.map_or_else(|| "SLOT".to_owned(), store::rfc3339);
    let mut s = format!(
        "guard({{ manifest: {}, job: {}",
        js(&opts.manifest.display().to_string()),
        js(&opts.job)
    );
    let raw = plan.map(|p| p.store.raw()).or(opts.store.as_deref());
    if let Some(p) = plan.filter(|p| p.store.raw() != store::DEFAULT_URL) {
        s.push_str(&format!(", store: {}", js(&p.store.to_string())));
    }
    if let Some(l) = opts.ledger.as_ref().filter(|l| Some(l.as_str()) != raw) {
        s.push_str(&format!(", ledger: {}", js(&crate::db::mask(l))));
    }
    s.push_str(&format!(", scheduledAt: {}", js(&slot)));
    if manual {
        s.push_str(", manual: true, reason: \"…\"");
    }
    s.push_str(" }, callback)");
    s
}

pub(super) fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Says why `run` cannot run, on stderr and to the link's driver; exit 125.
pub(super) fn cannot(link: &Option<link::Link>, code: &str, message: String) -> u8 {
    eprintln!("batchguard run: {message}");
    if let Some(l) = link {
        l.error(code, &message);
    }
    CANNOT_RUN
}

/// What to say when the store did not take a statement (or could not be opened), with the
/// replay line.
pub(super) fn unreachable(
    opts: &Options,
    plan: &Plan,
    slot: Option<Timestamp>,
    e: &store::StoreError,
) -> String {
    let shown = slot.map_or_else(|| "the current slot".to_owned(), store::rfc3339);
    let (what, why) = (e.kind().says(), e.0.as_str());
    format!(
        "the store {} ({}) {what}, so job `{}` slot {shown} did not run: {}\n  replay it with: {}",
        plan.store,
        plan.store_from,
        opts.job,
        plan.store.scrub(why.to_owned()),
        replay_line(opts, Some(plan), slot)
    )
}

/// How a slot left unfinished is said: "slot S {lost its holder}".
pub(super) fn unfinished_says(state: &str) -> &'static str {
    match state {
        "lost" => "lost its holder",
        "interrupted" => "was interrupted",
        _ => "failed without being dead-lettered",
    }
}

pub(super) fn dead_letter_reason(
    class: &classify::Classified,
    attempt: u32,
    max: Option<u64>,
) -> String {
    match &class.class {
        Class::Retryable => format!("attempts exhausted ({attempt} of {})", max.unwrap_or(0)),
        Class::Fatal => format!("`{}` is classified fatal", class.code),
        _ => format!(
            "`{}` is not classified (on_unknown: dead_letter)",
            class.code
        ),
    }
}

/// The last non-empty line of a stderr tail, at most 200 characters.
pub(super) fn last_line(tail: &str) -> Option<String> {
    let l = tail.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(if l.chars().count() > 200 {
        let cut: String = l.chars().take(200).collect();
        format!("{cut}…")
    } else {
        l.to_owned()
    })
}

impl Guard<'_> {
    /// Item 18: every outcome but a success is one line on stderr, with the slot, the code
    /// and the OS error or the command's last stderr line.
    pub(super) fn say(
        &self,
        slot: Timestamp,
        attempt: u32,
        class: &classify::Classified,
        rejected: &classify::Rejections,
        dead_letter: bool,
        retry_after: Option<std::time::Duration>,
    ) {
        let (opts, plan) = (self.opts, self.plan);
        let head = format!(
            "batchguard run: job `{}` slot {} attempt {attempt} of {}",
            plan.job_name,
            store::rfc3339(slot),
            plan.max_attempts
                .map_or_else(|| "unbounded".to_owned(), |m| m.to_string()),
        );
        if rejected.hashed > 0 {
            eprintln!("{head}: {}", classify::hashed_detail(rejected.hashed));
        }
        if rejected.count > 0 {
            eprintln!("{head}: {}", classify::rejected_detail(rejected));
        }
        let last = last_line(&class.stderr_tail);
        let why = match (&class.class, last) {
            (Class::Success, _) => return,
            (Class::SpawnFailed, _) => {
                eprintln!(
                    "{head} could not start on this host ({}): {}; the lease is released, so another instance or the next tick works it\n  replay it with: {}",
                    plan.instance,
                    class.message,
                    replay_line(opts, Some(plan), Some(slot))
                );
                return;
            }
            (Class::Interrupted(sig), _) => {
                eprintln!(
                    "{head} was interrupted (SIG{}): ended INTERRUPTED; the next `run` of this job catches it up",
                    process::signal_name(*sig)
                );
                return;
            }
            _ if self.link.as_ref().is_some_and(|l| l.overran) => format!(
                "{} ({}: `run --link` cannot stop it; its lease is released, so what it writes from now on is a stale holder's, refused by the fence; `exitOnDeadline: true` exits the process instead)",
                class.code,
                link::NOT_STOPPED
            ),
            (_, Some(l)) => format!("{} (last stderr line: {l})", class.code),
            (_, None) if class.code == "TTL_EXCEEDED" => {
                "TTL_EXCEEDED (stopped at the deadline, before its lease could end)".to_owned()
            }
            (_, None) => class.code.clone(),
        };
        if let Some(d) = retry_after {
            eprintln!("{head} failed: {why}; retrying in {} s", d.as_secs());
        } else if dead_letter {
            eprintln!(
                "{head} failed: {why}; dead-lettered: {}\n  after a fix, rerun it with: {}",
                dead_letter_reason(class, attempt, plan.max_attempts),
                replay_with(opts, Some(plan), Some(slot), " --manual --reason '…'")
            );
        } else {
            eprintln!("{head} failed: {why}");
        }
    }
}
