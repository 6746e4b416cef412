use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::zone;

declare_rule! {
    /// ## What it does
    /// Checks that `timezone` names a zone of the IANA time zone database (`Europe/Berlin`,
    /// `America/New_York`, `UTC`), and suggests the closest name when there is one. An
    /// abbreviation is answered with the zone it stands for (`KST` -> `Asia/Seoul`), or
    /// with every candidate when it stands for several (`IST`: India, Ireland, Israel).
    /// Names are matched without regard to case. batchguard carries its own copy of the
    /// database, so the answer does not depend on the machine that runs lint.
    ///
    /// ## Why it matters
    /// A zone the scheduler does not know is either an error at deploy time (a Kubernetes
    /// CronJob with a bad `timeZone` is rejected) or, worse, a silent fallback to UTC that
    /// moves every run by hours: the 02:00 settlement runs at 11:00 Seoul time, after the
    /// business day started. Abbreviations such as `KST` or `EST` are not zone names, and
    /// fixed offsets do not follow daylight saving time.
    ///
    /// ## Example
    /// ```yaml
    ///     timezone: Asia/Seol
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    ///     timezone: Asia/Seoul
    /// ```
    pub struct UnknownTimezone {
        code: "BG105",
        name: "unknown-timezone",
        severity: Error,
        scope: Schedule,
        summary: "not an IANA zone name",
        help: "use an IANA zone name such as Europe/Berlin or America/New_York",
    }
}

impl Rule for UnknownTimezone {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        let Some(zone) = cx.zone else {
            return;
        };
        if cx.tz.is_some() {
            return;
        }
        let message = format!(
            "job `{}`: `{}` is not an IANA time zone name",
            cx.name, zone.value
        );
        match zone::help(&zone.value) {
            Some(help) => out.emit_with_help(zone.span, message, help),
            None => out.emit(zone.span, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(zone: &str) -> String {
        format!(
            "version: 1\njobs:\n  - name: a\n    schedule: \"0 2 * * *\"\n    timezone: {zone}\n"
        )
    }

    #[test]
    fn unknown_zones_with_suggestions() {
        let f = findings(&manifest("Asia/Seol"), "BG105");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].help, "did you mean `Asia/Seoul`?");
        let f = findings(&manifest("New York"), "BG105");
        assert_eq!(f[0].help, "did you mean `America/New_York`?");
        let f = findings(&manifest("KST"), "BG105");
        assert!(
            f[0].help.starts_with("did you mean `Asia/Seoul`?"),
            "{}",
            f[0].help
        );
        let f = findings(&manifest("Mars/Olympus_Mons"), "BG105");
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn known_zones_pass() {
        for z in ["UTC", "Europe/Berlin", "america/new_york", "Asia/Seoul"] {
            assert!(findings(&manifest(z), "BG105").is_empty(), "{z}");
        }
    }
}
