//! How long a script's process lives: does it end when its work is done (a one-shot), or
//! does something keep it running (a server, a timer, a schedule, a consumer)? PM2 restarts
//! a process that ends unless `autorestart` is off, so a one-shot under a `cron_restart`
//! runs in a loop (BG613).
//!
//! JavaScript and TypeScript are parsed (oxc, as the rest of this module does); Python and
//! shell scripts are read line by line, comments skipped. What counts:
//! - **ends on purpose**: `process.exit(…)`; Python `sys.exit`, `os._exit`, `exit()`,
//!   `quit()`; a shell `exit` line.
//! - **keeps running**: a `.listen(…)` call, `createServer`, `setInterval`, a schedule
//!   call (`cron.schedule`, `scheduleJob`, `new CronJob`, `CronJob.from`, `new Cron`/`Cron(`),
//!   a queue worker or consumer (`new Worker`, `.consume(`, `.subscribe(`), an endless loop
//!   (`while (true)`, `for (;;)`); Python `serve_forever`, `app.run(`, `uvicorn.run`,
//!   `run_forever`, `web.run_app`, `BlockingScheduler`, `schedule.every`, `while True`;
//!   shell `while true`/`while :`, `sleep infinity`, `tail -f`.
//!
//! Only the kind of call and its line are kept: nothing else of the script is shown.

use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_ast_visit::{Visit, walk};
use oxc_span::{GetSpan, SourceType};
use std::path::Path;

/// What a script says about its process's life; each fact is `(what, 1-based line)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lifetime {
    /// The last call that ends the process on purpose (`process.exit`).
    pub exit: Option<(String, usize)>,
    /// The first call that keeps the process running (`.listen(`).
    pub keeps_alive: Option<(String, usize)>,
}

/// The scripts whose lifetime can be read: by extension.
pub fn readable(path: &Path) -> bool {
    super::is_code_path(path)
        || matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("py" | "sh" | "bash")
        )
}

/// Reads `text`, the script at `path` (its extension picks the language); `None` when the
/// language is not one of [`readable`]'s.
pub fn of_script(path: &Path, text: &str) -> Option<Lifetime> {
    if super::is_code_path(path) {
        return Some(javascript(path, text));
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("py") => Some(by_lines(text, &PYTHON)),
        Some("sh" | "bash") => Some(by_lines(text, &SHELL)),
        _ => None,
    }
}

fn javascript(path: &Path, text: &str) -> Lifetime {
    if super::too_deep(text).is_some() {
        return Lifetime::default();
    }
    stacker::grow(super::PARSE_STACK, || {
        let source_type = SourceType::from_path(path).unwrap_or_else(|_| SourceType::mjs());
        let allocator = Allocator::default();
        let ret = oxc_parser::Parser::new(&allocator, text, source_type).parse();
        let mut v = Visitor {
            text,
            out: Lifetime::default(),
        };
        v.visit_program(&ret.program);
        v.out
    })
}

struct Visitor<'t> {
    text: &'t str,
    out: Lifetime,
}

impl Visitor<'_> {
    fn line(&self, at: u32) -> usize {
        let at = (at as usize).min(self.text.len());
        self.text.as_bytes()[..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn keeps(&mut self, what: &str, at: u32) {
        if self.out.keeps_alive.is_none() {
            self.out.keeps_alive = Some((what.to_owned(), self.line(at)));
        }
    }

    /// The callee as `a.b.c` (identifiers and static members only).
    fn path_of(e: &Expression) -> Option<String> {
        match e.get_inner_expression() {
            Expression::Identifier(id) => Some(id.name.to_string()),
            Expression::StaticMemberExpression(m) => {
                let obj = Self::path_of(&m.object).unwrap_or_default();
                Some(format!("{obj}.{}", m.property.name))
            }
            _ => None,
        }
    }

    fn on_callee(&mut self, callee: &Expression, at: u32, new: bool) {
        let Some(path) = Self::path_of(callee) else {
            return;
        };
        let last = path.rsplit('.').next().unwrap_or(&path);
        if path == "process.exit" {
            self.out.exit = Some(("process.exit(…)".to_owned(), self.line(at)));
            return;
        }
        let keeps = match last {
            "listen" | "createServer" | "setInterval" | "scheduleJob" | "consume" | "subscribe" => {
                true
            }
            "schedule" => path.contains('.'),
            "CronJob" | "Cron" => true,
            "from" => path.ends_with("CronJob.from"),
            "Worker" => new,
            _ => false,
        };
        if keeps {
            let shown = if new {
                format!("new {path}(…)")
            } else {
                format!("{path}(…)")
            };
            self.keeps(&shown, at);
        }
    }
}

/// `true`, or a missing test (`for (;;)`).
fn endless(test: Option<&Expression>) -> bool {
    match test.map(Expression::get_inner_expression) {
        None => true,
        Some(Expression::BooleanLiteral(b)) => b.value,
        Some(Expression::NumericLiteral(n)) => n.value != 0.0,
        _ => false,
    }
}

impl<'a> Visit<'a> for Visitor<'_> {
    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        self.on_callee(&it.callee, it.span.start, false);
        walk::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        self.on_callee(&it.callee, it.span.start, true);
        walk::walk_new_expression(self, it);
    }

    fn visit_while_statement(&mut self, it: &WhileStatement<'a>) {
        if endless(Some(&it.test)) {
            self.keeps("while (true)", it.span().start);
        }
        walk::walk_while_statement(self, it);
    }

    fn visit_for_statement(&mut self, it: &ForStatement<'a>) {
        if endless(it.test.as_ref()) {
            self.keeps("for (;;)", it.span().start);
        }
        walk::walk_for_statement(self, it);
    }
}

