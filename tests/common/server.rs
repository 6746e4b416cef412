//! What the helpers of the real test servers (`pgdb`, `mysqldb`, `redisdb`) share: a name
//! no other test (or run) uses, the URL surgery, a runtime for the blocking calls, and what
//! to do when the server is unreachable: fail under `CI=true` (CI runs these tests for
//! real), elsewhere skip, saying why.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// `{prefix}{pid}_{tag}_{n}`, unique across parallel tests and test processes.
pub fn unique(prefix: &str, sep: char, tag: &str) -> String {
    format!(
        "{prefix}{sep}{}{sep}{tag}{sep}{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// `None` after a visible skip message; a panic under `CI=true`.
pub fn unreachable<T>(server: &str, url: &str, env: &str, why: &str) -> Option<T> {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{server} at {url} is unreachable under CI=true: {why}");
    }
    eprintln!("skipping: {server} at {url} is unreachable ({why}); set {env}");
    None
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `host:port` of a URL, `default_port` when it names none.
pub fn host_port(url: &str, default_port: u16) -> String {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:{default_port}")
    }
}

/// `url` with `param` (`key=value`) added to its query.
pub fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

/// The URL with its database (path) replaced, query kept.
pub fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let base = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => head,
    };
    format!("{base}/{db}{query}")
}
