//! What every database user shares: a current-thread runtime for synchronous callers, a
//! connect with a time limit, and masking of a DSN's password in every message.

use std::time::Duration;

/// How long a connect may take before the store counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A current-thread tokio runtime: the callers stay synchronous.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the database runtime: {e}"))
}

/// The DSN as it may be shown: its password replaced by `***`.
pub fn mask(url: &str) -> String {
    crate::ledger::read::mask_dsn(url)
}

/// A driver message with the DSN's password (as written) scrubbed from it.
pub fn scrub(url: &str, message: String) -> String {
    match crate::ledger::sql::password_of(url) {
        Some(pw) => message.replace(pw, "***"),
        None => message,
    }
}
