use crate::declare_rule;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};
use crate::sources::SourceKind;

declare_rule! {
    /// ## What it does
    /// Checks that each crontab line runs its command under `batchguard run` or `flock`.
    /// After env assignments and an optional `cd … &&`, the first word must be `flock` or
    /// `batchguard run` (by basename, with any options).
    ///
    /// ## Why it matters
    /// cron starts a new process at every tick whether or not the last one finished, and
    /// the same crontab is often installed on more than one host after a migration. The
    /// source article's first criterion is one executor per slot: a lock (`batchguard run`
    /// takes the manifest's lock and records the run in the ledger; `flock` at least stops
    /// overlaps on one host) is what makes that true.
    ///
    /// ## Which runners
    /// Only where runs of one line can overlap. Debian cron does: every minute it forks
    /// each matching line (`do_command`) without looking at the line's last run. busybox
    /// crond does not: `flag_starting_jobs` (`miscutils/crond.c`) skips a line whose last
    /// run is still going ("process already running"). supercronic does not either:
    /// `cron/cron.go` `startFunc` calls the job synchronously
    /// (`runThisJob(...)`, `go runThisJob` only with `-overlapping`) and computes the next
    /// run after it returns; a run that outlasts a slot is logged ("job took too long")
    /// and that slot skipped. So a line that busybox crond runs, or supercronic without
    /// `-overlapping`, is not reported; with `-overlapping` it is. The runner is read from the Dockerfile or
    /// compose file that starts it, or `[sources] crontab_runner`
    /// (docs/crontab-runners.md).
    ///
    /// ## Example
    /// ```text
    /// 0 * * * * cd /srv/billing && node jobs/settle.js
    /// ```
    ///
    /// Use instead:
    /// ```text
    /// 0 * * * * batchguard run --manifest /srv/billing/billing.batchguard.yaml --job settle-payments -- node jobs/settle.js
    /// ```
    pub struct CrontabUnguarded {
        code: "BG607",
        name: "crontab-unguarded",
        severity: Error,
        scope: Registration,
        summary: "a crontab line whose command is not wrapped in `batchguard run` or `flock`",
        help: "run the command as `batchguard run --job NAME -- CMD` (or at least under `flock -n LOCKFILE`)",
    }
}

impl Rule for CrontabUnguarded {
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let reg = cx.reg;
        if reg.kind != SourceKind::Crontab || reg.wrapped {
            return;
        }
        // busybox crond, and supercronic without `-overlapping`, never overlap runs of one
        // line.
        if reg.crontab_runner.as_ref().is_some_and(|r| !r.overlaps()) {
            return;
        }
        // As written (quotes kept); every report redacts secrets from messages.
        let written = cx
            .text
            .get(reg.command_span.start..reg.command_span.end())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map_or_else(
                || crate::sources::command::shell_join(&reg.command),
                str::to_owned,
            );
        out.emit(
            reg.command_span,
            format!(
                "{} runs `{written}` without `batchguard run` or `flock`: a slow run and the next tick overlap{}",
                reg.label,
                reg.crontab_runner
                    .as_ref()
                    .map_or_else(String::new, |r| format!(" (under {})", r.name())),
            ),
        );
    }
}