/// A language read line by line: its comment marker, what ends it, what keeps it running.
struct Lines {
    comment: &'static str,
    exits: &'static [&'static str],
    keeps: &'static [&'static str],
}

const PYTHON: Lines = Lines {
    comment: "#",
    exits: &["sys.exit(", "os._exit(", "exit(", "quit("],
    keeps: &[
        ".listen(",
        "serve_forever(",
        "app.run(",
        "uvicorn.run(",
        "run_forever(",
        "web.run_app(",
        "BlockingScheduler(",
        "schedule.every(",
        ".consume(",
        ".subscribe(",
        "while True:",
        "while 1:",
    ],
};

const SHELL: Lines = Lines {
    comment: "#",
    exits: &["exit"],
    keeps: &[
        "while true",
        "while :",
        "sleep infinity",
        "tail -f",
        "tail -F",
    ],
};

fn by_lines(text: &str, lang: &Lines) -> Lifetime {
    let mut out = Lifetime::default();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim();
        if code.is_empty() || code.starts_with(lang.comment) {
            continue;
        }
        for exit in lang.exits {
            let starts = code.starts_with(exit);
            // `exit(` in Python also inside `sys.exit(`: one word boundary before it.
            let inside = code.match_indices(exit).any(|(at, _)| {
                at == 0
                    || !code[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            });
            let word_end = |rest: &str| {
                rest.is_empty() || rest.starts_with([' ', ';', '\t']) || exit.ends_with('(')
            };
            let matched = if exit.ends_with('(') {
                inside
            } else {
                starts && word_end(&code[exit.len()..])
            };
            if matched {
                let shown = if exit.ends_with('(') {
                    format!("{exit}…)")
                } else {
                    (*exit).to_owned()
                };
                out.exit = Some((shown, i + 1));
                break;
            }
        }
        if out.keeps_alive.is_none()
            && let Some(k) = lang.keeps.iter().find(|k| code.contains(*k))
        {
            out.keeps_alive = Some(((*k).trim_end_matches(':').to_owned(), i + 1));
        }
    }
    out
}

/// Words that name a long-running process; a name holding one is not read as a job's.
const SERVICE_WORDS: [&str; 9] = [
    "server", "api", "web", "worker", "daemon", "consumer", "listener", "gateway", "socket",
];

/// Words that name batch work (a job, not a service).
const JOB_WORDS: [&str; 34] = [
    "settle",
    "sync",
    "cleanup",
    "clean",
    "report",
    "backup",
    "cron",
    "job",
    "task",
    "batch",
    "import",
    "export",
    "purge",
    "prune",
    "digest",
    "invoice",
    "reconcile",
    "archive",
    "rotate",
    "migrate",
    "etl",
    "aggregate",
    "rollup",
    "refresh",
    "expire",
    "nightly",
    "daily",
    "hourly",
    "weekly",
    "monthly",
    "billing",
    "scrape",
    "dump",
    "send",
];

/// The job word `name` holds (`nightly-report` → `nightly`), unless it also names a
/// service (`sync-server`).
pub fn job_word(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words
        .iter()
        .any(|w| SERVICE_WORDS.iter().any(|s| w.starts_with(s)))
    {
        return None;
    }
    JOB_WORDS
        .iter()
        .copied()
        .find(|j| words.iter().any(|w| w.contains(j)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn js(text: &str) -> Lifetime {
        of_script(Path::new("x.js"), text).expect("js is read")
    }

    #[test]
    fn a_one_shot_exits_and_a_server_listens() {
        let one = js(
            "const db = require('./db');\nasync function main() { await db.settle(); }\n\
                      main().then(() => process.exit(0));\n",
        );
        assert_eq!(one.exit, Some(("process.exit(…)".into(), 3)));
        assert_eq!(one.keeps_alive, None);
        let server = js("const app = require('express')();\napp.listen(3000);\n\
                         process.on('SIGTERM', () => process.exit(0));\n");
        assert_eq!(server.keeps_alive, Some(("app.listen(…)".into(), 2)));
        let cron = js("import cron from 'node-cron';\ncron.schedule('* * * * *', f);\n");
        assert_eq!(cron.keeps_alive, Some(("cron.schedule(…)".into(), 2)));
        let looped = js("for (;;) { await tick(); }\n");
        assert_eq!(looped.keeps_alive, Some(("for (;;)".into(), 1)));
        // In a comment or a string, nothing.
        let quiet = js("// app.listen(3000)\nconst s = 'process.exit(1)';\n");
        assert_eq!(quiet, Lifetime::default());
    }

    #[test]
    fn python_and_shell_are_read_by_lines() {
        let py = of_script(
            Path::new("job.py"),
            "import sys\n# app.run()\nmain()\nsys.exit(0)\n",
        )
        .expect("py");
        assert_eq!(py.exit, Some(("sys.exit(…)".into(), 4)));
        assert_eq!(py.keeps_alive, None);
        let srv = of_script(Path::new("srv.py"), "while True:\n    poll()\n").expect("py");
        assert_eq!(srv.keeps_alive, Some(("while True".into(), 1)));
        let sh = of_script(Path::new("b.sh"), "#!/bin/sh\npg_dump x\nexit 0\n").expect("sh");
        assert_eq!(sh.exit, Some(("exit".into(), 3)));
        let exited = of_script(Path::new("b.sh"), "exiting=1\n").expect("sh");
        assert_eq!(exited.exit, None);
        assert!(of_script(Path::new("x.rb"), "exit").is_none());
    }

    #[test]
    fn job_names() {
        assert_eq!(job_word("nightly-report"), Some("report"));
        assert_eq!(job_word("settlePayments"), Some("settle"));
        assert_eq!(job_word("sync-server"), None);
        assert_eq!(job_word("web"), None);
        assert_eq!(job_word("app"), None);
    }
}
