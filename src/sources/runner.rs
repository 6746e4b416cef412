//! What runs a crontab, and which files a deploy installs as sources (SPEC 3.6): read from
//! the Dockerfiles, docker-compose files and `package.json` scripts of the tree before any
//! source is read, because the same crontab means different things to different runners.
//!
//! - **The runner.** A Dockerfile's `CMD`/`ENTRYPOINT`/`RUN` (and a shell script they run,
//!   when the Dockerfile copies it from the tree), or a compose service's `command:` /
//!   `entrypoint:`, naming `supercronic [flags] FILE` (supercronic, with `-overlapping`),
//!   `crond` / `busybox crond` (busybox), or `cron` (Debian cron). supercronic runs the
//!   file it names; cron and crond run what the image installs: files copied into
//!   `/etc/cron.d/`, `/etc/crontab`, `/etc/crontabs/` or `/var/spool/cron/crontabs/`, and
//!   files a `RUN crontab FILE` installs. Without such a fact, `[sources] crontab_runner`
//!   in `batchguard.toml` says it; else Debian cron.
//! - **Files installed as sources.** `COPY`/`ADD` (and compose `volumes:`) into
//!   `/etc/cron.d/` make a file a system-format crontab (a user column) whatever its
//!   name; into `/etc/crontabs/` a busybox user crontab. A file started by `pm2 start
//!   FILE`, `pm2-runtime FILE` or `pm2-docker FILE` (Dockerfile or any `package.json`
//!   script) that holds `apps` is a PM2 ecosystem file whatever its name.
//!
//! Paths in the image are mapped back to files of the tree through the `COPY`/`ADD` lines
//! (sources relative to the Dockerfile's folder or, failing that, one of its parents: the
//! build context) and compose bind mounts (relative to the compose file's folder).

use super::SourceKind;
use super::code::runners::{dir_of, normalize};
use super::command::split_words;
use crate::schedule::Dialect;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The program that reads a crontab.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunnerKind {
    /// Debian cron (Vixie cron with Debian's patches), cronie: the default.
    #[default]
    Cron,
    /// busybox `crond` (Alpine images).
    Busybox,
    /// aptible/supercronic.
    Supercronic,
}

impl RunnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Cron => "cron",
            RunnerKind::Busybox => "busybox",
            RunnerKind::Supercronic => "supercronic",
        }
    }
}

/// A crontab's runner and where batchguard learnt it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrontabRunner {
    pub kind: RunnerKind,
    /// supercronic's `-overlapping`: runs of one line may overlap again.
    pub overlapping: bool,
    /// Where it is said: ``Dockerfile:12 CMD `supercronic /app/crontab` ``,
    /// `[sources] crontab_runner`.
    pub from: String,
}

impl CrontabRunner {
    /// The dialect the runner reads schedules in (SPEC 4).
    pub fn dialect(&self) -> Dialect {
        match self.kind {
            RunnerKind::Supercronic => Dialect::Supercronic,
            RunnerKind::Cron | RunnerKind::Busybox => Dialect::Crontab,
        }
    }

    /// `supercronic -overlapping`, `busybox crond`, `Debian cron`.
    pub fn name(&self) -> String {
        match self.kind {
            RunnerKind::Supercronic if self.overlapping => "supercronic -overlapping".into(),
            RunnerKind::Supercronic => "supercronic".into(),
            RunnerKind::Busybox => "busybox crond".into(),
            RunnerKind::Cron => "Debian cron".into(),
        }
    }

    /// Two runs of one line can overlap. Debian cron forks a line at every matching
    /// minute; busybox crond does not start a line whose last run is still going
    /// (`miscutils/crond.c` `flag_starting_jobs`: "process already running"); supercronic
    /// waits for the last run unless `-overlapping` (`cron/cron.go` `startFunc`).
    pub fn overlaps(&self) -> bool {
        match self.kind {
            RunnerKind::Cron => true,
            RunnerKind::Busybox => false,
            RunnerKind::Supercronic => self.overlapping,
        }
    }

