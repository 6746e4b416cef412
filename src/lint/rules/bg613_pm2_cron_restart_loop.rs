use crate::declare_rule;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a PM2 app with a `cron_restart` whose script is a one-shot while PM2 still
    /// restarts it when it exits: `autorestart` not `false` (on is PM2's default) and no
    /// `0` in `stop_exit_codes`. A one-shot is judged from the script itself, read when it
    /// is a JavaScript/TypeScript (parsed), Python or shell file found relative to the
    /// app's `cwd` or the ecosystem file's folder:
    /// - it has no call that keeps a process running (`.listen(`, `createServer`,
    ///   `setInterval`, a schedule call such as `cron.schedule` or `new CronJob`, a queue
    ///   worker or consumer, `while (true)`; Python `serve_forever`, `app.run(`,
    ///   `while True`; shell `while true`, `sleep infinity`), and
    /// - it ends the process on purpose (`process.exit`, `sys.exit`, a shell `exit`), or
    ///   the app or script is named like a job (settle, sync, cleanup, report, backup,
    ///   cron, job, task, batch, import, export, purge, archive, nightly …, and no service
    ///   word: server, api, web, worker, daemon, consumer, listener).
    ///
    /// The message lists the evidence used. An app whose script is `batchguard run …`
    /// is not reported: PM2 restarts it too, but each start skips the slot that already
    /// succeeded (SPEC 7.1), so the loop does no work twice. A script batchguard
    /// cannot read is never judged a one-shot; when the app is named like a job, the
    /// file's note in `lint --list-files` says so. Such an app is read as cron work: it
    /// registers a job (it takes part in BG601, BG602 and BG606) instead of being taken
    /// for a restart schedule of a long-running app.
    ///
    /// ## Why it matters
    /// `cron_restart` does not start a stopped process on a schedule: it *restarts* the
    /// process (PM2 7 `lib/Worker.js`, `God.registerCron` calls `God.restartProcessId`
    /// on each tick). When the process exits, `God.handleExit` (`lib/God.js`) starts it
    /// again at once unless `autorestart` is false or the exit code is in
    /// `stop_exit_codes`. A one-shot therefore runs again as soon as it ends: under PM2
    /// 7.0.4, a script of 1.5 s with `cron_restart: "0 0 * * *"` ran 8 times in 12 s, and
    /// one of 0.3 s ran 16 times in 7 s before PM2 marked it errored ("too many unstable
    /// restarts"). A nightly settlement becomes a settlement every few seconds: the "ran
    /// more than once" failure this tool exists for.
    ///
    /// ## Example
    /// ```js
    /// { name: "settle", script: "jobs/settle.js", cron_restart: "0 0 * * *" }
    /// ```
    ///
    /// Use instead:
    /// ```js
    /// { name: "settle", script: "jobs/settle.js", cron_restart: "0 0 * * *",
    ///   autorestart: false }
    /// ```
    pub struct Pm2CronRestartLoop {
        code: "BG613",
        name: "pm2-cron-restart-loop",
        severity: Warning,
        scope: Registration,
        summary: "a PM2 `cron_restart` on a one-shot script with autorestart on: PM2 restarts it as soon as it exits, so it runs in a loop, not on the schedule",
        help: "set `autorestart: false` so PM2 starts the script on each `cron_restart` tick and leaves it stopped in between (or `stop_exit_codes: [0]`)",
    }
}

impl Rule for Pm2CronRestartLoop {
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let Some(restart) = &cx.reg.restart_loop else {
            return;
        };
        let Some(cron) = &cx.reg.schedule else {
            return;
        };
        let autorestart = match restart.autorestart {
            Some(_) => "autorestart on",
            None => "autorestart on (PM2's default)",
        };
        out.emit_full(
            cron.span,
            format!(
                "{} runs a one-shot with `cron_restart: {}` and {autorestart}: PM2 restarts \
                 it as soon as it exits, so it runs in a loop, not once a slot (evidence: {})",
                cx.reg.label,
                cron.value,
                restart.evidence.join("; ")
            ),
            Self::META.help.to_owned(),
            restart
                .autorestart
                .map(|s| (s, "restarts the process whenever it exits".to_owned()))
                .into_iter()
                .collect(),
        );
    }
}
