//! Thin entry point: parse arguments, dispatch to the command, map the result to an exit code.

use batchguard::CANNOT_RUN;
use batchguard::Cli;
use clap::Parser;
use std::process::ExitCode;

/// The lint and audit hot paths allocate many small strings and nodes; mimalloc is
/// markedly faster than the system allocator for that pattern. It is built without
/// transparent huge pages (`no_thp`): a `run` touches a few hundred KiB, and a huge page
/// zeroes 2 MiB on first touch.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints usage errors (exit 2) and --help/--version (exit 0) itself.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { CANNOT_RUN } else { 0 });
        }
    };
    ExitCode::from(match batchguard::dispatch(cli.command) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprint!("{}", e.render());
            CANNOT_RUN
        }
    })
}
