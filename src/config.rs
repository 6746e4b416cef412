//! `batchguard.toml` (SPEC 3.2): severities, thresholds and file globs.
//! A bad config is exit 2 with a message that points into the config file, as code errors do.

use crate::finding::Severity;
use crate::manifest::duration::Duration;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-rule level in the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
    Off,
}

/// `batchguard.toml`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Rule code or name → `error`, `warning` or `off`.
    #[serde(default)]
    pub rules: BTreeMap<String, Level>,
    #[serde(default)]
    pub thresholds: Thresholds,
    #[serde(default)]
    pub files: Files,
    #[serde(default)]
    pub sources: Sources,
    #[serde(default)]
    pub run: RunSection,
}

/// What `batchguard run` (and `store`, `watch`, `metrics`) take when no flag says (SPEC 7.1
/// items 13 and 15): one file per deployment instead of a flag on every crontab line.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// The store URL used when neither `--store` nor `BATCHGUARD_STORE` gives one
    /// (`postgres://…`, `mysql://…`, `redis://…`, `sqlite:PATH`).
    #[serde(default)]
    pub store: Option<String>,
    /// How early a tick may arrive and still work the slot it anticipates (`2s`; `0s` turns
    /// it off). Default: the smaller of 2 s and a tenth of the job's interval.
    #[serde(default)]
    pub tick_tolerance: Option<String>,
}

/// How registration sources are recognised and read (SPEC 3.6), beyond their usual names.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sources {
    /// Globs (relative to the config's folder) of files read as crontabs.
    #[serde(default)]
    pub crontab: Vec<String>,
    /// Globs of files read as PM2 ecosystem files.
    #[serde(default)]
    pub pm2: Vec<String>,
    /// Globs of files read as Kubernetes manifests.
    #[serde(default)]
    pub kubernetes: Vec<String>,
    /// IANA zone of crontab lines without `CRON_TZ=` (default UTC).
    #[serde(default)]
    pub crontab_timezone: Option<String>,
    /// Globs of system-format crontabs (a user column between schedule and command).
    #[serde(default)]
    pub crontab_user_column: Vec<String>,
    /// What runs crontabs whose runner no Dockerfile or compose file names: `cron`
    /// (Debian cron, the default), `busybox` (busybox crond) or `supercronic` (with its
    /// flags: `supercronic -overlapping`).
    #[serde(default)]
    pub crontab_runner: Option<String>,
}

/// The programs `[sources] crontab_runner` names (docs/crontab-runners.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnerName {
    /// Debian cron (also written `debian`, `vixie`, `cronie`).
    Cron,
    /// busybox crond (also `crond`).
    Busybox,
    Supercronic,
}

/// A `[sources] crontab_runner` value: the program, and supercronic's `-overlapping`
/// (other supercronic flags are accepted and change nothing lint looks at).
pub fn crontab_runner(value: &str) -> Result<(RunnerName, bool), String> {
    let mut words = value.split_ascii_whitespace();
    let Some(first) = words.next() else {
        return Err("the value is empty".into());
    };
    let name = match first {
        "cron" | "debian" | "vixie" | "cronie" => RunnerName::Cron,
        "busybox" | "crond" => RunnerName::Busybox,
        "supercronic" => RunnerName::Supercronic,
        other => {
            return Err(format!(
                "`{other}` is not a crontab runner (expected cron, busybox or supercronic)"
            ));
        }
    };
    let mut overlapping = false;
    for w in words {
        match (name, w.trim_start_matches('-')) {
            (RunnerName::Supercronic, "overlapping" | "overlapping=true") => overlapping = true,
            (RunnerName::Supercronic, _) if w.starts_with('-') => {}
            _ => return Err(format!("`{w}` is not a flag batchguard reads for {first}")),
        }
    }
    Ok((name, overlapping))
}

