//! The store URL, parsed once: its kind, the form every message shows (password masked),
//! and the connection options its store needs. Every store's `open`, every store error and
//! the replay line take a [`StoreUrl`], so no store parses, masks or scrubs the string
//! again, and a string that is no store URL is said to be one before anything connects.

use super::redis;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The kinds of store, named as a manifest's `lock.store` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    Sqlite,
    Postgres,
    Mysql,
    Redis,
}

impl StoreKind {
    /// The manifest's `lock.store` word.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
            StoreKind::Mysql => "mysql",
            StoreKind::Redis => "redis",
        }
    }

    /// Whether the store keeps the ledger tables itself (Redis does not: `run` needs
    /// `--ledger` beside it).
    pub fn keeps_ledger(self) -> bool {
        self != StoreKind::Redis
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The forms a store URL takes, for every message that refuses one.
pub const FORMS: &str = "sqlite:PATH, postgres://USER@HOST[:PORT]/DB, mysql://USER@HOST[:PORT]/DB, redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://… (TLS)";

/// The schemes a store URL starts with (`sqlite:` has no `//`).
const SCHEMES: [&str; 6] = [
    "sqlite",
    "postgres",
    "postgresql",
    "mysql",
    "redis",
    "rediss",
];

/// What one kind of store connects with.
#[derive(Clone)]
pub(super) enum Conn {
    Sqlite(PathBuf),
    Postgres(Box<PgConnectOptions>),
    Mysql(Box<MySqlConnectOptions>),
    Redis(redis::Config),
}

/// A store URL, checked: which store, how to show it, how to connect.
#[derive(Clone)]
pub struct StoreUrl {
    raw: String,
    shown: String,
    kind: StoreKind,
    conn: Conn,
}

/// A string that is not a store URL: a usage error, never "unreachable".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a store URL: {why}; give {FORMS}")]
pub struct UrlError {
    /// The string as given, its password masked.
    pub shown: String,
    pub why: String,
}

impl StoreUrl {
    /// Checks `s` and takes it apart; nothing connects yet.
    pub fn parse(s: &str) -> Result<StoreUrl, UrlError> {
        let shown = crate::db::mask(s);
        let bad = |why: String| UrlError {
            shown: shown.clone(),
            why,
        };
        let scheme = s
            .split_once(':')
            .map(|(scheme, _)| scheme)
            .filter(|sc| !sc.is_empty() && sc.chars().all(|c| c.is_ascii_alphanumeric()));
        let (kind, conn) = match scheme {
            Some("sqlite") => {
                let path = s["sqlite:".len()..]
                    .strip_prefix("//")
                    .unwrap_or(&s["sqlite:".len()..]);
                if path.is_empty() {
                    return Err(bad("`sqlite:` needs a file path (sqlite:PATH)".into()));
                }
                (StoreKind::Sqlite, Conn::Sqlite(PathBuf::from(path)))
            }
            Some(sc @ ("postgres" | "postgresql" | "mysql" | "redis" | "rediss"))
                if !s[sc.len() + 1..].starts_with("//") =>
            {
                return Err(bad(format!("a `{sc}:` URL starts with `{sc}://HOST`")));
            }
            Some("postgres" | "postgresql") => {
                let options = PgConnectOptions::from_str(s)
                    .map_err(|e| bad(format!("not a PostgreSQL URL: {}", scrub_of(s, e))))?
                    .application_name("batchguard");
                (StoreKind::Postgres, Conn::Postgres(Box::new(options)))
            }
            Some("mysql") => {
                let options = MySqlConnectOptions::from_str(s)
                    .map_err(|e| bad(format!("not a MySQL URL: {}", scrub_of(s, e))))?;
                (StoreKind::Mysql, Conn::Mysql(Box::new(options)))
            }
            Some("redis" | "rediss") => {
                let cfg = redis::parse_url(s).map_err(bad)?;
                (StoreKind::Redis, Conn::Redis(cfg))
            }
            Some(other) => {
                let lower = other.to_ascii_lowercase();
                let hint = crate::text::closest(&lower, &SCHEMES)
                    .map_or_else(String::new, |k| format!(" (did you mean `{k}`?)"));
                return Err(bad(format!("unknown scheme `{other}:`{hint}")));
            }
            None => {
                let looks_like_file = Path::new(s).extension().is_some() || s.contains('/');
                let why = if looks_like_file && !s.is_empty() {
                    format!("it has no scheme (a SQLite file is `sqlite:{s}`)")
                } else {
                    "it has no scheme".to_owned()
                };
                return Err(bad(why));
            }
        };
        Ok(StoreUrl {
            raw: s.to_owned(),
            shown,
            kind,
            conn,
        })
    }

    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The URL as messages show it: its password masked.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The URL as given, password included: to connect, and for files only `run` reads
    /// back (the spool, a run directory's `run.json`, both mode 0600); never for a message.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// A driver's message with the URL's password, as written, replaced by `***`.
    pub fn scrub(&self, message: String) -> String {
        crate::db::scrub(&self.raw, message)
    }

    /// The SQLite file, for a `sqlite:` URL.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.conn {
            Conn::Sqlite(p) => Some(p),
            _ => None,
        }
    }

    pub(super) fn conn(&self) -> &Conn {
        &self.conn
    }
}

