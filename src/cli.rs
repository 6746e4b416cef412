//! Command-line definitions (SPEC 1). Kept apart from `main` so completions can be generated from them.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "batchguard",
    version,
    about = "Keeps scheduled batch jobs from doing the same work twice, or not at all, and proves it.",
    after_help = "Exit codes: 0 nothing at or above the failing severity; 1 findings; 2 could not run."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Validate job manifests before a deploy.
    Lint(LintArgs),
    /// Check the run ledger: did every slot run exactly once, every output apply once?
    Audit(AuditArgs),
    /// List every rule: code, name, default severity, one line.
    Rules {
        #[arg(long, value_enum, default_value_t = RulesFormat::Text)]
        format: RulesFormat,
    },
    /// Show a rule's full documentation.
    Explain {
        /// Rule code (BG202) or name (lock-ttl-too-short).
        rule: String,
    },
    /// Print the JSON Schema (draft-07) of a file format.
    Schema {
        #[arg(value_enum)]
        format: SchemaKind,
    },
    /// Print the slots a schedule fires in [from, to), one RFC 3339 instant per line.
    Slots(SlotsArgs),
    /// Draw jobs by service, dependencies, registrations; duplicates and cycles in red.
    Graph(GraphArgs),
    /// Write a starter manifest for the jobs the tree's CronJobs, PM2 files and crontabs register.
    Init(InitArgs),
    /// Run one slot of a job under the store's lock (the scheduler calls this on every tick).
    Run(RunArgs),
    /// The lock store: create its tables, show leases and slots, write the spool.
    Store(StoreArgs),
    /// Claim an output for the running job: exit 0 the first claim ever, 1 claimed before,
    /// 125 refused (a newer holder has the slot) or the store unreachable.
    Claim(ClaimArgs),
    /// Rehearse recovery: replay a slot's snapshot again, concurrently, after a crash, a retry, a stale holder.
    Drill(DrillArgs),
    /// The drill's tap in front of a job (started by `drill` through `run`; not for people).
    #[command(name = "__drill-job", hide = true)]
    DrillJob {
        #[arg(last = true)]
        argv: Vec<String>,
    },
    /// A live table of the jobs: what runs now, skips and who held the lock, durations,
    /// latency, missed slots, leases, alerts (refreshed every few seconds; q quits).
    Watch(WatchArgs),
    /// Serve the ledger's figures as Prometheus/OpenMetrics at /metrics, or write them for
    /// node_exporter's textfile collector.
    Metrics(MetricsArgs),
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `batchguard claim` (SPEC 7.5): one output of the running job claimed in its store.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Run it from a job that `batchguard run` started: the job, run id, fence and store come from
the environment `run` gives the command (BATCHGUARD_JOB, BATCHGUARD_RUN_ID, BATCHGUARD_FENCE,
BATCHGUARD_STORE). Claim the key BEFORE applying it, and apply it only on exit 0:

    for id in $(pending_invoices); do
        if batchguard claim --key \"invoice:$id\"; then settle \"$id\"; fi
    done

Exit codes:
  0    claimed: the first claim of (job, key) ever; apply it (prints `claimed`)
  1    already claimed, by this run or an earlier one: do not apply it (prints `already claimed`)
  125  refused: this run is no longer its slot's latest holder (a newer run took the slot after
       this one's lease ended; stop: nothing was claimed), or the store is unreachable, or an
       argument is missing (message on stderr)

