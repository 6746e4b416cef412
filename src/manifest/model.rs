//! The typed manifest (SPEC 2). Every value keeps its span; a value that is absent and one
//! that was present but invalid are told apart, so a rule about absence (BG201, BG501 …)
//! never fires on top of the BG004 that already reported a bad value.
//!
//! Sections are declared once with `section!`: the macro produces the struct (whose
//! `JsonSchema` derive is `batchguard schema manifest`), its list of known keys (for BG002's
//! "did you mean") and its loader. One declaration, so schema, loader and key list cannot drift.

use super::duration::Duration;
use super::load::{FromNode, LoadCx};
use super::yaml::{Node, Value};
use crate::schedule::Dialect;
use crate::text::{Span, Spanned};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use std::borrow::Cow;

/// A manifest field: absent, present but invalid (already reported as BG004), or valid.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Field<T> {
    #[default]
    Absent,
    Invalid,
    Ok(Spanned<T>),
}

impl<T> Field<T> {
    pub fn get(&self) -> Option<&Spanned<T>> {
        match self {
            Field::Ok(v) => Some(v),
            _ => None,
        }
    }
    pub fn value(&self) -> Option<&T> {
        self.get().map(|s| &s.value)
    }
    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

/// The value `batchguard init` writes where only a person can know the answer (a lock
/// TTL, an owner). It reads as absent, so each rule about the missing value fires, and
/// lint says the value is still this placeholder (`lint::placeholder`).
pub const INIT_PLACEHOLDER: &str = "TODO(batchguard init)";

impl<T: FromNode> Field<T> {
    pub fn load(node: &Node, cx: &mut LoadCx) -> Field<T> {
        if matches!(node.value, Value::Null) {
            return Field::Absent;
        }
        if matches!(&node.value, Value::Str(s) if s == INIT_PLACEHOLDER) {
            return Field::Absent;
        }
        match T::from_node(node, cx) {
            Some(value) => Field::Ok(Spanned {
                value,
                span: node.span,
            }),
            None => Field::Invalid,
        }
    }
}

/// A list entry with its own position (`retryable: [A, B]` points at `B` itself).
impl<T: FromNode> FromNode for Spanned<T> {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        T::from_node(node, cx).map(|value| Spanned {
            value,
            span: node.span,
        })
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

impl<T: JsonSchema> JsonSchema for Field<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

macro_rules! section {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident { $( $(#[doc = $fdoc:literal])* $field:ident : $ty:ty ),* $(,)? }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, Debug, Default, PartialEq, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $( $(#[doc = $fdoc])* #[serde(default)] pub $field: Field<$ty>, )*
            /// Where the section starts.
            #[serde(skip)]
            pub span: Span,
        }

        impl $name {
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
        }

        impl FromNode for $name {
            fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
                let entries = cx.expect_map(node, stringify!($name))?;
                let mut out = $name { span: node.span, ..Default::default() };
                for (key, value) in entries {
                    let Some(k) = cx.key_str(key) else { continue };
                    match k {
                        $( stringify!($field) => out.$field = Field::load(value, cx), )*
                        other => cx.unknown_field(key, other, Self::FIELDS),
                    }
                }
                Some(out)
            }
        }
    };
}

/// Closed sets of words (`store: postgres`), with their schema as a string enum.
macro_rules! word_enum {
    ($(#[doc = $doc:literal])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const WORDS: &'static [&'static str] = &[$($text),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            pub fn from_word(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl FromNode for $name {
            fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
                let s = cx.expect_str(node, concat!("one of: ", $($text, " "),+))?;
                match Self::from_word(s) {
                    Some(v) => Some(v),
                    None => { cx.bad_word(node, s, Self::WORDS); None }
                }
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> { stringify!($name).into() }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "enum": [$($text),+] })
            }
        }
    };
}

word_enum! {
    /// Where the service's scheduler runs.
    Platform { Kubernetes = "kubernetes", Pm2 = "pm2", Crontab = "crontab", Systemd = "systemd", Other = "other" }
}

/// `deployment.scheduler` is the cron dialect (SPEC 4) itself: the schedule engine's
/// [`Dialect`], read from its word, so the manifest and the engine share one enum.
impl FromNode for Dialect {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        const WORDS: [&str; 7] = [
            Dialect::ALL[0].as_str(),
            Dialect::ALL[1].as_str(),
            Dialect::ALL[2].as_str(),
            Dialect::ALL[3].as_str(),
            Dialect::ALL[4].as_str(),
            Dialect::ALL[5].as_str(),
            Dialect::ALL[6].as_str(),
        ];
        let s = cx.expect_str(
            node,
            "one of: crontab kubernetes node-cron cron-npm pm2 croner supercronic ",
        )?;
        match Dialect::from_word(s) {
            Some(v) => Some(v),
            None => {
                cx.bad_word(node, s, &WORDS);
                None
            }
        }
    }
}

