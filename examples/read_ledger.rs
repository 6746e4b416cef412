//! Reads a ledger and prints rows read, rejected, and the time: the reader's throughput.
//!
//! ```text
//! cargo run --release --example read_ledger -- DIR/events.csv [DIR/outputs.csv]
//! ```

use batchguard::{LedgerReadOptions, LedgerSource, read_events, read_outputs};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(ledger) = args.first() else {
        eprintln!("usage: read_ledger EVENTS_SOURCE [OUTPUTS_SOURCE]");
        return ExitCode::from(2);
    };
    let opts = LedgerReadOptions::default();
    let run = || -> Result<(), batchguard::LedgerError> {
        let t = Instant::now();
        let src = LedgerSource::parse(ledger)?;
        let (mut good, mut bad, mut bytes) = (0u64, 0u64, 0usize);
        let n = read_events(
            &src,
            &opts,
            &mut |e| {
                good += 1;
                bytes += e.run_id.len();
            },
            &mut |_| bad += 1,
        )?;
        eprintln!(
            "events  {}: {n} rows ({good} good, {bad} rejected) in {:.2}s",
            src.display(),
            t.elapsed().as_secs_f64()
        );
        let out_src = match args.get(1) {
            Some(o) => Some(LedgerSource::parse(o)?),
            None => match src {
                LedgerSource::Sqlite(_) | LedgerSource::Postgres { .. } => Some(src.clone()),
                _ => None,
            },
        };
        if let Some(o) = out_src {
            let t = Instant::now();
            let (mut good, mut bad) = (0u64, 0u64);
            let n = read_outputs(&o, &opts, &mut |_| good += 1, &mut |_| bad += 1)?;
            eprintln!(
                "outputs {}: {n} rows ({good} good, {bad} rejected) in {:.2}s",
                o.display(),
                t.elapsed().as_secs_f64()
            );
        }
        std::hint::black_box(bytes);
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