/// Numbers the rules compare against.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// BG202: lock.ttl must be at least this many times expected_duration.
    pub lock_ttl_min_factor: f64,
    /// BG203: lock.ttl above this many times expected_duration is suspicious.
    pub lock_ttl_max_factor: f64,
    /// BG402: max_attempts above this is reported.
    pub max_attempts: u64,
    /// BG504: shortest snapshot retention, as a duration (`92d`).
    pub min_snapshot_retention: String,
    /// How often recovery drills are expected to run (`92d`).
    pub drill_cadence: String,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            lock_ttl_min_factor: 2.0,
            lock_ttl_max_factor: 3.0,
            max_attempts: 10,
            min_snapshot_retention: "92d".into(),
            drill_cadence: "92d".into(),
        }
    }
}

/// Which files `lint` reads when walking directories.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Files {
    /// Globs (relative to the config's folder); when set, only matching files are read.
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs of files never read.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// The config with its thresholds checked and parsed.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    pub path: Option<PathBuf>,
    pub min_retention: Duration,
    pub drill_cadence: Duration,
    /// `[run] tick_tolerance`, parsed.
    pub tick_tolerance: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            config: Config::default(),
            path: None,
            min_retention: Duration(92 * 86_400),
            drill_cadence: Duration(92 * 86_400),
            tick_tolerance: None,
        }
    }
}

impl Settings {
    /// The severity a rule reports at, or `None` when it is turned off.
    pub fn severity(&self, code: &str, name: &str, default: Severity) -> Option<Severity> {
        // Keys are rule codes once loaded; a config built by hand may use names.
        let level = self
            .config
            .rules
            .get(code)
            .or_else(|| self.config.rules.get(name));
        match level {
            None => Some(default),
            Some(Level::Error) => Some(Severity::Error),
            Some(Level::Warning) => Some(Severity::Warning),
            Some(Level::Off) => None,
        }
    }
}

/// A config problem, with the span in the file when there is one (rendered by miette).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic()]
pub struct ConfigError {
    pub message: String,
    #[source_code]
    pub src: Option<miette::NamedSource<String>>,
    #[label("here")]
    pub span: Option<miette::SourceSpan>,
    #[help]
    pub help: Option<String>,
}

/// `batchguard.toml` in `start` or the nearest folder above it.
pub fn discover(start: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(start).ok()?;
    let mut dir = if abs.is_dir() {
        Some(abs.as_path())
    } else {
        abs.parent()
    };
    while let Some(d) = dir {
        let candidate = d.join("batchguard.toml");
        if candidate.is_file() {
            return Some(candidate);
        }
        dir = d.parent();
    }
    None
}

/// Where `key` is set as a key (`KEY =` or `"KEY" =` at a line start) in the file text.
fn rule_key_at(text: &str, key: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        for quoted in [key.to_owned(), format!("\"{key}\""), format!("'{key}'")] {
            if let Some(rest) = body.strip_prefix(&quoted)
                && rest.trim_start().starts_with('=')
            {
                let q = usize::from(quoted.len() != key.len());
                return Some(offset + indent + q);
            }
        }
        offset += line.len();
    }
    None
}

