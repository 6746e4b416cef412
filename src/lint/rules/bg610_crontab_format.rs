use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a crontab that its runner reads differently from how it looks, once per problem
    /// and file, on the first line concerned:
    /// - CRLF line endings (`\r\n`): cron ends a line at `\n` and keeps the `\r`, so every
    ///   command ends in a carriage return (`report\r: command not found`) and every env
    ///   value (`MAILTO`, `CRON_TZ`) carries one;
    /// - a last job line without a newline: cron drops a line that ends at the end of the
    ///   file ("a file without a \n before the EOF is rude"), so that job never runs;
    /// - a byte that is not UTF-8 in a job line (a latin-1 `é` in an argument). In the
    ///   command, the line is still read, with `?` for the byte; before the command (the
    ///   schedule or the user), cron cannot read it either and it registers nothing.
    ///   Such bytes in comments are fine: cron ignores comments.
    ///
    /// ## Which runners
    /// Under Debian cron (the default) all three apply. A crontab run by supercronic gets
    /// neither of the first two: supercronic reads its file with Go's `bufio.Scanner` and
    /// `bufio.ScanLines` (`crontab/crontab.go` `ParseCrontab`), which drops a `\r` before
    /// each `\n` and returns a last line that has no newline like any other. busybox crond
    /// reads with libbb's `config_read` (`libbb/parse_config.c`,
    /// `get_line_with_continuation`: `getline`, then one `\n` dropped when present), so it
    /// reads the last line too, but keeps the `\r`: under busybox only the CRLF check
    /// applies. The byte check applies to every runner. The runner
    /// is read from the Dockerfile or compose file that starts it, or `[sources]
    /// crontab_runner` (docs/crontab-runners.md).
    ///
    /// ## Why it matters
    /// The source article judges a batch by "did every slot run exactly once". A job that
    /// never runs because of an editor's line ending is a silent miss on every slot, and a
    /// crontab edited on Windows fails only once deployed, where the only trace is a
    /// mail to a mailbox nobody reads.
    ///
    /// ## Example
    /// ```text
    /// 0 2 * * * flock -n /run/report.lock /usr/local/bin/report\r\n
    /// 0 3 * * * flock -n /run/rotate.lock /usr/local/bin/rotate      (no newline at the end)
    /// ```
    ///
    /// Use instead: LF line endings (`dos2unix crontab`, or `*crontab* text eol=lf` in
    /// `.gitattributes`), a newline after the last line, UTF-8 text.
    pub struct CrontabFormat {
        code: "BG610",
        name: "crontab-format",
        severity: Warning,
        scope: File,
        summary: "a crontab that cron misreads: CRLF line endings (cron passes `\\r` to the command), a last line without a newline (cron ignores it), a byte that is not UTF-8 in a command",
        help: "save the crontab as UTF-8 with LF line endings and a newline after the last line",
    }
}

impl Rule for CrontabFormat {}