The claim is the output row `audit` reads: do not also list a claimed key in
BATCHGUARD_OUTPUTS (a listed key this run claimed is not recorded twice anyway).
A crash between the claim and the write leaves the key claimed and not applied: when the data
lives in the store's PostgreSQL or MySQL database, call the SQL function
batchguard_claim(job, key, run_id, fence) inside the job's own transaction instead, so the
write and the claim commit or roll back together (docs/commands/claim.md).")]
pub struct ClaimArgs {
    /// The output's key (one line, at most 1024 bytes), e.g. `invoice:4711`.
    #[arg(long)]
    pub key: String,
    /// The store the run holds its lease in (default: BATCHGUARD_STORE, which `run` sets).
    #[arg(long)]
    pub store: Option<String>,
    /// The job (default: BATCHGUARD_JOB).
    #[arg(long)]
    pub job: Option<String>,
    /// The run's id (default: BATCHGUARD_RUN_ID).
    #[arg(long)]
    pub run_id: Option<String>,
    /// The run's fencing token (default: BATCHGUARD_FENCE).
    #[arg(long, allow_hyphen_values = true)]
    pub fence: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct LintArgs {
    /// Files and directories to lint (default: the current directory, recursively).
    pub paths: Vec<PathBuf>,
    /// Config file (default: batchguard.toml found by walking up from the first path).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = LintFormat::Pretty)]
    pub format: LintFormat,
    /// Lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
    /// The moment rules that look ahead count from (RFC 3339), for reproducible runs.
    #[arg(long, value_parser = parse_timestamp)]
    pub now: Option<jiff::Timestamp>,
    /// Also walk hidden files and folders (`.github/`, `.deploy/`); `.git` never.
    #[arg(long)]
    pub hidden: bool,
    /// List every file read with its kind and what it registered, and every file seen but
    /// not read with the reason (pretty: instead of the findings; json: a `files` array;
    /// sarif/github: on stderr). The exit code is lint's.
    #[arg(long)]
    pub list_files: bool,
}

/// `batchguard slots`: a manifest job, or an expression with its dialect and zone.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["manifest", "schedule"])))]
pub struct SlotsArgs {
    /// Manifest that declares the job (with --job).
    #[arg(long, requires = "job", conflicts_with_all = ["schedule", "dialect", "timezone"])]
    pub manifest: Option<PathBuf>,
    /// Name of the job in --manifest.
    #[arg(long, requires = "manifest")]
    pub job: Option<String>,
    /// A cron expression (instead of --manifest and --job).
    #[arg(long, allow_hyphen_values = true)]
    pub schedule: Option<String>,
    /// Dialect of --schedule: crontab, kubernetes, node-cron, cron-npm, pm2, croner or supercronic (default crontab).
    #[arg(long, requires = "schedule", value_parser = clap::builder::PossibleValuesParser::new(
        ["crontab", "kubernetes", "node-cron", "cron-npm", "pm2", "croner", "supercronic"]))]
    pub dialect: Option<String>,
    /// IANA time zone of --schedule (default UTC).
    #[arg(long, requires = "schedule")]
    pub timezone: Option<String>,
    /// First instant of the window (RFC 3339, included).
    #[arg(long, value_parser = parse_timestamp)]
    pub from: jiff::Timestamp,
    /// End of the window (RFC 3339, excluded).
    #[arg(long, value_parser = parse_timestamp)]
    pub to: jiff::Timestamp,
    /// Also print, as `# ` lines at their place in the output, each DST change that alters
    /// what runs (a slot skipped, run late or run twice) and what the dialect does.
    #[arg(long)]
    pub annotate: bool,
}

/// `batchguard init`: a starter manifest from the registrations found under PATHS.
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// Files and directories to read, as lint reads them (default: the current directory).
    pub paths: Vec<PathBuf>,
    /// Service name (default: the name of the first folder given).
    #[arg(long)]
    pub service: Option<String>,
    /// Write the manifest to FILE instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace --out FILE when it exists.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Config file (default: batchguard.toml found by walking up from the first path).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// Files and directories to read (default: the current directory, recursively).
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub format: GraphFormat,
    /// Config file (default: batchguard.toml found by walking up from the first path).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The moment duplicate detection counts slots from (RFC 3339), for reproducible output.
    #[arg(long, value_parser = parse_timestamp)]
    pub now: Option<jiff::Timestamp>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    Mermaid,
}

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// Events: path.csv, path.jsonl/.ndjson (also .gz/.zst), `-` (stdin), a named pipe,
    /// sqlite:PATH, postgres://… or mysql://…
    #[arg(long, allow_hyphen_values = true)]
    pub ledger: String,
    /// Applied outputs, same forms (default: the ledger's outputs table for a database).
    #[arg(long, allow_hyphen_values = true)]
    pub outputs: Option<String>,
    /// Format of a file source whose name does not tell it (`-`, a pipe, `<(…)`).
    #[arg(long, value_enum)]
    pub ledger_format: Option<LedgerFormat>,
    /// Manifest files or directories (searched like lint; repeatable). Without one, only
    /// AU102-AU104 and AU201 run.
    #[arg(long = "manifest")]
    pub manifests: Vec<PathBuf>,
    /// Audit only this job, `name` or `service/name` (repeatable).
    #[arg(long = "job")]
    pub jobs: Vec<String>,
    /// Config file: check severities in [rules], thresholds.drill_cadence (default:
    /// batchguard.toml found by walking up from the current directory).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory the manifests' snapshot.path templates are relative to (AU202-AU204).
    #[arg(long)]
    pub snapshots: Option<PathBuf>,
    /// Drill records for AU301 (drill-overdue): path.jsonl/.ndjson, sqlite:PATH,
    /// postgres://… or mysql://… (default: the ledger database's batchguard_drills table).
    #[arg(long)]
    pub drills: Option<String>,
    /// Window start (inclusive), RFC 3339: slots are selected by scheduled_at. Its offset
    /// is the report's zone unless --timezone says otherwise.
    #[arg(long, value_parser = parse_window_start, conflicts_with = "since")]
    pub from: Option<WindowStart>,
    /// Window end (exclusive), RFC 3339.
    #[arg(long, value_parser = parse_timestamp, conflicts_with = "since")]
    pub to: Option<jiff::Timestamp>,
    /// The window that ends now, instead of --from/--to: `30m`, `2h`, `1h30m`, `7d`. Now is
    /// the ledger's clock: PostgreSQL's now() for a postgres:// ledger, the host's for
    /// SQLite (as `run` takes it) and files.
    #[arg(long, value_parser = parse_since)]
    pub since: Option<u64>,
    #[arg(long, value_enum, default_value_t = AuditFormat::Pretty)]
    pub format: AuditFormat,
    /// Write the report to FILE instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
    /// IANA zone for ledger timestamps written without an offset (refused otherwise).
    #[arg(long)]
    pub assume_tz: Option<String>,
    /// IANA zone every time of the report is shown in, days counted in (default: the
    /// offset of --from; UTC for `Z`). JSON keeps RFC 3339 instants.
    #[arg(long)]
    pub timezone: Option<String>,
}

