//! `batchguard slots`: the instants a schedule fires in a window, streamed to stdout.

use super::{Error, Outcome};
use crate::cli::SlotsArgs;
use crate::schedule::Dialect;
use crate::slots::{self, Options, Source};

pub(super) fn run(args: SlotsArgs) -> Result<Outcome, Error> {
    // clap requires --job with --manifest and one of --manifest and --schedule.
    let source = match (args.manifest, args.job) {
        (Some(manifest), Some(job)) => Source::Job { manifest, job },
        _ => Source::Expression {
            expr: args.schedule.unwrap_or_default(),
            // clap checked the word against the same list.
            dialect: args
                .dialect
                .as_deref()
                .and_then(|d| d.parse().ok())
                .unwrap_or(Dialect::Crontab),
            timezone: args.timezone,
        },
    };
    slots::run(&Options {
        source,
        from: args.from,
        to: args.to,
        annotate: args.annotate,
    })?;
    Ok(Outcome::Clean)
}
