//! `batchguard completions SHELL`: a completion script generated from the clap definitions.

use super::{Error, Outcome};
use crate::cli::Cli;
use clap::CommandFactory;

pub(super) fn run(shell: clap_complete::Shell) -> Result<Outcome, Error> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "batchguard", &mut std::io::stdout());
    Ok(Outcome::Clean)
}