    /// The runner reads a last line that has no newline: supercronic (`bufio.ScanLines`)
    /// and busybox crond (libbb `config_read`, which reads lines with `getline`) do;
    /// Debian cron drops it.
    pub fn reads_last_line(&self) -> bool {
        self.kind != RunnerKind::Cron
    }
}

/// What the deploy files say about one file of the tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Role {
    /// The kind it is read as (a crontab copied into `/etc/cron.d`, a PM2 file).
    pub kind: Option<SourceKind>,
    /// A system-format crontab (copied into `/etc/cron.d`, or as `/etc/crontab`).
    pub user_column: bool,
    /// A busybox `crontabs/<user>` file (no user column, whatever its lines look like).
    pub no_user_column: bool,
    pub runner: Option<CrontabRunner>,
    /// Why, for `--list-files`: `copied to /etc/cron.d/app by Dockerfile:3`.
    pub because: Vec<String>,
}

/// Roles of the tree's files (normalised absolute paths).
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub roles: BTreeMap<PathBuf, Role>,
}

impl Context {
    pub fn role(&self, path: &Path) -> Option<&Role> {
        self.roles.get(&normalize(path))
    }

    /// The files a deploy file (shown as `shown`) runs or installs, for `--list-files`.
    pub fn installed_by(&self, shown: &str) -> Vec<String> {
        let by = |text: &str| {
            text.contains(&format!("{shown}:"))
                || text.contains(&format!("{shown} service"))
                || text.contains(&format!("{shown} script"))
        };
        self.roles
            .iter()
            .filter(|(_, r)| {
                r.because.iter().any(|b| by(b)) || r.runner.as_ref().is_some_and(|x| by(&x.from))
            })
            .map(|(p, _)| crate::text::display_path(p))
            .collect()
    }

    fn entry(&mut self, path: &Path) -> &mut Role {
        self.roles.entry(normalize(path)).or_default()
    }