pub fn load(path: &Path, known_rule: impl Fn(&str) -> bool) -> Result<Settings, Box<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Box::new(ConfigError {
            message: format!(
                "cannot read config {}: {}",
                path.display(),
                crate::text::io_reason(&e)
            ),
            src: None,
            span: None,
            help: None,
        })
    })?;
    // Shown as the user would type it: relative to the current directory when under it.
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf());
    let named = || miette::NamedSource::new(shown.display().to_string(), text.clone());
    let mut config: Config = toml::from_str(&text).map_err(|e| {
        Box::new(ConfigError {
            message: format!("invalid config: {}", e.message()),
            src: Some(named()),
            span: e.span().map(Into::into),
            help: Some("see `batchguard schema config` for the format".into()),
        })
    })?;
    let bad = |what: String, key: &str| {
        let span = text.find(key).map(|i| (i, key.len()).into());
        Box::new(ConfigError {
            message: what,
            src: Some(named()),
            span,
            help: Some("see `batchguard schema config` for the format".into()),
        })
    };
    for key in config.rules.keys() {
        if !known_rule(key) {
            let mut err = bad(
                format!("`{key}` in [rules] is not a rule code or name"),
                key,
            );
            err.help = Some("`batchguard rules` lists every rule code and name".into());
            return Err(err);
        }
    }
    // One entry per rule, keyed by its code: `AU106` and `latency-breach` both set is a
    // contradiction the file has to resolve, not one this loader picks a winner of.
    let mut by_code: BTreeMap<String, (String, Level)> = BTreeMap::new();
    for (key, level) in std::mem::take(&mut config.rules) {
        let code = crate::REGISTRY
            .find(&key)
            .map_or(key.clone(), |m| m.code.to_owned());
        if let Some((first, _)) = by_code.get(&code) {
            let (a, b) = match (rule_key_at(&text, first), rule_key_at(&text, &key)) {
                (Some(x), Some(y)) if x > y => (key.as_str(), first.as_str()),
                _ => (first.as_str(), key.as_str()),
            };
            let span = rule_key_at(&text, b).map(|i| (i, b.len()).into());
            return Err(Box::new(ConfigError {
                message: format!("[rules] sets {code} twice: as `{a}` and as `{b}`"),
                src: Some(named()),
                span,
                help: Some(format!("keep one of `{a}` and `{b}`")),
            }));
        }
        by_code.insert(code, (key, level));
    }
    config.rules = by_code.into_iter().map(|(c, (_, l))| (c, l)).collect();
    let t = &config.thresholds;
    if !(t.lock_ttl_min_factor > 0.0 && t.lock_ttl_min_factor <= t.lock_ttl_max_factor) {
        return Err(bad(
            "thresholds: lock_ttl_min_factor must be > 0 and <= lock_ttl_max_factor".into(),
            "lock_ttl_min_factor",
        ));
    }
    let dur = |s: &str, key: &str| {
        Duration::parse(s).map_err(|e| bad(format!("thresholds.{key}: `{s}` is {e}"), key))
    };
    let min_retention = dur(&t.min_snapshot_retention, "min_snapshot_retention")?;
    let drill_cadence = dur(&t.drill_cadence, "drill_cadence")?;
    let tick_tolerance = match &config.run.tick_tolerance {
        None => None,
        Some(s) if s.trim() == "0" => Some(Duration(0)),
        Some(s) => Some(Duration::parse(s).map_err(|e| {
            bad(
                format!("run.tick_tolerance: `{s}` is {e}"),
                "tick_tolerance",
            )
        })?),
    };
    let src = &config.sources;
    for glob in config
        .files
        .include
        .iter()
        .chain(&config.files.exclude)
        .chain(&src.crontab)
        .chain(&src.pm2)
        .chain(&src.kubernetes)
        .chain(&src.crontab_user_column)
    {
        if let Err(e) = globset::Glob::new(glob) {
            return Err(bad(format!("files: bad glob `{glob}`: {e}"), glob));
        }
    }
    if let Some(runner) = &src.crontab_runner
        && let Err(e) = crontab_runner(runner)
    {
        let mut err = bad(format!("sources.crontab_runner: {e}"), runner);
        err.help = Some("write `cron`, `busybox` or `supercronic` (`supercronic -overlapping` when it runs with that flag)".into());
        return Err(err);
    }
    if let Some(zone) = &src.crontab_timezone
        && jiff::tz::TimeZone::get(zone).is_err()
    {
        let mut err = bad(
            format!("sources.crontab_timezone: `{zone}` is not an IANA time zone name"),
            zone,
        );
        err.help = crate::manifest::zone::help(zone).or(err.help);
        return Err(err);
    }
    Ok(Settings {
        config,
        path: Some(path.to_owned()),
        min_retention,
        drill_cadence,
        tick_tolerance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crontab_runner_values() {
        assert_eq!(
            crontab_runner("supercronic"),
            Ok((RunnerName::Supercronic, false))
        );
        assert_eq!(
            crontab_runner("supercronic -json -overlapping"),
            Ok((RunnerName::Supercronic, true))
        );
        assert_eq!(crontab_runner("crond"), Ok((RunnerName::Busybox, false)));
        assert!(crontab_runner("fcron").is_err());
        assert!(crontab_runner("cron -x").is_err());
        assert!(crontab_runner("  ").is_err());
    }
}
