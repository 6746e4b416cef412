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
    mask_dsn(url)
}

/// A driver message with the DSN's password (as written) scrubbed from it.
pub fn scrub(url: &str, message: String) -> String {
    match password_of(url) {
        Some(pw) => message.replace(pw, "***"),
        None => message,
    }
}

/// A driver error as a message: a server's own words (its message, PostgreSQL's detail
/// and hint), never the server's source location (`at line 948` of a PostgreSQL file is
/// the server's, not the user's) nor sqlx's "error returned from database" preamble.
pub fn driver_message(e: &sqlx::Error) -> String {
    let Some(d) = e.as_database_error() else {
        return e.to_string();
    };
    let mut out = d.message().to_owned();
    if let Some(pg) = d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            out.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = pg.hint() {
            out.push_str(&format!("; hint: {hint}"));
        }
    }
    out
}

/// Whether a driver error means no usable connection (rather than an answer of the
/// server's): the store is then unreachable.
pub fn is_connection_error(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_)
    )
}

/// The table a "no such table" message of PostgreSQL (`relation "t" does not exist`),
/// MySQL (`Table 'db.t' doesn't exist`) or SQLite (`no such table: t`) names.
pub fn missing_table(message: &str) -> Option<String> {
    if let Some(rest) = message.strip_prefix("no such table: ") {
        return Some(rest.trim().to_owned());
    }
    let quoted = |open: char, close: char| -> Option<&str> {
        let a = message.find(open)? + 1;
        let b = message[a..].find(close)? + a;
        Some(&message[a..b])
    };
    let name = if message.starts_with("relation ") {
        quoted('"', '"')?
    } else if message.starts_with("Table ") {
        quoted('\'', '\'')?
    } else {
        return None;
    };
    Some(name.rsplit('.').next().unwrap_or(name).to_owned())
}

/// Why [`connect_postgres`] has no connection.
#[derive(Debug)]
pub enum ConnectError {
    /// The server (or the network) refused: the driver's error, unscrubbed.
    Driver(sqlx::Error),
    /// No answer within [`CONNECT_TIMEOUT`].
    NoAnswer,
}

/// Connects to PostgreSQL, giving up after [`CONNECT_TIMEOUT`] so an unreachable host is
/// an error in seconds, not a hang.
pub async fn connect_postgres(
    options: &sqlx::postgres::PgConnectOptions,
) -> Result<sqlx::postgres::PgConnection, ConnectError> {
    use sqlx::Connection;
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        sqlx::postgres::PgConnection::connect_with(options),
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(ConnectError::Driver(e)),
        Err(_) => Err(ConnectError::NoAnswer),
    }
}

/// The DSN with its password, in the userinfo or as a `password=` parameter, replaced
/// by `***`.
pub fn mask_dsn(s: &str) -> String {
    let mut out = s.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let rest = &out[rest_start..];
        let cut = rest.find('?').unwrap_or(rest.len());
        if let Some(at) = rest[..cut].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            out.replace_range(rest_start + colon + 1..rest_start + at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let masked: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{base}{}", masked.join("&"));
    }
    out
}

/// The DSN's password as written, to scrub it from driver messages too.
pub fn password_of(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let cut = rest.find('?').unwrap_or(rest.len());
    let at = rest[..cut].rfind('@')?;
    let colon = rest[..at].find(':')?;
    let pw = &rest[colon + 1..at];
    (!pw.is_empty()).then_some(pw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_password_wherever_it_is_written() {
        assert_eq!(mask_dsn("postgres://u:p@h/d"), "postgres://u:***@h/d");
        assert_eq!(mask_dsn("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(
            mask_dsn("postgres://h/d?password=x&a=b"),
            "postgres://h/d?password=***&a=b"
        );
        assert_eq!(mask_dsn("postgres://u:p/a@h/d"), "postgres://u:***@h/d");
    }

    #[test]
    fn names_the_missing_table_in_each_servers_words() {
        assert_eq!(
            missing_table("relation \"batchguard_slots\" does not exist").as_deref(),
            Some("batchguard_slots")
        );
        assert_eq!(
            missing_table("Table 'test.batchguard_fence' doesn't exist").as_deref(),
            Some("batchguard_fence")
        );
        assert_eq!(
            missing_table("no such table: batchguard_leases").as_deref(),
            Some("batchguard_leases")
        );
        assert_eq!(missing_table("permission denied for table x"), None);
    }

    #[test]
    fn finds_the_password_to_scrub() {
        assert_eq!(password_of("postgres://u:p%40ss@h/d"), Some("p%40ss"));
        assert_eq!(password_of("postgres://u@h/d"), None);
        assert_eq!(password_of("postgres://h/d?x=a@b"), None);
    }
}