impl JsonSchema for Dialect {
    // The manifest schema has always called it `Scheduler`.
    fn schema_name() -> Cow<'static, str> {
        "Scheduler".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let words: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
        json_schema!({ "type": "string", "enum": words })
    }
}
word_enum! {
    /// Where the lock lives.
    LockStore { Postgres = "postgres", Sqlite = "sqlite", Redis = "redis", Mysql = "mysql", Other = "other" }
}
word_enum! {
    /// How the data layer refuses to apply the same input twice.
    IdempotencyStrategy { ProcessedAt = "processed_at", Version = "version", UniqueKey = "unique_key" }
}
word_enum! {
    /// Delay growth between attempts.
    Backoff { Fixed = "fixed", Exponential = "exponential" }
}
word_enum! {
    /// What happens to an error code that is neither retryable nor fatal.
    OnUnknown { DeadLetter = "dead_letter", Retry = "retry" }
}
word_enum! {
    /// Encoding of the input snapshot.
    SnapshotFormat { Jsonl = "jsonl", Csv = "csv" }
}

impl Platform {
    /// SPEC 4: the dialect a platform's scheduler speaks unless `deployment.scheduler` says otherwise.
    pub fn default_scheduler(self) -> Dialect {
        match self {
            Platform::Kubernetes => Dialect::Kubernetes,
            Platform::Pm2 => Dialect::NodeCron,
            Platform::Crontab | Platform::Systemd | Platform::Other => Dialect::Crontab,
        }
    }
}

/// `max_attempts`: a count, or the word `unlimited` (which BG401 reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxAttempts {
    Count(u64),
    Unlimited,
}

impl FromNode for MaxAttempts {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        if let Value::Str(s) = &node.value
            && s == "unlimited"
        {
            return Some(MaxAttempts::Unlimited);
        }
        u64::from_node(node, cx).map(MaxAttempts::Count)
    }
}

impl JsonSchema for MaxAttempts {
    fn schema_name() -> Cow<'static, str> {
        "MaxAttempts".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Total attempts, the first one included. 0 or \"unlimited\" means no bound (BG401).",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "enum": ["unlimited"] }
            ]
        })
    }
}

/// `since`: an RFC 3339 time with its offset (`2026-03-01T09:00:00Z`), the job's first
/// deployment. Earlier slots of the schedule are not the job's: no one ran them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Since(pub jiff::Timestamp);

impl JsonSchema for Since {
    fn schema_name() -> Cow<'static, str> {
        "Since".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "An RFC 3339 time with its offset (2026-03-01T09:00:00Z): when the job was first deployed. Audit, watch and metrics count its slots from here."
        })
    }
}

/// A command: an argv list, or (reported by BG802) one shell string.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Argv(Vec<Spanned<String>>),
    Shell(String),
}

impl Command {
    /// The words of the command, as plain strings.
    pub fn words(&self) -> Vec<&str> {
        match self {
            Command::Argv(v) => v.iter().map(|s| s.value.as_str()).collect(),
            Command::Shell(s) => s.split_whitespace().collect(),
        }
    }
}

impl FromNode for Command {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        match &node.value {
            Value::Str(s) => {
                cx.check_template(node, s);
                Some(Command::Shell(s.clone()))
            }
            Value::Seq(items) => {
                let mut argv = Vec::with_capacity(items.len());
                for item in items {
                    let s = cx.expect_str(item, "a string (one argument)")?;
                    cx.check_template(item, s);
                    argv.push(Spanned {
                        value: s.to_owned(),
                        span: item.span,
                    });
                }
                if argv.is_empty() {
                    cx.invalid(node, "an empty command (give at least the program)");
                    return None;
                }
                Some(Command::Argv(argv))
            }
            _ => {
                cx.wrong_type(node, "an argv list such as [\"program\", \"arg\"]");
                None
            }
        }
    }
}

impl JsonSchema for Command {
    fn schema_name() -> Cow<'static, str> {
        "Command".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "argv list, run without a shell. A single string is accepted but reported (BG802).",
            "anyOf": [
                { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                { "type": "string" }
            ]
        })
    }
}

