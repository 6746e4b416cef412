//! A Redis store URL's parameters of batchguard's own (`?prefix=`, `?retention=`), taken
//! out before the rest goes to the Redis client.

use redis::IntoConnectionInfo;

/// The key prefix unless `?prefix=` says otherwise.
pub const DEFAULT_PREFIX: &str = "batchguard";
/// How long a slot's marker (succeeded, dead-lettered, attempts) is kept after its last
/// write unless `?retention=` says otherwise: longer than a month, so the monthly audit's
/// window and a late `--scheduled-at` replay of last month's slot are still guarded.
pub const DEFAULT_RETENTION_SECS: u64 = 35 * 86_400;
/// The shortest retention accepted: a marker must outlive any retry of its slot.
const MIN_RETENTION_SECS: u64 = 86_400;
/// Where the highest fence seen per store and job is kept.
pub const FENCES_FILE: &str = ".batchguard/fences.json";

/// A store URL taken apart: what goes to the client, and batchguard's own parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The URL without batchguard's parameters, for the Redis client.
    pub client_url: String,
    pub prefix: String,
    pub retention_secs: u64,
    /// Scheme, host, port, database and prefix: what the fence file is keyed by (no
    /// credentials, so a rotated password does not forget the fences).
    pub identity: String,
}

/// `45s`, `10m`, `1h30m`, `35d`: the manifest's duration style.
fn parse_duration(s: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(d))?,
            );
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        total = total.checked_add(num.take()?.checked_mul(unit)?)?;
    }
    (num.is_none() && !s.is_empty()).then_some(total)
}

fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
}

/// Takes `?prefix=` and `?retention=` out of a `redis://` / `rediss://` URL, and checks
/// the rest is a URL the Redis client takes; the error is the reason only (no URL).
pub fn parse_url(url: &str) -> Result<Config, String> {
    let bad = |why: String| why;
    let (rest, fragment) = match url.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (url, None),
    };
    let (base, query) = match rest.split_once('?') {
        Some((b, q)) => (b, q),
        None => (rest, ""),
    };
    let mut prefix = DEFAULT_PREFIX.to_owned();
    let mut retention_secs = DEFAULT_RETENTION_SECS;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "prefix" => {
                if !valid_prefix(v) {
                    return Err(bad(format!(
                        "`prefix={v}` is not a key prefix: use 1 to 64 letters, digits, `_`, `-`, `.` or `:`"
                    )));
                }
                prefix = v.to_owned();
            }
            "retention" => {
                retention_secs = parse_duration(v)
                    .filter(|s| *s >= MIN_RETENTION_SECS)
                    .ok_or_else(|| {
                        bad(format!(
                            "`retention={v}` is not a retention of at least 1d (a duration such as 35d or 90d)"
                        ))
                    })?;
            }
            _ => kept.push(pair),
        }
    }
    let mut client_url = base.to_owned();
    if !kept.is_empty() {
        client_url.push('?');
        client_url.push_str(&kept.join("&"));
    }
    if let Some(f) = fragment {
        client_url.push('#');
        client_url.push_str(f);
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_and_path = &base[scheme_end..];
    let (authority, path) = match authority_and_path.find('/') {
        Some(i) => (&authority_and_path[..i], &authority_and_path[i + 1..]),
        None => (authority_and_path, ""),
    };
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    let db = if path.is_empty() { "0" } else { path };
    let identity = format!("{}{hostport}/{db}#{prefix}", &base[..scheme_end]);
    client_url
        .as_str()
        .into_connection_info()
        .map_err(|e| format!("not a Redis URL: {}", crate::db::scrub(url, e.to_string())))?;
    Ok(Config {
        client_url,
        prefix,
        retention_secs,
        identity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batchguards_parameters_are_taken_out_of_the_url() {
        let c =
            parse_url("redis://u:pw@h:6380/2?prefix=team.a&retention=90d&protocol=resp2").unwrap();
        assert_eq!(c.client_url, "redis://u:pw@h:6380/2?protocol=resp2");
        assert_eq!(c.prefix, "team.a");
        assert_eq!(c.retention_secs, 90 * 86_400);
        assert_eq!(c.identity, "redis://h:6380/2#team.a");
        let c = parse_url("rediss://h?retention=36h#insecure").unwrap();
        assert_eq!(c.client_url, "rediss://h#insecure");
        assert_eq!(
            (c.prefix.as_str(), c.retention_secs),
            ("batchguard", 36 * 3600)
        );
        assert_eq!(c.identity, "rediss://h/0#batchguard");
    }

    #[test]
    fn a_bad_prefix_or_retention_is_named_without_the_password() {
        let e = parse_url("redis://u:hunter2@h/0?retention=2h").unwrap_err();
        assert!(
            e.contains("`retention=2h` is not a retention of at least 1d"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = parse_url("redis://h/0?prefix=a*b").unwrap_err();
        assert!(e.contains("`prefix=a*b` is not a key prefix"), "{e}");
        assert!(parse_url("redis://h/0?retention=10x").is_err());
    }
}
