//! `batchguard init`: a starter manifest for the jobs a tree already registers.

use super::{Error, Outcome, paths_or_cwd, settings_for};
use crate::cli::InitArgs;
use crate::init::{self, Options};

pub(super) fn run(args: InitArgs) -> Result<Outcome, Error> {
    // The config is found from the paths as given, the current directory when none are.
    let settings = settings_for(args.config, &paths_or_cwd(args.paths.clone()))?;
    init::run(
        &Options {
            paths: args.paths,
            service: args.service,
            out: args.out,
            force: args.force,
        },
        settings,
    )?;
    Ok(Outcome::Clean)
}