/// A string that may use the placeholders of SPEC 2 (`{job}`, `{scheduled_at}` …).
#[derive(Clone, Debug, PartialEq)]
pub struct Template(pub String);

impl FromNode for Template {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        let s = cx.expect_str(node, "a string template")?;
        if cx.check_template(node, s) {
            Some(Template(s.to_owned()))
        } else {
            None
        }
    }
}

impl JsonSchema for Template {
    fn schema_name() -> Cow<'static, str> {
        "Template".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "May use {job}, {service}, {scheduled_at}, {scheduled_at_compact}, {snapshot}, {run_id}, {attempt}."
        })
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^([0-9]+[smhd])+$",
            "description": "A length of time: numbers with units s, m, h, d, combinable (45s, 10m, 1h30m, 2d)."
        })
    }
}

section! {
    /// How the service is deployed: decides the default cron dialect and how many processes run the scheduler.
    pub struct Deployment {
        /// kubernetes | pm2 | crontab | systemd | other
        platform: Platform,
        /// Cron dialect (SPEC 4); defaults from the platform.
        scheduler: Dialect,
        /// Processes that run this service's scheduler.
        instances: u64,
    }
}

section! {
    /// The distributed lock that makes one instance the executor of a slot.
    pub struct Lock {
        /// Lock key template; must contain {job} and {scheduled_at}.
        key: Template,
        /// How long a lock lives before it expires: 2-3x expected_duration.
        ttl: Duration,
        /// postgres | sqlite | redis | mysql | other
        store: LockStore,
        /// A recorded decision to run without a lock (needs `reason`).
        disabled: bool,
        /// Why the lock is disabled.
        reason: String,
    }
}

section! {
    /// How the data layer refuses to apply one input twice.
    pub struct Idempotency {
        /// processed_at | version | unique_key
        strategy: IdempotencyStrategy,
        /// The field the strategy guards.
        key: String,
    }
}

section! {
    /// Bounded, classified retries.
    pub struct Retry {
        /// Total attempts, the first one included.
        max_attempts: MaxAttempts,
        /// fixed | exponential
        backoff: Backoff,
        /// Delay before the second attempt (may be 0s, which means no backoff).
        initial_delay: Duration,
        /// Cap on an exponential delay.
        max_delay: Duration,
        /// Error codes worth retrying.
        retryable: Vec<Spanned<String>>,
        /// Error codes that go to the dead letter at once.
        fatal: Vec<Spanned<String>>,
        /// dead_letter | retry: what an unclassified error gets.
        on_unknown: OnUnknown,
        /// How far before the current slot `run` still catches up a slot that was
        /// interrupted, failed to start or lost its holder (default: one interval, at most
        /// 1h; `0s` turns catch-up off).
        catch_up: Duration,
    }
}

section! {
    /// Where inputs that failed fatally or ran out of attempts are quarantined.
    pub struct DeadLetter {
        /// Queue, table or topic name.
        target: String,
    }
}

section! {
    /// What pages a human.
    pub struct Alerts {
        /// scheduled_at to successful end before on-call is paged.
        max_latency: Duration,
        /// Missed slots tolerated before alerting.
        missing_tolerance: u64,
        /// Where alerts go.
        channel: String,
    }
}

section! {
    /// The kept copy of a slot's input, so the slot can be replayed after the source changed.
    pub struct Snapshot {
        /// Path template of one slot's snapshot.
        path: Template,
        /// jsonl | csv
        format: SnapshotFormat,
        /// Field that identifies one input record.
        key: String,
        /// How long snapshots are kept (at least a quarter).
        retention: Duration,
    }
}

section! {
    /// How one applied output is identified.
    pub struct Outputs {
        /// Field that identifies one applied output.
        key: String,
    }
}

section! {
    /// What the person woken at 3 a.m. needs.
    pub struct Runbook {
        /// Team that owns the job.
        owner: String,
        /// Who is paged.
        on_call: String,
        /// How to stop the job now.
        emergency_stop: String,
        /// How to resume safely.
        resume: String,
        /// Where incidents are announced.
        communication: String,
    }
}

section! {
    /// How a drill replays one slot.
    pub struct Replay {
        /// argv with {snapshot} for the input file.
        command: Command,
        /// argv that prints the keys really applied in the sandbox, one a line.
        verify: Command,
        /// argv run once per sandbox before its first job run, with {sandbox}: makes the
        /// job's external state (a database schema) empty for that sandbox.
        setup: Command,
        /// argv run once per sandbox after its last scenario: removes what setup made.
        teardown: Command,
    }
}