/// `--from` with the offset it was written with.
#[derive(Clone, Debug)]
pub struct WindowStart {
    pub at: jiff::Timestamp,
    /// `None` for `Z`.
    pub offset: Option<jiff::tz::Offset>,
}

fn parse_window_start(s: &str) -> Result<WindowStart, String> {
    use jiff::fmt::temporal::{Pieces, PiecesOffset};
    let at = parse_timestamp(s)?;
    let offset = Pieces::parse(s)
        .ok()
        .and_then(|p| p.offset())
        .and_then(|o| match o {
            PiecesOffset::Numeric(n) => Some(n.offset()),
            _ => None,
        });
    Ok(WindowStart { at, offset })
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LedgerFormat {
    Csv,
    /// JSON Lines (also NDJSON).
    Jsonl,
}

/// `batchguard run` (SPEC 7.1). Exit codes follow timeout(1)/flock(1): 0 succeeded or
/// skipped, the command's code on failure, 124 deadline, 128+N signal, 125 could not run,
/// 126 not executable, 127 not found.
#[derive(clap::Args, Debug)]
#[command(after_help = "Exit codes (as timeout(1) and flock(1)):
  0    the slot succeeded, was skipped (held, already succeeded, dead-lettered) or had succeeded before
  N    the command's own exit code, when the slot failed (its last attempt)
  124  the command was stopped at the deadline (lock.ttl - safety)
  125  batchguard could not run: bad manifest or arguments, no store URL for a shared lock.store,
       store unreachable, slot not of the schedule, this host could not prepare the run
  126  the command is not executable        127  the command was not found
  128+N  ended by signal N (a deploy's TERM is 143: the next run catches the slot up)

Which store: --store, else BATCHGUARD_STORE, else [run] store in batchguard.toml, else
sqlite:.batchguard/store.db (only for a job whose lock.store is sqlite or absent).

Example (crontab):
  * * * * * cd /srv/billing && batchguard run --manifest billing.batchguard.yaml \\
      --job settle-payments --store postgres://batch@db/billing")]
pub struct RunArgs {
    /// Manifest that declares the job.
    #[arg(long)]
    pub manifest: PathBuf,
    /// Name of the job in --manifest.
    #[arg(long)]
    pub job: String,
    /// Lock store: sqlite:PATH, postgres://…, mysql://… or redis://… (with --ledger).
    /// Default: BATCHGUARD_STORE, else `[run] store` in batchguard.toml, else
    /// sqlite:.batchguard/store.db, but only for a job whose lock.store is sqlite or absent.
    #[arg(long)]
    pub store: Option<String>,
    /// Ledger (default: the store's own tables).
    #[arg(long)]
    pub ledger: Option<String>,
    /// batchguard.toml with `[run] store` and `[run] tick_tolerance` (default: the nearest
    /// one above the manifest, else above the working directory).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The slot to run (RFC 3339); it must be a slot of the job's schedule. Default: the
    /// latest slot at or before the store's clock (or the next one, for a tick that comes
    /// at most the tick tolerance early).
    #[arg(long, value_parser = parse_timestamp)]
    pub scheduled_at: Option<jiff::Timestamp>,
    /// Who runs it; default BATCHGUARD_INSTANCE, else the host name, PM2's
    /// NODE_APP_INSTANCE (`host/pm2:2`) and the pid.
    #[arg(long)]
    pub instance: Option<String>,
    /// An operator's recovery of a failed, lost or dead-lettered slot (needs --scheduled-at and --reason).
    #[arg(long, requires_all = ["reason", "scheduled_at"])]
    pub manual: bool,
    /// Why the manual recovery (recorded in the `manual` event).
    #[arg(long, requires = "manual")]
    pub reason: Option<String>,
    /// Write a JSON summary of the run here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Driven over stdin/stdout JSON lines by the npm package's in-process `guard()`
    /// instead of running a command (docs/node-protocol.md).
    #[arg(long, conflicts_with = "command")]
    pub link: bool,
    /// The command and its arguments (default: the job's `command`).
    #[arg(last = true)]
    pub command: Vec<String>,
    /// `batchguard drill` only: the snapshot under test.
    #[arg(long, hide = true)]
    pub drill_snapshot: Option<PathBuf>,
    /// `batchguard drill` only: wait for end-of-file on stdin before the acquire.
    #[arg(long, hide = true)]
    pub drill_barrier: bool,
    /// `batchguard drill` only: retry without the backoff delay.
    #[arg(long, hide = true)]
    pub drill_no_delay: bool,
}

/// `batchguard drill` (SPEC 7.3). Exit 0 every scenario passed; 1 a scenario failed (or the
/// snapshot is not the slot's input); 2 the drill could not run.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Scenarios: clean (replay once), rerun (the same slot again, lock bypassed), \
concurrent (3 instances at once), crash (killed after the first output, then recovered), \
retry (first attempt fails EX_TEMPFAIL), stale (holder paused past its lease while another finishes).\n\
Example: batchguard drill --manifest deploy/billing.batchguard.yaml --job settle-payments \\\n  \
--snapshot snapshots/settle-payments/2026-03-01T02:00:00Z.jsonl --scheduled-at 2026-03-01T02:00:00Z --format markdown --out drill.md"
)]
pub struct DrillArgs {
    /// Manifest that declares the job.
    #[arg(long)]
    pub manifest: PathBuf,
    /// Name of the job in --manifest.
    #[arg(long)]
    pub job: String,
    /// The slot's input snapshot (its records are identified by the job's snapshot.key).
    #[arg(long)]
    pub snapshot: PathBuf,
    /// The slot the snapshot is for (RFC 3339; a slot of the job's schedule). Default: the
    /// latest slot at or before now.
    #[arg(long, value_parser = parse_timestamp)]
    pub scheduled_at: Option<jiff::Timestamp>,
    /// Check the snapshot's digest against this ledger's `start` of the slot first.
    #[arg(long)]
    pub ledger: Option<String>,
    /// Comma-separated: clean, rerun, concurrent, crash, retry, stale, or all.
    #[arg(long, default_value = "all")]
    pub scenarios: String,
    /// Append the outcome to drill records: a .jsonl file, sqlite:PATH, postgres://… or
    /// mysql://….
    #[arg(long)]
    pub record: Option<String>,
    #[arg(long, value_enum, default_value_t = DrillFormat::Pretty)]
    pub format: DrillFormat,
    /// Write the report here instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Refused unless it is a sqlite: file that does not exist yet: a drill only writes to
    /// stores it creates.
    #[arg(long)]
    pub store: Option<String>,
    /// Make the sandboxes here (a new or empty directory, kept). Default: a temporary
    /// directory, removed when every scenario passed.
    #[arg(long)]
    pub sandbox: Option<PathBuf>,
    /// Time limit per scenario (45s, 10m, 1h). Default: 10 x the job's expected_duration.
    #[arg(long, value_parser = parse_duration)]
    pub time_limit: Option<std::time::Duration>,
    /// Sandboxes run at the same time, when the job's state is per sandbox (replay.setup,
    /// or state under BATCHGUARD_SANDBOX). Default: the number of cores; 1 runs them one
    /// after the other.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DrillFormat {
    Pretty,
    Json,
    Markdown,
}

