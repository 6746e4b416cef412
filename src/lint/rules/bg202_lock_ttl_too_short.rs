use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Checks that `lock.ttl` is at least 2 x `expected_duration` (the factor is
    /// `thresholds.lock_ttl_min_factor` in `batchguard.toml`).
    ///
    /// ## Why it matters
    /// A lock's TTL is how long the lock survives a process that died without releasing it.
    /// If a run takes longer than the TTL, the lock expires while the first run is still
    /// working, and the next instance woken by the same tick takes it and runs the slot a
    /// second time. The source incident's lesson is to give the lock an explicit TTL of
    /// 2-3x the expected run time: long enough that a slow run keeps it, short enough
    /// that a crashed run does not block the next slot.
    ///
    /// ## Example
    /// ```yaml
    /// expected_duration: 10m
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 15m          # a 16-minute run loses the lock
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// expected_duration: 10m
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 25m
    /// ```
    pub struct LockTtlTooShort {
        code: "BG202",
        name: "lock-ttl-too-short",
        severity: Error,
        scope: Job,
        summary: "lock.ttl is less than 2 x expected_duration",
        help: "raise lock.ttl to at least 2 x expected_duration",
    }
}

impl Rule for LockTtlTooShort {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(lock) = cx.job.active_lock() else {
            return;
        };
        let (Some(ttl), Some(expected)) = (lock.ttl.get(), cx.job.expected_duration.value()) else {
            return;
        };
        let factor = cx.settings.config.thresholds.lock_ttl_min_factor;
        let min =
            crate::manifest::duration::Duration((expected.secs() as f64 * factor).ceil() as u64);
        if ttl.value < min {
            out.emit_with_help(
                ttl.span,
                format!(
                    "job `{}`: lock.ttl {} is less than {factor} x expected_duration {expected} = {min}",
                    cx.job_name(),
                    ttl.value,
                ),
                format!("set lock.ttl to at least {min} (2-3x the expected run time)"),
            );
        }
    }
}