word_enum! {
    /// What a tick that finds its slot already succeeded tells the monitor.
    AlreadySucceeded { Log = "log", Fail = "fail", Ignore = "ignore" }
}

/// A check-in URL (`https://hc-ping.com/…`, `https://cronitor.link/p/…`): http or https,
/// with a host; it may use `{job}` and `{service}` so one `defaults.monitor` serves every
/// job (a Healthchecks slug URL, a Cronitor monitor key).
#[derive(Clone, Debug, PartialEq)]
pub struct PingUrl(pub String);

impl FromNode for PingUrl {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        let s = cx.expect_str(node, "an http(s) URL")?;
        if !cx.check_template(node, s) {
            return None;
        }
        match url_parts(s) {
            Ok(_) => Some(PingUrl(s.to_owned())),
            Err(why) => {
                cx.invalid(
                    node,
                    &format!("`{}` is not a check-in URL: {why}", mask_url(s)),
                );
                None
            }
        }
    }
}

impl JsonSchema for PingUrl {
    fn schema_name() -> Cow<'static, str> {
        "PingUrl".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^https?://[^/?#\\s]+",
            "description": "An http(s) URL; may use {job} and {service}."
        })
    }
}

/// A Sentry DSN, `https://PUBLIC_KEY@HOST/PROJECT_ID` (the public key is all a check-in
/// needs; a legacy `KEY:SECRET` is accepted and the secret never sent).
#[derive(Clone, Debug, PartialEq)]
pub struct Dsn(pub String);

/// The parts of a DSN a check-in is sent with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsnParts {
    pub scheme: String,
    pub public_key: String,
    /// `host[:port]`.
    pub host: String,
    /// The path before the project id (usually empty).
    pub prefix: String,
    pub project: String,
}

impl Dsn {
    pub fn parts(&self) -> Result<DsnParts, String> {
        let (scheme, rest) = split_scheme(&self.0)?;
        let (user, hostpath) = rest
            .split_once('@')
            .ok_or("it has no public key (`https://PUBLIC_KEY@HOST/PROJECT_ID`)")?;
        let public_key = user.split(':').next().unwrap_or_default();
        if public_key.is_empty() {
            return Err("its public key is empty".into());
        }
        let (host, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
        if host.is_empty() {
            return Err("it has no host".into());
        }
        let path = path.trim_end_matches('/');
        let (prefix, project) = path.rsplit_once('/').unwrap_or(("", path));
        if project.is_empty() || !project.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err("it does not end with a project id (`…/PROJECT_ID`)".into());
        }
        Ok(DsnParts {
            scheme: scheme.to_owned(),
            public_key: public_key.to_owned(),
            host: host.to_owned(),
            prefix: prefix.to_owned(),
            project: project.to_owned(),
        })
    }
}

impl FromNode for Dsn {
    fn from_node(node: &Node, cx: &mut LoadCx) -> Option<Self> {
        let s = cx.expect_str(node, "a Sentry DSN (https://PUBLIC_KEY@HOST/PROJECT_ID)")?;
        let dsn = Dsn(s.to_owned());
        match dsn.parts() {
            Ok(_) => Some(dsn),
            Err(why) => {
                cx.invalid(
                    node,
                    &format!("`{}` is not a Sentry DSN: {why}", mask_url(s)),
                );
                None
            }
        }
    }
}

impl JsonSchema for Dsn {
    fn schema_name() -> Cow<'static, str> {
        "Dsn".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^https?://[^@/\\s]+@[^/\\s]+/(.+/)?[A-Za-z0-9]+/?$",
            "description": "A Sentry DSN: https://PUBLIC_KEY@HOST/PROJECT_ID."
        })
    }
}

fn split_scheme(s: &str) -> Result<(&str, &str), String> {
    if s.chars().any(char::is_whitespace) {
        return Err("it contains white space".into());
    }
    for scheme in ["https", "http"] {
        if let Some(rest) = s.strip_prefix(scheme).and_then(|r| r.strip_prefix("://")) {
            return Ok((scheme, rest));
        }
    }
    Err("it does not start with https:// or http://".into())
}

