use crate::audit::AuditFinding;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports a slot in which an execution started after another ended in failure with an `error_code` listed in `retry.fatal`.
    ///
    /// ## Why it matters
    /// Retrying bad input makes incidents bigger; it belongs in the dead letter.
    ///
    /// ## Example
    /// `retry.fatal: [VALIDATION_ERROR]`; attempt 1 ends in `failure` with `error_code: VALIDATION_ERROR` and attempt 2 starts -> AU110.
    AU110 {
        code: "AU110",
        name: "fatal-error-retried",
        severity: Error,
        summary: "a retry followed a failure whose error code the manifest classifies fatal",
        help: "send fatal failures to the dead letter instead of retrying",
    }
}

/// The first execution that failed fatally and was followed by a later start.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    let fatal = v.started.iter().find_map(|&y| {
        let p = v.exec(y);
        if !p.flags.fatal_failure() || !p.has_end() {
            return None;
        }
        let later: Vec<u32> = v
            .started
            .iter()
            .copied()
            .filter(|&x| x != y && v.exec(x).start >= p.end)
            .collect();
        (!later.is_empty()).then_some((y, later))
    });
    if let Some((y, later)) = fatal {
        let mut names = vec![v.run_id(y)];
        names.extend(later.iter().map(|&x| v.run_id(x)));
        out.push(v.finding(
            &AU110,
            format!(
                "slot {} of `{}` was retried after run `{}` failed with a fatal error code (retry.fatal): the input should have gone to the dead letter",
                v.slot_text(),
                v.job.display,
                v.run_id(y)
            ),
            names,
        ));
    }
}