/// A duration as manifests write it (`45s`, `10m`, `1h30m`).
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = crate::manifest::duration::Duration::parse(s).map_err(|e| e.to_string())?;
    if d.secs() == 0 {
        return Err("must be longer than zero".into());
    }
    Ok(std::time::Duration::from_secs(d.secs()))
}

/// `batchguard store` (SPEC 7.2).
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[arg(value_enum)]
    pub action: StoreAction,
    /// sqlite:PATH, postgres://…, mysql://…, redis://… or rediss://… (default:
    /// BATCHGUARD_STORE, else `[run] store` in batchguard.toml, else sqlite:.batchguard/store.db)
    #[arg(long)]
    pub store: Option<String>,
    /// Config file with `[run] store` (default: batchguard.toml found by walking up from the
    /// current directory).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Only this job (status).
    #[arg(long)]
    pub job: Option<String>,
    /// The ledger `repair` reads the fences and slots from (default: the store's own
    /// tables): sqlite:PATH, postgres://…, mysql://… or a path.jsonl file.
    #[arg(long)]
    pub ledger: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StoreAction {
    /// Create or upgrade the tables (idempotent); on Redis, write the epoch.
    Migrate,
    /// Bring the store in line with --ledger after it lost state: every fencing counter
    /// past the ledger's highest fence; on Redis also the slots' markers and a new epoch.
    Repair,
    /// Live leases and the last slots per job.
    Status,
    /// Write the spool and the outputs of runs that died.
    Flush,
}

