use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::{Command, Field};

declare_rule! {
    /// ## What it does
    /// Reports a `command` (or `replay.command`, `replay.verify`, `replay.setup`,
    /// `replay.teardown`) written as one shell string instead of an argv list.
    /// `batchguard run` and `drill` refuse such a command rather than hand it to a shell.
    ///
    /// ## Why it matters
    /// batchguard substitutes template values (`{scheduled_at}`, `{snapshot}`) into the
    /// command. In an argv list each value stays one argument; in a shell string a value
    /// with a space, a quote or a `;` becomes new arguments or a new command. A shell also
    /// stands between the scheduler and the job: signals (the TERM sent before the lock's
    /// TTL runs out) reach the shell, not the job, and `cmd1 && cmd2` hides which part
    /// failed, so the error code that decides retry or dead letter is lost.
    ///
    /// ## Example
    /// ```yaml
    /// command: "node jobs/settle.js --since 1h"
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// command: ["node", "jobs/settle.js", "--since", "1h"]
    /// ```
    pub struct ShellCommand {
        code: "BG802",
        name: "shell-command",
        severity: Warning,
        scope: Job,
        summary: "a command is one shell string instead of an argv list",
        help: "write the command as an argv list: one YAML list entry per argument",
    }
}

/// Characters that only a shell gives a meaning to.
fn uses_shell_syntax(s: &str) -> bool {
    s.contains([
        '|', '&', ';', '<', '>', '$', '`', '*', '?', '(', ')', '\'', '"', '\\',
    ])
}

impl Rule for ShellCommand {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        let replay = cx.job.replay.value();
        for (field, command) in [
            ("command", Some(&cx.job.command)),
            ("replay.command", replay.map(|r| &r.command)),
            ("replay.verify", replay.map(|r| &r.verify)),
            ("replay.setup", replay.map(|r| &r.setup)),
            ("replay.teardown", replay.map(|r| &r.teardown)),
        ] {
            let Some(Field::Ok(c)) = command else {
                continue;
            };
            let Command::Shell(text) = &c.value else {
                continue;
            };
            let words = text.split_whitespace().count();
            // The help names the program only: the rest of a command line may hold a
            // secret (BG801), and messages are not masked like source snippets are.
            let program = text
                .split_whitespace()
                .next()
                .filter(|p| !p.contains(['=', ':', '@']) && !uses_shell_syntax(p));
            let help = match (program, uses_shell_syntax(text)) {
                (_, true) => "write it as an argv list; move pipes, redirections and `&&` into a script and run that script".to_owned(),
                (Some(p), false) => format!(
                    "write it as an argv list of its {words} words: [\"{p}\", …], one entry per argument"
                ),
                (None, false) => Self::META.help.to_owned(),
            };
            out.emit_with_help(
                c.span,
                format!(
                    "job `{name}`: {field} is one shell string of {words} words, not an argv list"
                ),
                help,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    const HEAD: &str = "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n";

    #[test]
    fn shell_strings_in_command_and_replay() {
        let yaml = format!(
            "{HEAD}    command: \"node jobs/a.js --db postgres://u:hunter2@db/x\"\n    replay:\n      command: \"node jobs/a.js < {{snapshot}}\"\n"
        );
        let f = findings(&yaml, "BG802");
        assert_eq!(f.len(), 2);
        assert!(
            f[0].message
                .contains("command is one shell string of 4 words")
        );
        assert!(
            f.iter()
                .all(|f| !f.help.contains("hunter2") && !f.message.contains("hunter2"))
        );
        assert!(f[1].message.contains("replay.command"));
        assert!(f[1].help.contains("into a script"));
        let setup = format!(
            "{HEAD}    replay:\n      command: [\"a\"]\n      setup: \"psql -c 'create schema s_{{sandbox}}'\"\n      teardown: \"drop-schema {{sandbox}}\"\n"
        );
        let f = findings(&setup, "BG802");
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].message.contains("replay.setup is one shell string"));
        assert!(f[1].message.contains("replay.teardown is one shell string"));
        let argv = format!("{HEAD}    command: [\"node\", \"jobs/a.js\"]\n");
        assert!(findings(&argv, "BG802").is_empty());
    }
}