    /// Reads one deploy file (Dockerfile, compose file, `package.json`) into the context.
    pub fn scan(&mut self, path: &Path, text: &str) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "package.json" {
            self.scan_package_json(path, text);
        } else if is_compose_name(name) {
            self.scan_compose(path, text);
        } else {
            self.scan_dockerfile(path, text);
        }
    }

    fn scan_package_json(&mut self, path: &Path, text: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
            return;
        };
        let dir = dir_of(path);
        let shown = crate::text::display_path(path);
        if let Some(scripts) = v.get("scripts").and_then(|s| s.as_object()) {
            for (key, script) in scripts {
                let Some(script) = script.as_str() else {
                    continue;
                };
                for cmd in commands(script) {
                    self.pm2_start(
                        &cmd,
                        &|p| Some(dir.join(p)),
                        &format!("{shown} script `{key}`"),
                    );
                }
            }
        }
    }

    /// `pm2 start FILE`, `pm2-runtime [start] FILE`, `pm2-docker FILE`: FILE holding
    /// `apps` is an ecosystem file, whatever its name.
    fn pm2_start(&mut self, argv: &[String], map: &dyn Fn(&str) -> Option<PathBuf>, by: &str) {
        let words: Vec<&str> = argv
            .iter()
            .map(String::as_str)
            .skip_while(|w| w.contains('=') && !w.starts_with('-') || matches!(*w, "exec" | "npx"))
            .collect();
        let Some((program, rest)) = words.split_first() else {
            return;
        };
        let base = program.rsplit('/').next().unwrap_or(program);
        if !matches!(base, "pm2" | "pm2-runtime" | "pm2-docker") {
            return;
        }
        if base == "pm2" && rest.first() != Some(&"start") {
            return;
        }
        let Some(file) = rest.iter().find(|w| !w.starts_with('-') && **w != "start") else {
            return;
        };
        let ext_ok = [".js", ".cjs", ".mjs", ".json", ".yaml", ".yml"]
            .iter()
            .any(|e| file.ends_with(e));
        if !ext_ok {
            return;
        }
        let Some(local) = map(file) else { return };
        let fname = local.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if super::pm2::is_pm2_name(fname) {
            return;
        }
        let Some(content) = read_small(&local) else {
            return;
        };
        if !content.contains("apps") {
            return;
        }
        let role = self.entry(&local);
        role.kind = Some(SourceKind::Pm2);
        role.because.push(format!(
            "read as a PM2 ecosystem file: started by `{}` in {by}",
            crate::sources::command::shell_join(argv)
        ));
    }

    fn scan_dockerfile(&mut self, path: &Path, text: &str) {
        let dir = dir_of(path);
        let shown = crate::text::display_path(path);
        let mut copies: Vec<(String, PathBuf, usize)> = Vec::new();
        // Folders copied whole (`COPY . /app`): an image path under the destination is
        // the same path under the source folder.
        let mut dir_copies: Vec<(String, PathBuf)> = Vec::new();
        let mut workdir = String::from("/");
        // (line, instruction, argv) of CMD/ENTRYPOINT (last of each) and every RUN.
        let mut entry: Option<(usize, Vec<String>)> = None;
        let mut cmd: Option<(usize, Vec<String>)> = None;
        let mut runs: Vec<(usize, Vec<String>)> = Vec::new();
        for (line, instr) in instructions(text) {
            let Some((word, rest)) = instr.split_once(char::is_whitespace) else {
                continue;
            };
            let rest = rest.trim();
            let argv = || match serde_json::from_str::<Vec<String>>(rest) {
                Ok(v) => v,
                Err(_) => vec!["sh".into(), "-c".into(), rest.to_owned()],
            };
            match word.to_ascii_uppercase().as_str() {
                "COPY" | "ADD" => {
                    let mut parts = match serde_json::from_str::<Vec<String>>(rest) {
                        Ok(v) => v,
                        Err(_) => split_words(rest),
                    };
                    // `--from=stage` copies from an image, not from the tree.
                    if parts.iter().any(|p| p.starts_with("--from")) {
                        continue;
                    }
                    parts.retain(|p| !p.starts_with("--"));
                    let Some((dest, srcs)) = parts.split_last() else {
                        continue;
                    };
                    let dest = absolute_in(&workdir, dest);
                    let many = srcs.len() > 1 || dest.ends_with('/') || is_cron_dir(&dest);
                    for src in srcs {
                        let Some(local) = in_context(&dir, src) else {
                            continue;
                        };
                        if local.is_dir() {
                            dir_copies.push((clean_image(&dest), local.clone()));
                            for f in files_in(&local) {
                                let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
                                let Some(name) = name else { continue };
                                copies.push((join_image(&dest, &name), f, line));
                            }
                        } else if many {
                            let name = local
                                .file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                                .unwrap_or_default();
                            copies.push((join_image(&dest, &name), local, line));
                        } else {
                            copies.push((dest.clone(), local, line));
                        }
                    }
                }
                "WORKDIR" => workdir = absolute_in(&workdir, rest),
                "ENTRYPOINT" => entry = Some((line, argv())),
                "CMD" => cmd = Some((line, argv())),
                "RUN" => runs.push((line, argv())),
                _ => {}
            }
        }
        let map = |image: &str| -> Option<PathBuf> {
            let abs = absolute_in(&workdir, image);
            copies
                .iter()
                .rev()
                .find(|(d, ..)| *d == abs)
                .map(|(_, f, _)| f.clone())
                .or_else(|| {
                    dir_copies.iter().rev().find_map(|(d, local)| {
                        let rest = abs.strip_prefix(d.as_str())?.strip_prefix('/')?;
                        let f = local.join(rest);
                        f.is_file().then_some(f)
                    })
                })
                .or_else(|| {
                    // A file beside the Dockerfile with the same name (the image path was
                    // made some other way).
                    let name = Path::new(image).file_name()?;
                    let here = dir.join(name);
                    here.is_file().then_some(here)
                })
        };
        // Files installed where cron and crond look.
        for (dest, local, line) in &copies {
            if dest.starts_with("/etc/cron.d/") {
                let role = self.entry(local);
                role.kind = Some(SourceKind::Crontab);
                role.user_column = true;
                role.because.push(format!(
                    "copied to {dest} by {shown}:{line} (cron.d format: a user column)"
                ));
            } else if dest == "/etc/crontab" {
                let role = self.entry(local);
                role.kind = Some(SourceKind::Crontab);
                role.user_column = true;
                role.because.push(format!(
                    "copied to {dest} by {shown}:{line} (a user column)"
                ));
            } else if dest.starts_with("/etc/crontabs/")
                || dest.starts_with("/var/spool/cron/crontabs/")
            {
                let role = self.entry(local);
                role.kind = Some(SourceKind::Crontab);
                role.no_user_column = true;
                role.because.push(format!(
                    "copied to {dest} by {shown}:{line} (a user crontab)"
                ));
            }
        }
        // What the image runs: ENTRYPOINT + CMD, then the scripts they start.
        let mut started: Vec<(usize, &'static str, Vec<String>)> = Vec::new();
        let mut main = Vec::new();
        let mut main_line = 0;
        if let Some((l, e)) = &entry {
            main.extend(e.iter().cloned());
            main_line = *l;
        }
        if let Some((l, c)) = &cmd {
            main.extend(c.iter().cloned());
            if main_line == 0 {
                main_line = *l;
            }
        }
        let which = match (&entry, &cmd) {
            (Some(_), Some(_)) => "ENTRYPOINT+CMD",
            (Some(_), None) => "ENTRYPOINT",
            _ => "CMD",
        };
        for c in unwrap_shell(&main) {
            started.push((main_line, which, c));
        }
        // An entrypoint script usually ends in `exec "$@"`: CMD is a command of its own.
        if entry.is_some()
            && let Some((l, c)) = &cmd
        {
            for c in unwrap_shell(c) {
                started.push((*l, "CMD", c));
            }
        }
        for (l, r) in &runs {
            for c in unwrap_shell(r) {
                started.push((*l, "RUN", c));
            }
        }
        // A script of the tree the image starts: its lines are commands too.
        let scripts: Vec<(usize, &'static str, PathBuf)> = started
            .iter()
            .filter(|(_, w, _)| *w != "RUN")
            .filter_map(|(l, w, c)| {
                let first = c.iter().find(|x| !x.contains('=') || x.starts_with('-'))?;
                let script = if matches!(first.as_str(), "sh" | "bash" | "/bin/sh" | "/bin/bash") {
                    c.get(1)?
                } else {
                    first
                };
                let local = map(script)?;
                let is_script = script.ends_with(".sh")
                    || read_small(&local).is_some_and(|b| b.starts_with("#!"));
                is_script.then_some((*l, *w, local))
            })
            .collect();
        for (l, w, local) in scripts {
            let Some(body) = read_small(&local) else {
                continue;
            };
            for line in body.lines() {
                let line = line.trim();
                if line.starts_with('#') || line.is_empty() {
                    continue;
                }
                for c in commands(line) {
                    started.push((l, w, c));
                }
            }
        }
        let mut daemon: Option<(RunnerKind, String)> = None;
        for (l, w, c) in &started {
            let from = format!("{shown}:{l} {w}");
            self.pm2_start(c, &|p| map(p), &from);
            // A daemon started by `RUN` runs at build time only.
            let Some((kind, rest)) = cron_program(c).filter(|_| *w != "RUN") else {
                continue;
            };
            match kind {
                RunnerKind::Supercronic => {
                    let (overlapping, file) = supercronic_args(&rest);
                    if let Some(local) = file.and_then(|f| map(&f)) {
                        let role = self.entry(&local);
                        role.kind = Some(SourceKind::Crontab);
                        role.runner.get_or_insert(CrontabRunner {
                            kind,
                            overlapping,
                            from: format!("{from} `{}`", crate::sources::command::shell_join(c)),
                        });
                    }
                }
                _ => {
                    daemon.get_or_insert((
                        kind,
                        format!("{from} `{}`", crate::sources::command::shell_join(c)),
                    ));
                }
            }
        }
        // `RUN crontab FILE`: FILE is the user crontab of the daemon.
        let mut installed: Vec<PathBuf> = Vec::new();
        for (_, w, c) in &started {
            if *w != "RUN" {
                continue;
            }
            let words: Vec<&str> = c.iter().map(String::as_str).collect();
            if let [prog, rest @ ..] = words.as_slice()
                && prog.rsplit('/').next() == Some("crontab")
                && let Some(f) = rest.iter().find(|w| !w.starts_with('-'))
                && let Some(local) = map(f)
            {
                installed.push(local);
            }
        }
        if let Some((kind, from)) = daemon {
            let targets: Vec<PathBuf> = copies
                .iter()
                .filter(|(d, ..)| is_cron_install(d))
                .map(|(_, f, _)| f.clone())
                .chain(installed)
                .collect();
            for local in targets {
                let role = self.entry(&local);
                role.kind = Some(SourceKind::Crontab);
                role.runner.get_or_insert(CrontabRunner {
                    kind,
                    overlapping: false,
                    from: from.clone(),
                });
            }
        }
    }

    fn scan_compose(&mut self, path: &Path, text: &str) {
        let Ok(root) = crate::manifest::yaml::parse(text) else {
            return;
        };
        let dir = dir_of(path);
        let shown = crate::text::display_path(path);
        let Some(services) = super::get(&root, "services") else {
            return;
        };
        let crate::manifest::yaml::Value::Map(entries) = &services.value else {
            return;
        };
        for (name, svc) in entries {
            let name = match &name.value {
                crate::manifest::yaml::Value::Str(s) => s.clone(),
                _ => continue,
            };
            // Bind mounts: container path -> file of the tree.
            let mut mounts: Vec<(String, PathBuf)> = Vec::new();
            if let Some(vols) = super::get(svc, "volumes")
                && let crate::manifest::yaml::Value::Seq(items) = &vols.value
            {
                for v in items {
                    let (src, dst) = match &v.value {
                        crate::manifest::yaml::Value::Str(s) => {
                            let mut it = s.splitn(3, ':');
                            match (it.next(), it.next()) {
                                (Some(a), Some(b)) => (a.to_owned(), b.to_owned()),
                                _ => continue,
                            }
                        }
                        crate::manifest::yaml::Value::Map(_) => {
                            let s = super::get(v, "source").and_then(super::str_at);
                            let t = super::get(v, "target").and_then(super::str_at);
                            match (s, t) {
                                (Some(s), Some(t)) => (s.value, t.value),
                                _ => continue,
                            }
                        }
                        _ => continue,
                    };
                    if !(src.starts_with('.') || src.starts_with('/')) {
                        continue; // a named volume
                    }
                    let local = dir.join(&src);
                    if local.is_dir() {
                        for f in files_in(&local) {
                            let n = f.file_name().map(|n| n.to_string_lossy().into_owned());
                            if let Some(n) = n {
                                mounts.push((join_image(&dst, &n), f));
                            }
                        }
                    } else if local.is_file() {
                        mounts.push((dst, local));
                    }
                }
            }
            for (dst, local) in &mounts {
                if dst.starts_with("/etc/cron.d/") {
                    let role = self.entry(local);
                    role.kind = Some(SourceKind::Crontab);
                    role.user_column = true;
                    role.because.push(format!(
                        "mounted at {dst} by {shown} service `{name}` (cron.d format: a user column)"
                    ));
                }
            }
            let map = |image: &str| -> Option<PathBuf> {
                mounts
                    .iter()
                    .find(|(d, _)| d == image)
                    .map(|(_, f)| f.clone())
            };
            let mut argv = Vec::new();
            let mut key = "command";
            for k in ["entrypoint", "command"] {
                if let Some(node) = super::get(svc, k) {
                    let words = match &node.value {
                        crate::manifest::yaml::Value::Str(s) => {
                            vec!["sh".into(), "-c".into(), s.clone()]
                        }
                        _ => super::words(node),
                    };
                    if !words.is_empty() && argv.is_empty() {
                        key = k;
                    }
                    argv.extend(words);
                }
            }
            let from = format!("{shown} service `{name}` {key}");
            for c in unwrap_shell(&argv) {
                self.pm2_start(&c, &|p| map(p), &from);
                let Some((kind, rest)) = cron_program(&c) else {
                    continue;
                };
                let runner = |overlapping| CrontabRunner {
                    kind,
                    overlapping,
                    from: format!("{from} `{}`", crate::sources::command::shell_join(&c)),
                };
                if kind == RunnerKind::Supercronic {
                    let (overlapping, file) = supercronic_args(&rest);
                    if let Some(local) = file.and_then(|f| map(&f)) {
                        let role = self.entry(&local);
                        role.kind = Some(SourceKind::Crontab);
                        role.runner.get_or_insert(runner(overlapping));
                    }
                } else {
                    for (dst, local) in &mounts {
                        if is_cron_install(dst) {
                            let role = self.entry(local);
                            role.kind = Some(SourceKind::Crontab);
                            role.runner.get_or_insert(runner(false));
                        }
                    }
                }
            }
        }
    }
}

/// `docker-compose.yml`, `compose.yaml`, `docker-compose.prod.yml` …
pub fn is_compose_name(name: &str) -> bool {
    (name.starts_with("docker-compose") || name.starts_with("compose"))
        && (name.ends_with(".yml") || name.ends_with(".yaml"))
}

fn is_cron_dir(dest: &str) -> bool {
    matches!(
        dest.trim_end_matches('/'),
        "/etc/cron.d" | "/etc/crontabs" | "/var/spool/cron/crontabs"
    )
}

/// A place cron or crond reads crontabs from.
fn is_cron_install(dest: &str) -> bool {
    dest.starts_with("/etc/cron.d/")
        || dest == "/etc/crontab"
        || dest.starts_with("/etc/crontabs/")
        || dest.starts_with("/var/spool/cron/crontabs/")
}

/// `p` in the image, relative paths taken from `workdir`; a trailing `/` is kept (it
/// makes a `COPY` destination a folder).
fn absolute_in(workdir: &str, p: &str) -> String {
    let p = p.trim();
    let joined = if p.starts_with('/') {
        p.to_owned()
    } else {
        format!("{}/{p}", workdir.trim_end_matches('/'))
    };
    let slash = if joined.ends_with('/') || p == "." {
        "/"
    } else {
        ""
    };
    let clean = clean_image(&joined);
    if clean == "/" {
        clean
    } else {
        format!("{clean}{slash}")
    }
}

/// `/app/./x/` -> `/app/x`.
fn clean_image(p: &str) -> String {
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

fn join_image(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// A `COPY` source as a file of the tree: relative to the Dockerfile's folder, else to one
/// of its parents (the build context is often the repository's root).
fn in_context(dir: &Path, src: &str) -> Option<PathBuf> {
    if src.contains(['*', '?', '$']) || src.starts_with("http") {
        return None;
    }
    let rel = src.trim_start_matches("./").trim_start_matches('/');
    dir.ancestors()
        .take(4)
        .map(|d| d.join(rel))
        .find(|p| p.exists())
}

/// A text file of the tree that a deploy file points at, when it is small enough to be a
/// script or a config (1 MiB): a copied binary or archive is not read.
pub fn read_small(path: &Path) -> Option<String> {
    const LIMIT: u64 = 1024 * 1024;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > LIMIT {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A Dockerfile's instructions with their first line number: continuation lines joined,
/// comments dropped.
pub(crate) fn instructions(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim_start();
        if cur.is_none() && (trimmed.starts_with('#') || trimmed.is_empty()) {
            continue;
        }
        let (body, more) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        match &mut cur {
            Some((_, s)) => {
                if !trimmed.starts_with('#') {
                    s.push(' ');
                    s.push_str(body.trim());
                }
            }
            None => cur = Some((i + 1, body.trim().to_owned())),
        }
        if !more && let Some(done) = cur.take() {
            out.push(done);
        }
    }
    out.extend(cur);
    out
}

/// The simple commands of a shell string: split on `&&`, `||`, `;`, `|` and newlines.
fn commands(script: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let normalized = script
        .replace("&&", ";")
        .replace("||", ";")
        .replace('|', ";");
    for part in normalized.split([';', '\n']) {
        let words = split_words(part.trim());
        if !words.is_empty() {
            out.push(words);
        }
    }
    out
}

/// An argv as the commands it runs: `sh -c "a && b"` is `a` and `b`; `exec`, `gosu USER`,
/// `su-exec USER`, `tini --`, `dumb-init` are looked through.
fn unwrap_shell(argv: &[String]) -> Vec<Vec<String>> {
    let shell = |w: &str| {
        matches!(
            w.rsplit('/').next().unwrap_or(w),
            "sh" | "bash" | "dash" | "ash"
        )
    };
    if let [sh, flag, script, ..] = argv
        && shell(sh)
        && flag.starts_with('-')
        && flag.contains('c')
    {
        return commands(script)
            .into_iter()
            .map(|c| strip_wrappers(&c))
            .collect();
    }
    if argv.is_empty() {
        return Vec::new();
    }
    vec![strip_wrappers(argv)]
}

fn strip_wrappers(argv: &[String]) -> Vec<String> {
    let mut i = 0;
    while let Some(w) = argv.get(i) {
        let base = w.rsplit('/').next().unwrap_or(w);
        match base {
            "exec" | "tini" | "dumb-init" | "--" | "nohup" => i += 1,
            "gosu" | "su-exec" | "setuidgid" => i += 2,
            _ if w.contains('=') && !w.starts_with('-') => i += 1,
            _ => break,
        }
    }
    argv.get(i..).map(<[String]>::to_vec).unwrap_or_default()
}

/// The cron daemon an argv starts, and its arguments.
fn cron_program(argv: &[String]) -> Option<(RunnerKind, Vec<String>)> {
    let (first, rest) = argv.split_first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    match base {
        "supercronic" => Some((RunnerKind::Supercronic, rest.to_vec())),
        "crond" => Some((RunnerKind::Busybox, rest.to_vec())),
        "busybox" if rest.first().is_some_and(|w| w == "crond") => {
            Some((RunnerKind::Busybox, rest[1..].to_vec()))
        }
        "cron" => Some((RunnerKind::Cron, rest.to_vec())),
        "service" if rest.first().is_some_and(|w| w == "cron") => {
            Some((RunnerKind::Cron, Vec::new()))
        }
        _ => None,
    }
}

/// supercronic's flags (`main.go`, Go's `flag` package: `-x` or `--x`, string flags take
/// the next word unless written `-x=v`) and its one argument, the crontab.
fn supercronic_args(args: &[String]) -> (bool, Option<String>) {
    const STRING_FLAGS: [&str; 5] = [
        "prometheus-listen-address",
        "sentry-dsn",
        "sentryDsn",
        "sentry-environment",
        "sentry-release",
    ];
    let mut overlapping = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) {
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            if name == "overlapping" {
                overlapping =
                    value.is_none_or(|v| matches!(v, "true" | "1" | "t" | "T" | "TRUE" | "True"));
            }
            i += if value.is_none() && STRING_FLAGS.contains(&name) {
                2
            } else {
                1
            };
            continue;
        }
        return (overlapping, Some(w.clone()));
    }
    (overlapping, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn supercronic_flags() {
        assert_eq!(
            supercronic_args(&s(&["-overlapping", "/app/crontab"])),
            (true, Some("/app/crontab".into()))
        );
        assert_eq!(
            supercronic_args(&s(&["-sentry-dsn", "x", "-json", "crontab"])),
            (false, Some("crontab".into()))
        );
        assert_eq!(
            supercronic_args(&s(&["--overlapping=false", "c"])),
            (false, Some("c".into()))
        );
    }

    #[test]
    fn shells_and_wrappers() {
        let c = unwrap_shell(&s(&[
            "sh",
            "-c",
            "printenv > /etc/environment && exec cron -f",
        ]));
        assert_eq!(c.last().map(|c| c[0].as_str()), Some("cron"));
        assert_eq!(
            cron_program(&s(&["busybox", "crond", "-f"])).map(|c| c.0),
            Some(RunnerKind::Busybox)
        );
        assert_eq!(
            strip_wrappers(&s(&["tini", "--", "gosu", "app", "supercronic", "c"])),
            s(&["supercronic", "c"])
        );
    }

    #[test]
    fn a_folder_copied_whole_maps_image_paths_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("deploy/cron")).expect("mkdir");
        std::fs::write(root.join("deploy/cron/jobs"), "*/5 * * * * * * /bin/x\n").expect("write");
        let docker =
            "FROM alpine\nWORKDIR /app\nCOPY . .\nCMD supercronic -overlapping deploy/cron/jobs\n";
        std::fs::write(root.join("Dockerfile"), docker).expect("write");
        let mut ctx = Context::default();
        ctx.scan(&root.join("Dockerfile"), docker);
        let role = ctx.role(&root.join("deploy/cron/jobs")).expect("a role");
        assert_eq!(role.kind, Some(SourceKind::Crontab));
        let runner = role.runner.as_ref().expect("a runner");
        assert!(runner.overlapping && runner.kind == RunnerKind::Supercronic);
        assert!(runner.from.contains("Dockerfile:4 CMD"), "{}", runner.from);
    }

    #[test]
    fn compose_mounts_into_cron_d_and_a_from_stage_copy_is_not_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("cronjobs"), "0 3 * * * root /bin/x\n").expect("write");
        let compose = "services:\n  cron:\n    image: x\n    command: [\"cron\", \"-f\"]\n    volumes:\n      - ./cronjobs:/etc/cron.d/jobs:ro\n";
        let mut ctx = Context::default();
        ctx.scan(&root.join("docker-compose.yml"), compose);
        let role = ctx.role(&root.join("cronjobs")).expect("a role");
        assert!(role.user_column);
        assert_eq!(role.runner.as_ref().map(|r| r.kind), Some(RunnerKind::Cron));
        let docker = "FROM x AS b\nCOPY --from=b /cronjobs /etc/cron.d/jobs\nCMD cron -f\n";
        let mut ctx = Context::default();
        ctx.scan(&root.join("Dockerfile"), docker);
        assert!(ctx.role(&root.join("cronjobs")).is_none());
    }

    #[test]
    fn continuation_lines() {
        let i = instructions("FROM x\n# c\nCOPY a \\\n  /etc/cron.d/a\nCMD [\"cron\", \"-f\"]\n");
        assert_eq!(i[1], (3, "COPY a /etc/cron.d/a".to_owned()));
        assert_eq!(i[2].0, 5);
    }
}