/// The scheme and host of a check-in URL, or why it is not one.
pub fn url_parts(s: &str) -> Result<(&str, &str), String> {
    let (scheme, rest) = split_scheme(s)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host.is_empty() || host.contains(['{', '}']) {
        return Err("it has no host".into());
    }
    let numeric = |port: &str| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(inner) = host.strip_prefix('[') {
        // An IPv6 literal: `[ADDR]` or `[ADDR]:PORT`.
        let Some((addr, after)) = inner.split_once(']') else {
            return Err("its IPv6 address has no closing `]`".into());
        };
        if addr.is_empty()
            || !addr
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return Err("its IPv6 address is not one".into());
        }
        if !after.is_empty() && !after.strip_prefix(':').is_some_and(numeric) {
            return Err("its port is not a number".into());
        }
    } else if let Some((name, port)) = host.rsplit_once(':')
        && (name.is_empty() || !numeric(port))
    {
        return Err("its port is not a number".into());
    }
    Ok((scheme, host))
}

#[cfg(test)]
mod check_in_tests {
    use super::*;

    #[test]
    fn check_in_urls_need_http_a_host_and_a_numeric_port() {
        assert_eq!(
            url_parts("https://hc-ping.com/KEY/{job}?create=1"),
            Ok(("https", "hc-ping.com"))
        );
        assert_eq!(url_parts("http://[::1]:8000/p"), Ok(("http", "[::1]:8000")));
        assert!(url_parts("ftp://hc-ping.com/x").is_err());
        assert!(url_parts("https:///x").is_err());
        assert!(url_parts("https://{service}.example/x").is_err());
        assert!(url_parts("http://127.0.0.1:/x").is_err());
        assert!(url_parts("http://[::1/x").is_err());
        assert!(url_parts("http://[::1]x/p").is_err());
        assert!(url_parts("http://[zz]/p").is_err());
        assert_eq!(url_parts("http://[::1]/p"), Ok(("http", "[::1]")));
        assert_eq!(mask_url("ftp://user:key@host/x"), "ftp://…");
        assert_eq!(mask_url("not a url"), "…");
        assert!(url_parts("https://hc-ping.com/a b").is_err());
        assert_eq!(
            mask_url("https://user@hc-ping.com/SECRET"),
            "https://hc-ping.com/…"
        );
    }

    #[test]
    fn a_dsn_gives_its_public_key_host_prefix_and_project() {
        let p = Dsn("https://pub:legacy@o0.ingest.sentry.io/sub/42".into())
            .parts()
            .expect("a DSN");
        assert_eq!(
            (
                p.public_key.as_str(),
                p.host.as_str(),
                p.prefix.as_str(),
                p.project.as_str()
            ),
            ("pub", "o0.ingest.sentry.io", "sub", "42")
        );
        assert!(
            Dsn("https://o0.ingest.sentry.io/42".into())
                .parts()
                .is_err()
        );
        assert!(
            Dsn("https://k@o0.ingest.sentry.io/".into())
                .parts()
                .is_err()
        );
    }
}

/// A URL as it may be shown: scheme and host only; the path of a check-in URL is its key.
pub fn mask_url(s: &str) -> String {
    match url_parts(s) {
        Ok((scheme, host)) => format!("{scheme}://{host}/…"),
        // The scheme alone, when it looks like one: the rest may hold a key.
        Err(_) => match s.split_once("://") {
            Some((scheme, _))
                if !scheme.is_empty()
                    && scheme.len() <= 16
                    && scheme
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b)) =>
            {
                format!("{scheme}://…")
            }
            _ => "…".into(),
        },
    }
}

section! {
    /// A Sentry Crons monitor: check-ins go to the DSN's project as envelopes.
    pub struct Sentry {
        /// The project's DSN: https://PUBLIC_KEY@HOST/PROJECT_ID.
        dsn: Dsn,
        /// The monitor's slug; may use {job} and {service}.
        monitor_slug: Template,
        /// The check-ins' environment (Sentry's default: production).
        environment: String,
    }
}

section! {
    /// Check-ins from `run` to the monitors that watch the job (docs/checkins.md).
    pub struct Monitor {
        /// Healthchecks.io ping URL (https://hc-ping.com/UUID, or PING_KEY/{job}).
        healthchecks: PingUrl,
        /// Cronitor telemetry URL (https://cronitor.link/p/API_KEY/{job}).
        cronitor: PingUrl,
        sentry: Sentry,
        /// The most one check-in may take, and `run` waits for them at exit (default 2s).
        timeout: Duration,
        /// log | fail | ignore: what a tick that finds its slot already succeeded sends
        /// (default log).
        already_succeeded: AlreadySucceeded,
    }
}

