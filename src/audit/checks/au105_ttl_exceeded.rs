use crate::audit::AuditFinding;
use crate::audit::view::SlotView;
use crate::declare_check;
use crate::text::duration::millis;

declare_check! {
    /// ## What it does
    /// Reports each execution with both `start` and `end` whose duration exceeds the job's `lock.ttl`, except one that ended `superseded` (the store already gave the slot to a newer holder, whose fence makes the old one's late writes refused).
    ///
    /// ## Why it matters
    /// Once the lock expired, a second instance could acquire it for the same slot while the first still worked.
    ///
    /// ## Example
    /// `lock.ttl: 25m`; r1 starts at 02:00:00 and ends at 02:31:00 -> AU105: it ran 31m, 6m past the lease.
    AU105 {
        code: "AU105",
        name: "ttl-exceeded",
        severity: Error,
        summary: "an execution ran longer than `lock.ttl`: another instance could have taken the lock",
        help: "raise lock.ttl to 2-3x the real duration, or stop the command before the ttl runs out",
    }
}

/// Each execution with a `start` and an `end` further apart than `lock.ttl`.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    let (true, Some(ttl)) = (v.job.with_manifest, v.job.ttl_ms) else {
        return;
    };
    for &x in v.execs {
        let e = v.exec(x);
        // A superseded execution outlived its lease by definition: the newer holder's
        // fence made that safe, and that holder's run is judged on its own.
        if !(e.has_start() && e.has_end()) || e.superseded() {
            continue;
        }
        let d = (e.end - e.start).max(0);
        if d > ttl {
            out.push(v.finding(
                &AU105,
                format!(
                    "run `{}` of `{}` (slot {}) ran {}, longer than lock.ttl {}: another instance could have taken the lock",
                    v.run_id(x),
                    v.job.display,
                    v.slot_text(),
                    millis(d),
                    millis(ttl)
                ),
                vec![v.run_id(x)],
            ));
        }
    }
}
