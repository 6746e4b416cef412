//! Writes a synthetic ledger with known defects and their expected audit counts.
//!
//! ```text
//! cargo run --release -p batchguard-ledger-gen -- --out /tmp/ledger --seed 1 --events 10000000
//! ```
//! See `docs/ledger.md` ("The generator") and the library of this crate.

use batchguard::Dialect;
use batchguard_ledger_gen::{CODES, Format, GenOptions, generate};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Generate a batchguard ledger with injected defects and expected.json")]
struct Args {
    /// Directory to write manifest.batchguard.yaml, events.*, outputs.*, expected.json into.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Target number of event rows (the window is sized to come close).
    #[arg(long, default_value_t = 100_000)]
    events: u64,
    #[arg(long, default_value_t = 200)]
    jobs: usize,
    /// csv or jsonl.
    #[arg(long, default_value = "csv")]
    format: String,
    /// Cron dialect of the service; default: picked by the seed.
    #[arg(long)]
    dialect: Option<String>,
    /// Window start (RFC 3339); default 2026-03-01T00:00:00Z.
    #[arg(long)]
    from: Option<String>,
    /// Window length in days; default sized from --events.
    #[arg(long)]
    days: Option<u32>,
    /// Share of due slots that get one defect.
    #[arg(long, default_value_t = 0.03)]
    defect_rate: f64,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let mut o = GenOptions::new(&a.out, a.seed, a.events);
    o.jobs = a.jobs;
    o.days = a.days;
    o.defect_rate = a.defect_rate;
    o.format = match a.format.as_str() {
        "csv" => Format::Csv,
        "jsonl" | "ndjson" => Format::Jsonl,
        f => {
            eprintln!("error: --format {f}: expected csv or jsonl");
            return ExitCode::from(2);
        }
    };
    if let Some(d) = &a.dialect {
        match d.parse::<Dialect>() {
            Ok(d) => o.dialect = Some(d),
            Err(e) => {
                eprintln!("error: --dialect: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(f) = &a.from {
        match f.parse() {
            Ok(t) => o.from = Some(t),
            Err(e) => {
                eprintln!("error: --from {f}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let started = std::time::Instant::now();
    match generate(&o) {
        Ok(g) => {
            eprintln!(
                "wrote {} events and {} outputs ({} dialect, {} .. {}) to {} in {:.2}s",
                g.events,
                g.outputs,
                g.dialect,
                g.from,
                g.to,
                a.out.display(),
                started.elapsed().as_secs_f64()
            );
            let counts: Vec<String> = CODES
                .iter()
                .zip(g.findings)
                .map(|(c, n)| format!("{c}={n}"))
                .collect();
            eprintln!("expected findings: {}", counts.join(" "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