section! {
    /// One scheduled job.
    pub struct Job {
        /// [a-z0-9][a-z0-9._-]{0,62}
        name: String,
        /// Cron expression in the service's dialect.
        schedule: String,
        /// IANA time zone; default UTC.
        timezone: String,
        /// How long one run normally takes.
        expected_duration: Duration,
        /// argv, no shell.
        command: Command,
        lock: Lock,
        idempotency: Idempotency,
        retry: Retry,
        dead_letter: DeadLetter,
        alerts: Alerts,
        snapshot: Snapshot,
        outputs: Outputs,
        runbook: Runbook,
        /// Jobs that must finish first: `name` or `service/name`.
        depends_on: Vec<Spanned<String>>,
        replay: Replay,
        /// false keeps the job declared but unscheduled.
        enabled: bool,
        /// When the job was first deployed (RFC 3339): audit, watch and metrics count its
        /// expected slots from here, not from the start of their window.
        since: Since,
        /// This job's own platform, scheduler or instances, for a service whose jobs run
        /// on more than one platform: each field given overrides the manifest's.
        deployment: Deployment,
        /// Check-ins to Healthchecks, Cronitor or Sentry Crons (docs/checkins.md).
        monitor: Monitor,
    }
}

section! {
    /// A batchguard manifest (version 1): one service and its jobs.
    pub struct Manifest {
        /// Format version; only 1 exists.
        version: u64,
        /// Service name; defaults to the file name without `.batchguard.yaml`.
        service: String,
        deployment: Deployment,
        /// Deep-merged into every job; the job's own values win.
        defaults: Job,
        jobs: Vec<Job>,
    }
}

/// A job's deployment as it applies (SPEC 2): each field of the job's own `deployment`
/// (with `defaults.deployment` merged in), else the manifest's.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveDeployment {
    pub platform: Option<Platform>,
    /// The job's `scheduler`; else, when the job names its own platform, that platform's
    /// default (the manifest's scheduler was chosen for the manifest's platform); else the
    /// manifest's `scheduler`, else its platform's default, else `crontab`.
    pub scheduler: Dialect,
    /// The `instances` that applies, with the span of the value that set it.
    pub instances: Option<Spanned<u64>>,
}

impl Manifest {
    /// The deployment that applies to `job` (a job of this manifest, defaults merged).
    pub fn deployment_of(&self, job: &Job) -> EffectiveDeployment {
        let own = job.deployment.value();
        let top = self.deployment.value();
        let own_platform = own.and_then(|d| d.platform.value().copied());
        let top_platform = top.and_then(|d| d.platform.value().copied());
        let scheduler = own
            .and_then(|d| d.scheduler.value().copied())
            .or_else(|| own_platform.map(Platform::default_scheduler))
            .or_else(|| top.and_then(|d| d.scheduler.value().copied()))
            .or_else(|| top_platform.map(Platform::default_scheduler))
            .unwrap_or(Dialect::Crontab);
        EffectiveDeployment {
            platform: own_platform.or(top_platform),
            scheduler,
            instances: own
                .and_then(|d| d.instances.get())
                .or_else(|| top.and_then(|d| d.instances.get()))
                .cloned(),
        }
    }
}

impl Lock {
    pub fn is_disabled(&self) -> bool {
        self.disabled.value() == Some(&true)
    }
}

impl Manifest {
    /// The service the manifest declares, else its file name without `.batchguard.yaml`
    /// (or `.yml`, `.yaml`): one rule for lint, audit and slots.
    pub fn service_name(&self, path: &std::path::Path) -> String {
        if let Some(s) = self.service.value() {
            return s.clone();
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("service");
        for suffix in [".batchguard.yaml", ".batchguard.yml", ".yaml", ".yml"] {
            if let Some(stem) = name.strip_suffix(suffix) {
                return stem.to_owned();
            }
        }
        name.to_owned()
    }
}

impl Job {
    /// The lock, when there is one and it is not a recorded `disabled: true` decision:
    /// the lock whose TTL and key the BG2xx rules check.
    pub fn active_lock(&self) -> Option<&Lock> {
        self.lock.value().filter(|l| !l.is_disabled())
    }
}

impl Retry {
    /// The bound, when there is one (not absent, 0 or unlimited).
    pub fn bounded_attempts(&self) -> Option<u64> {
        match self.max_attempts.value() {
            Some(MaxAttempts::Count(n)) if *n > 0 => Some(*n),
            _ => None,
        }
    }
}