/// `batchguard watch`: the store (or a ledger) followed as it grows.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit codes: 0 stopped (q, --for, --once); 1 --exit-on-alert saw an alert; \
2 could not run; 128+N ended by signal N (TERM 143, HUP 129, INT 130); 129 its terminal \
went away (end of file or hang-up on standard input); 141 its output was closed."
)]
pub struct WatchArgs {
    #[command(flatten)]
    pub source: LiveArgs,
    /// The window the figures are over: the last D (`30m`, `2h`, `1d`).
    #[arg(long, value_parser = parse_since, default_value = "30m")]
    pub since: u64,
    /// Time between refreshes.
    #[arg(long, value_parser = parse_since, default_value = "2s")]
    pub interval: u64,
    /// Print the figures once and exit (off a terminal, for scripts and pipelines).
    #[arg(long)]
    pub once: bool,
    /// `pretty`: the table; `json`: the figures (with --once one object, else one per
    /// refresh, a line each).
    #[arg(long, value_enum, default_value_t = WatchFormat::Pretty)]
    pub format: WatchFormat,
    /// Exit 1 as soon as an alert fires (a deploy pipeline's "watch for 30 minutes" step).
    #[arg(long)]
    pub exit_on_alert: bool,
    /// Stop after D (`30m`) with exit 0 if nothing made it stop before.
    #[arg(long = "for", value_parser = parse_since, value_name = "D")]
    pub for_: Option<u64>,
}

/// `batchguard metrics`: Prometheus metrics of the store (or a ledger).
#[derive(clap::Args, Debug)]
pub struct MetricsArgs {
    #[command(flatten)]
    pub source: LiveArgs,
    /// The window of the gauges (missed and failed slots, contention, alerts); counters and
    /// histograms count every row.
    #[arg(long, value_parser = parse_since, default_value = "24h")]
    pub since: u64,
    /// Serve /metrics on ADDR (`127.0.0.1:9464`, `:9464` for every interface).
    #[arg(
        long,
        required_unless_present = "textfile",
        conflicts_with = "textfile"
    )]
    pub listen: Option<String>,
    /// Write the metrics once to FILE (`*.prom`, replaced atomically) for node_exporter's
    /// textfile collector, and exit.
    #[arg(long)]
    pub textfile: Option<PathBuf>,
}

