//! `batchguard claim --key KEY` (SPEC 7.5): one output of the running job claimed in its
//! store with the run's id and fence, from a job's own process (a shell or Python job under
//! `batchguard run`). Exit 0 the first claim of (job, key) ever (`claimed`), 1 claimed before
//! (`already claimed`), 125 refused, store unreachable or an argument missing.

use super::Outcome;
use crate::cli::ClaimArgs;
use crate::store::{self, StoreUrl};

/// Exit code of a claim made before.
const ALREADY: u8 = 1;
/// Exit code of a refused claim, an unreachable store, a missing argument (as `run`'s 125).
const CANNOT: u8 = 125;

/// A flag, else the environment variable `run` sets.
fn given(flag: Option<String>, var: &str) -> Option<String> {
    flag.or_else(|| std::env::var(var).ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn cannot(message: String) -> Result<Outcome, super::Error> {
    eprintln!("batchguard claim: {message}");
    Ok(Outcome::Code(CANNOT))
}

pub(super) fn run(args: ClaimArgs) -> Result<Outcome, super::Error> {
    let missing = |what: &str, flag: &str, var: &str| {
        format!(
            "no {what}: give {flag}, or run this from a job that `batchguard run` started (it sets {var})"
        )
    };
    let Some(job) = given(args.job, "BATCHGUARD_JOB") else {
        return cannot(missing("job", "--job NAME", "BATCHGUARD_JOB"));
    };
    let Some(run_id) = given(args.run_id, "BATCHGUARD_RUN_ID") else {
        return cannot(missing("run id", "--run-id ID", "BATCHGUARD_RUN_ID"));
    };
    let Some(fence) = given(args.fence, "BATCHGUARD_FENCE") else {
        return cannot(missing("fence", "--fence N", "BATCHGUARD_FENCE"));
    };
    let Ok(fence) = fence.parse::<i64>() else {
        return cannot(format!("the fence `{fence}` is not an integer"));
    };
    let Some(raw) = given(args.store, "BATCHGUARD_STORE") else {
        return cannot(missing("store", "--store URL", "BATCHGUARD_STORE"));
    };
    if let Some(why) = crate::guard::bad_claim_key(&args.key) {
        return cannot(why.to_owned());
    }
    let url = match StoreUrl::parse(&raw) {
        Ok(u) => u,
        Err(e) => return cannot(format!("--store {e}")),
    };
    let mut st = match store::open(&url) {
        Ok(st) => st,
        Err(e) => return cannot(e.0),
    };
    match st.claim(&job, &args.key, &run_id, fence) {
        Ok(true) => {
            super::print("claimed\n");
            Ok(Outcome::Clean)
        }
        Ok(false) => {
            super::print("already claimed\n");
            Ok(Outcome::Code(ALREADY))
        }
        Err(e) => cannot(e.0),
    }
}
