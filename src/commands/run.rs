//! `batchguard run`: one slot of a job under the store's lock. The guard reports its own
//! failures and ends with `timeout(1)`-style codes (SPEC 7.1), never with exit 2.

use super::{Error, Outcome};
use crate::cli::RunArgs;
use crate::guard::{self, Options};

pub(super) fn run(args: RunArgs) -> Result<Outcome, Error> {
    Ok(Outcome::Code(guard::run(&Options {
        manifest: args.manifest,
        job: args.job,
        store: args.store,
        ledger: args.ledger,
        scheduled_at: args.scheduled_at,
        instance: args.instance,
        manual: args.manual,
        reason: args.reason,
        report: args.report,
        config: args.config,
        link: args.link,
        command: args.command,
        rule_code: |issue| crate::lint::rule_of(issue).code,
        drill: guard::Drill {
            snapshot: args.drill_snapshot,
            barrier: args.drill_barrier,
            no_delay: args.drill_no_delay,
        },
    })))
}