fn scrub_of(url: &str, e: impl fmt::Display) -> String {
    crate::db::scrub(url, e.to_string())
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The masked form only: the options hold the password.
impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({:?}, {})", self.kind, self.shown)
    }
}

impl FromStr for StoreUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_named_as_the_manifest_names_it() {
        let kinds = [
            ("sqlite:.batchguard/store.db", StoreKind::Sqlite, "sqlite"),
            ("sqlite://tmp/x.db", StoreKind::Sqlite, "sqlite"),
            ("postgres://u@h/d", StoreKind::Postgres, "postgres"),
            ("postgresql://u@h:5433/d", StoreKind::Postgres, "postgres"),
            ("mysql://root@h/test", StoreKind::Mysql, "mysql"),
            ("redis://h:6379/0", StoreKind::Redis, "redis"),
            ("rediss://h/0?prefix=a", StoreKind::Redis, "redis"),
        ];
        for (s, kind, word) in kinds {
            let u = StoreUrl::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!((u.kind(), u.kind().as_str()), (kind, word), "{s}");
        }
        let u = StoreUrl::parse("sqlite://tmp/x.db").unwrap();
        assert_eq!(u.sqlite_path(), Some(Path::new("tmp/x.db")));
    }

    #[test]
    fn what_is_not_a_store_url_says_so_and_lists_the_forms() {
        for (s, why) in [
            (
                "postgress://u@h/d",
                "unknown scheme `postgress:` (did you mean `postgres`?)",
            ),
            (
                "sqlite.db",
                "it has no scheme (a SQLite file is `sqlite:sqlite.db`)",
            ),
            ("redis:/x", "a `redis:` URL starts with `redis://HOST`"),
            ("sqlite:", "`sqlite:` needs a file path"),
            ("", "it has no scheme"),
            ("postgres://u@h:notaport/d", "not a PostgreSQL URL"),
        ] {
            let e = StoreUrl::parse(s).expect_err(s).to_string();
            assert!(e.contains("is not a store URL"), "{s}: {e}");
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.contains("sqlite:PATH, postgres://"), "{s}: {e}");
        }
    }

    #[test]
    fn a_password_is_never_shown() {
        let u = StoreUrl::parse("postgres://u:hunter2@h/d").unwrap();
        assert_eq!(u.to_string(), "postgres://u:***@h/d");
        assert!(!format!("{u:?}").contains("hunter2"));
        assert_eq!(u.scrub("auth hunter2 failed".into()), "auth *** failed");
        let e = StoreUrl::parse("postgress://u:hunter2@h/d").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let e = StoreUrl::parse("redis://u:hunter2@h/0?retention=1h").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