/// Where `watch` and `metrics` read.
#[derive(clap::Args, Debug)]
pub struct LiveArgs {
    /// Lock store (its leases, its clock and, without --ledger, its ledger tables):
    /// sqlite:PATH, postgres://…, mysql://…, or redis://… (with --ledger). Default:
    /// BATCHGUARD_STORE, else `[run] store` in batchguard.toml, else this directory's
    /// .batchguard/store.db when it exists.
    #[arg(long)]
    pub store: Option<String>,
    /// Ledger to follow instead of the store's tables: sqlite:PATH, postgres://…,
    /// mysql://… or a JSONL file.
    #[arg(long)]
    pub ledger: Option<String>,
    /// Outputs of a file ledger (a database ledger's own table otherwise).
    #[arg(long)]
    pub outputs: Option<String>,
    /// Manifest files or directories (repeatable): expected slots and the alerts'
    /// thresholds.
    #[arg(long = "manifest")]
    pub manifests: Vec<PathBuf>,
    /// Only this job, `name` or `service/name` (repeatable).
    #[arg(long = "job")]
    pub jobs: Vec<String>,
    /// Config file: check severities in [rules] (default: batchguard.toml found by walking
    /// up from the current directory).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// IANA zone for ledger timestamps written without an offset (refused otherwise).
    #[arg(long)]
    pub assume_tz: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WatchFormat {
    Pretty,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AuditFormat {
    Pretty,
    Json,
    Markdown,
    Html,
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LintFormat {
    Pretty,
    Json,
    Sarif,
    Github,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RulesFormat {
    Text,
    /// The table of docs/rules.md.
    Markdown,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SchemaKind {
    Manifest,
    Config,
    Ledger,
}

/// A window length: `30m`, `2h`, `1h30m`, `7d`.
fn parse_since(s: &str) -> Result<u64, String> {
    match crate::manifest::duration::Duration::parse(s.trim()) {
        Ok(d) if d.secs() > 0 => Ok(d.secs()),
        Ok(_) => Err("a length of time must be more than zero (30m, 2h, 1d)".into()),
        Err(e) => Err(format!(
            "not a length of time such as 30m, 2h, 1h30m or 7d: {e}"
        )),
    }
}

/// An RFC 3339 instant. clap prints the value before the message, so the message says
/// only what is wrong with it: a date that does not exist, a date without a time or an
/// offset, an instant outside the range batchguard can count in.
fn parse_timestamp(s: &str) -> Result<jiff::Timestamp, String> {
    s.parse::<jiff::Timestamp>().map_err(|e| {
        timestamp_problem(s).unwrap_or_else(|| {
            format!("not an RFC 3339 instant with an offset (2026-03-01T02:00:00Z): {e}")
        })
    })
}

fn timestamp_problem(s: &str) -> Option<String> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let range = || {
        format!(
            "out of range: instants run from -9999-01-02 to {}",
            jiff::Timestamp::from_second(jiff::Timestamp::MAX.as_second())
                .unwrap_or(jiff::Timestamp::MAX)
        )
    };
    let year_digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if year_digits > 4 && s.as_bytes().get(year_digits) == Some(&b'-') {
        return Some(range());
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i16>().ok();
    let shaped = s.get(4..5) == Some("-")
        && s.get(7..8) == Some("-")
        && s.get(..10).is_some_and(|d| !d.contains('+'));
    let (Some(year), Some(month), Some(day), true) = (num(0..4), num(5..7), num(8..10), shaped)
    else {
        // Not even a date: jiff's account of the first bad character would not help.
        return (!s.starts_with(|c: char| c.is_ascii_digit())).then(|| {
            "not an RFC 3339 instant: write a date, a time and an offset, as in 2026-03-01T02:00:00Z"
                .to_owned()
        });
    };
    let Some(name) = usize::try_from(month - 1).ok().and_then(|m| MONTHS.get(m)) else {
        return Some(format!(
            "the date does not exist: there is no month {month:02} (01-12)"
        ));
    };
    let days = jiff::civil::date(year, month as i8, 1).days_in_month();
    if day < 1 || day > i16::from(days) {
        return Some(format!(
            "the date does not exist: {name} {year} has {days} days"
        ));
    }
    let date = &s[..10];
    let pieces = jiff::fmt::temporal::Pieces::parse(s).ok()?;
    if pieces.time().is_none() {
        return Some(format!(
            "a date alone is not an instant: add a time and an offset, as in {date}T00:00:00Z (midnight UTC) or {date}T00:00:00+09:00"
        ));
    }
    if pieces.offset().is_none() {
        let local = pieces.date().to_datetime(pieces.time().unwrap_or_default());
        return Some(format!(
            "no offset: add Z for UTC or the offset meant, as in {local}Z or {local}+09:00"
        ));
    }
    Some(range())
}
