use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::duration::Duration;

declare_rule! {
    /// ## What it does
    /// Checks that `lock.ttl` is at most 3 x `expected_duration` (the factor is
    /// `thresholds.lock_ttl_max_factor` in `batchguard.toml`). A disabled lock has no TTL
    /// to check.
    ///
    /// ## Why it matters
    /// The TTL is how long a lock outlives a process that died holding it. The source
    /// incident's rule is an explicit TTL of 2-3x the expected run time, "so that a lost
    /// lock expires". A TTL far above that keeps a crashed run's lock alive long after
    /// anyone could still be working: retries and the next slots are skipped as "lock
    /// held" until it expires, and work is missed instead of duplicated. The audit also
    /// uses the TTL as the grace before a slot without an end counts as lost, so a huge
    /// TTL hides lost runs.
    ///
    /// ## Example
    /// ```yaml
    /// expected_duration: 10m
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 6h           # a crash blocks this job for six hours
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// expected_duration: 10m
    /// lock:
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 25m
    /// ```
    pub struct LockTtlTooLong {
        code: "BG203",
        name: "lock-ttl-too-long",
        severity: Warning,
        scope: Job,
        summary: "lock.ttl is more than 3 x expected_duration",
        help: "lower lock.ttl to at most 3 x expected_duration",
    }
}

impl Rule for LockTtlTooLong {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(lock) = cx.job.active_lock() else {
            return;
        };
        let (Some(ttl), Some(expected)) = (lock.ttl.get(), cx.job.expected_duration.value()) else {
            return;
        };
        // A zero expected_duration is BG004; every TTL would be "too long".
        if expected.secs() == 0 {
            return;
        }
        let factor = cx.settings.config.thresholds.lock_ttl_max_factor;
        let max = Duration((expected.secs() as f64 * factor).floor() as u64);
        if ttl.value > max {
            out.emit_with_help(
                ttl.span,
                format!(
                    "job `{}`: lock.ttl {} is more than {factor} x expected_duration {expected} = {max}",
                    cx.job_name(),
                    ttl.value,
                ),
                format!(
                    "set lock.ttl to at most {max} (2-3x the expected run time), so a crashed run's lock expires before it blocks the next slots"
                ),
            );
        }
    }
}
