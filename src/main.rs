//! Thin entry point: parse arguments, call one function, map the result to an exit code.

use batchguard::cli::{
    AuditArgs, AuditFormat, Cli, Command, FailOn, GraphArgs, GraphFormat, LedgerFormat, LintArgs,
    LintFormat, RulesFormat, SchemaKind,
};
use batchguard::config::{self, Settings};
use batchguard::finding::Severity;
use batchguard::lint::{self, LintOptions};
use batchguard::report;
use clap::{CommandFactory, Parser};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// The lint and audit hot paths allocate many small strings and nodes; mimalloc is
/// markedly faster than the system allocator for that pattern.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FOUND: u8 = 1;
const CANNOT_RUN: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { CANNOT_RUN } else { 0 });
        }
    };
    match cli.command {
        Command::Lint(args) => lint_cmd(args),
        Command::Audit(args) => audit_cmd(args),
        Command::Rules { format } => {
            print(&match format {
                RulesFormat::Text => rules_table(),
                RulesFormat::Markdown => lint::rules_markdown(),
            });
            ExitCode::SUCCESS
        }
        Command::Explain { rule } => explain(&rule),
        Command::Schema { format } => {
            print(&match format {
                SchemaKind::Manifest => batchguard::schema::manifest(),
                SchemaKind::Config => batchguard::schema::config(),
                SchemaKind::Ledger => batchguard::schema::ledger(),
            });
            ExitCode::SUCCESS
        }
        Command::Slots(args) => match batchguard::slots::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{:?}", miette::Report::new(e));
                ExitCode::from(CANNOT_RUN)
            }
        },
        Command::Graph(args) => graph_cmd(args),
        Command::Init(args) => {
            let paths = paths_or_cwd(args.paths.clone());
            match settings_for(args.config.clone(), &paths).map(|s| batchguard::init::run(&args, s))
            {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("{:?}", miette::Report::new(e));
                    ExitCode::from(CANNOT_RUN)
                }
                Err(code) => code,
            }
        }
        Command::Run(args) => ExitCode::from(batchguard::guard::run(&batchguard::guard::Options {
            manifest: args.manifest,
            job: args.job,
            store: args.store,
            ledger: args.ledger,
            scheduled_at: args.scheduled_at,
            instance: args.instance,
            manual: args.manual,
            reason: args.reason,
            report: args.report,
            command: args.command,
        })),
        Command::Store(args) => ExitCode::from(batchguard::guard::store_cmd(&args)),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "batchguard", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn lint_cmd(args: LintArgs) -> ExitCode {
    let paths = paths_or_cwd(args.paths);
    let settings = match settings_for(args.config, &paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let opts = LintOptions {
        paths,
        settings,
        now: args.now.unwrap_or_else(jiff::Timestamp::now),
    };
    let run = lint::run_with(
        &opts,
        lint::WalkOptions {
            hidden: args.hidden,
        },
    );
    print(&match (args.format, args.list_files) {
        (LintFormat::Pretty, false) => report::pretty::render(&run, use_color()),
        (LintFormat::Pretty, true) => report::pretty::list_files(&run),
        (LintFormat::Json, list) => report::json::render_with(&run, list),
        (LintFormat::Sarif, _) => report::sarif::render(&run),
        (LintFormat::Github, _) => report::github::render(&run),
    });
    if args.list_files && matches!(args.format, LintFormat::Sarif | LintFormat::Github) {
        eprint!("{}", report::pretty::list_files(&run));
    }
    for (path, why) in &run.unreadable {
        eprintln!("error: cannot read {}: {why}", path.display());
    }
    if !run.unreadable.is_empty() {
        return ExitCode::from(CANNOT_RUN);
    }
    let failing = match args.fail_on {
        FailOn::Error => run.count(Severity::Error),
        FailOn::Warning => run.count(Severity::Error) + run.count(Severity::Warning),
    };
    ExitCode::from(if failing > 0 { FOUND } else { 0 })
}

/// The paths to read: the current directory when none are given.
fn paths_or_cwd(paths: Vec<std::path::PathBuf>) -> Vec<std::path::PathBuf> {
    if paths.is_empty() {
        vec![std::path::PathBuf::from(".")]
    } else {
        paths
    }
}

/// `--config`, else `batchguard.toml` found above the first path, else the defaults.
/// An invalid config is reported with its position and is exit 2.
fn settings_for(
    config: Option<std::path::PathBuf>,
    paths: &[std::path::PathBuf],
) -> Result<Settings, ExitCode> {
    let found = config.or_else(|| paths.first().and_then(|p| config::discover(p)));
    match found {
        Some(p) => config::load(&p, |k| batchguard::REGISTRY.find(k).is_some()).map_err(|e| {
            eprintln!("{:?}", miette::Report::new(*e));
            ExitCode::from(CANNOT_RUN)
        }),
        None => Ok(Settings::default()),
    }
}

fn graph_cmd(args: GraphArgs) -> ExitCode {
    let paths = paths_or_cwd(args.paths);
    let settings = match settings_for(args.config, &paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let now = args.now.unwrap_or_else(jiff::Timestamp::now);
    let run = lint::run(&LintOptions {
        paths,
        settings,
        now,
    });
    if !run.unreadable.is_empty() {
        for (path, why) in &run.unreadable {
            eprintln!("error: cannot read {}: {why}", path.display());
        }
        return ExitCode::from(CANNOT_RUN);
    }
    let format = match args.format {
        GraphFormat::Dot => batchguard::graph::Format::Dot,
        GraphFormat::Mermaid => batchguard::graph::Format::Mermaid,
    };
    print(&batchguard::graph::render(&run, now, format));
    ExitCode::SUCCESS
}

fn audit_cmd(args: AuditArgs) -> ExitCode {
    use batchguard::audit::run::{AuditError, RunOptions, run};
    let settings = match settings_for(args.config, &[std::path::PathBuf::from(".")]) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let opts = RunOptions {
        settings,
        ledger: args.ledger,
        outputs: args.outputs,
        manifests: args.manifests,
        snapshots: args.snapshots,
        from: args.from.at,
        from_offset: args.from.offset,
        timezone: args.timezone,
        to: args.to,
        assume_tz: args.assume_tz,
        progress: std::io::stderr().is_terminal(),
        jobs: args.jobs,
        ledger_format: args.ledger_format.map(|f| match f {
            LedgerFormat::Csv => batchguard::ledger::read::FileFormat::Csv,
            LedgerFormat::Jsonl => batchguard::ledger::read::FileFormat::Jsonl,
        }),
    };
    let result = match run(&opts) {
        Ok(r) => r,
        Err(AuditError::Manifest(e)) => {
            let color = std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            eprint!("{}", report::audit_pretty::render_not_evaluable(&e, color));
            return ExitCode::from(CANNOT_RUN);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(CANNOT_RUN);
        }
    };
    let color = args.out.is_none() && use_color();
    let text = match args.format {
        AuditFormat::Pretty => report::audit_pretty::render(&result, color),
        AuditFormat::Json => report::audit_json::render(&result),
        AuditFormat::Markdown => report::audit_markdown::render(&result),
        AuditFormat::Html => report::audit_html::render(&result),
        AuditFormat::Csv => report::audit_csv::render(&result),
    };
    match &args.out {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(CANNOT_RUN);
            }
        }
        None => print(&text),
    }
    let min = match args.fail_on {
        FailOn::Error => Severity::Error,
        FailOn::Warning => Severity::Warning,
    };
    ExitCode::from(if result.failing(min) > 0 { FOUND } else { 0 })
}

fn rules_table() -> String {
    let mut s = String::new();
    for m in batchguard::REGISTRY.all() {
        s.push_str(&format!(
            "{:<6} {:<30} {:<8} {}\n",
            m.code, m.name, m.severity, m.summary
        ));
    }
    s
}

fn explain(rule: &str) -> ExitCode {
    match batchguard::REGISTRY.find(rule) {
        Some(m) => {
            print(&format!(
                "# {} {}\n\nDefault severity: {}. Fires when {}.\n\n{}",
                m.code,
                m.name,
                m.severity,
                m.summary,
                m.doc_text()
            ));
            ExitCode::SUCCESS
        }
        None => {
            let names: Vec<&str> = batchguard::REGISTRY
                .all()
                .flat_map(|m| [m.code, m.name])
                .collect();
            let hint = batchguard::text::closest(rule, &names)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            eprintln!(
                "error: `{rule}` is not a rule code or name{hint}; `batchguard rules` lists them"
            );
            ExitCode::from(CANNOT_RUN)
        }
    }
}
