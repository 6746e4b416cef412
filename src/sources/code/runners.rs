//! What starts application code (SPEC 3.7 "Which process runs it"): PM2 apps,
//! `package.json` (`main`, `scripts.start`), Dockerfile `CMD`/`ENTRYPOINT` and Kubernetes
//! Deployments/StatefulSets (with an HPA's `minReplicas`). Each becomes a [`Runner`]: what
//! it starts, how many processes, and inside what it runs, so nested runners multiply
//! (`pm2-runtime` in each of 3 pods).

use crate::manifest::yaml::{self, Node, Value};
use crate::sources::{get, int_at, pm2, split_words, str_at, words};
use std::path::{Component, Path, PathBuf};

/// What a runner starts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Starts {
    /// A JavaScript/TypeScript entry file.
    Script(PathBuf),
    /// A PM2 ecosystem file (`pm2-runtime ecosystem.config.js`): its apps.
    Pm2File(PathBuf),
    /// `npm start` in a folder: its `package.json`'s start script.
    NpmStart(PathBuf),
    /// The image's own command (a container with no `command`): the Dockerfile's.
    Image,
}

/// One thing that starts code.
#[derive(Clone, Debug, PartialEq)]
pub struct Runner {
    /// How messages name it: `PM2 app \`api\` in ecosystem.config.js`.
    pub label: String,
    /// Processes it starts (PM2 instances, replicas; 1 elsewhere).
    pub instances: u64,
    pub starts: Starts,
    /// What starts this runner, when something does (a PM2 app inside its ecosystem file).
    pub within: Option<Starts>,
    /// A Kubernetes workload's `kind/name`, for its HPA.
    pub workload: Option<String>,
}

/// `a/./b/../c` -> `a/c`, made absolute: paths from different files compare equal.
pub fn normalize(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

pub(crate) fn dir_of(file: &Path) -> PathBuf {
    normalize(file.parent().unwrap_or(Path::new(".")))
}

/// What a command line starts, read from `dir`: `node [flags] FILE`, `ts-node`/`tsx FILE`,
/// `pm2-runtime [start] FILE` / `pm2 start FILE [-i N]`, `npm start` / `npm run start`,
/// `nest start` (its `dist/main.js`). Env assignments and `exec` are skipped.
pub fn interpret(argv: &[String], dir: &Path) -> Option<(Starts, u64)> {
    let mut words = argv
        .iter()
        .skip_while(|w| {
            w.contains('=') && !w.starts_with('-')
                || *w == "exec"
                || *w == "dumb-init"
                || *w == "tini"
                || *w == "--"
        })
        .map(String::as_str);
    let program = words.next()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    let rest: Vec<&str> = words.collect();
    let at = |f: &str| normalize(&dir.join(f));
    let file_arg = |rest: &[&str]| {
        rest.iter()
            .copied()
            .find(|w| !w.starts_with('-') && *w != "start")
            .map(str::to_owned)
    };
    match base {
        "node" | "nodejs" | "bun" | "ts-node" | "tsx" | "ts-node-dev" | "nodemon" => {
            let f = rest.iter().copied().find(|w| !w.starts_with('-'))?;
            Some((Starts::Script(at(f)), 1))
        }
        "pm2-runtime" | "pm2" | "pm2-docker" => {
            let f = file_arg(&rest)?;
            let instances = rest
                .windows(2)
                .find(|w| w[0] == "-i" || w[0] == "--instances")
                .map_or(1, |w| pm2::instances_of(&Value::Str(w[1].to_owned())));
            if pm2::is_pm2_name(Path::new(&f).file_name()?.to_str()?) {
                Some((Starts::Pm2File(at(&f)), 1))
            } else {
                Some((Starts::Script(at(&f)), instances))
            }
        }
        "npm" | "yarn" | "pnpm" => {
            let start = rest.first() == Some(&"start")
                || (rest.first() == Some(&"run") && rest.get(1) == Some(&"start"));
            start.then(|| (Starts::NpmStart(normalize(dir)), 1))
        }
        "nest" if rest.first() == Some(&"start") => Some((Starts::Script(at("dist/main.js")), 1)),
        _ if super::is_code_path(Path::new(program)) => Some((Starts::Script(at(program)), 1)),
        _ => None,
    }
}

/// `package.json`: `main` and `scripts.start`.
pub fn package_json(path: &Path, text: &str) -> Vec<Runner> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let dir = dir_of(path);
    let shown = crate::text::display_path(path);
    let mut out = Vec::new();
    if let Some(main) = v.get("main").and_then(|m| m.as_str()) {
        out.push(Runner {
            label: format!("{shown} `main` ({main})"),
            instances: 1,
            starts: Starts::Script(normalize(&dir.join(main))),
            within: None,
            workload: None,
        });
    }
    if let Some(start) = v.pointer("/scripts/start").and_then(|m| m.as_str()) {
        // `a && b`: the last command is the one that keeps running.
        let last = start.rsplit("&&").next().unwrap_or(start);
        if let Some((starts, instances)) = interpret(&split_words(last), &dir)
            && starts != Starts::NpmStart(dir.clone())
        {
            out.push(Runner {
                label: format!("{shown} `start` script (`{}`)", start.trim()),
                instances,
                starts,
                within: Some(Starts::NpmStart(dir.clone())),
                workload: None,
            });
        }
    }
    out
}

/// A Dockerfile's `ENTRYPOINT` + `CMD` (the last of each), paths in the image mapped to
/// the Dockerfile's folder through `WORKDIR`.
pub fn dockerfile(path: &Path, text: &str) -> Vec<Runner> {
    let dir = dir_of(path);
    let (mut entry, mut cmd, mut workdir) = (Vec::new(), Vec::new(), String::from("/"));
    // Instructions with their continuation lines joined, as Docker reads them.
    for (_, line) in crate::sources::runner::instructions(text) {
        let line = line.trim();
        let Some((word, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let argv = || match serde_json::from_str::<Vec<String>>(rest.trim()) {
            Ok(v) => v,
            Err(_) => split_words(rest),
        };
        match word.to_ascii_uppercase().as_str() {
            "ENTRYPOINT" => entry = argv(),
            "CMD" => cmd = argv(),
            "WORKDIR" => {
                let w = rest.trim();
                workdir = if w.starts_with('/') {
                    w.to_owned()
                } else {
                    format!("{}/{w}", workdir.trim_end_matches('/'))
                }
            }
            _ => {}
        }
    }
    let mut argv = entry;
    argv.extend(cmd);
    // `/app/dist/index.js` under `WORKDIR /app` is `dist/index.js` beside the Dockerfile.
    let prefix = format!("{}/", workdir.trim_end_matches('/'));
    let argv: Vec<String> = argv
        .into_iter()
        .map(|w| match w.strip_prefix(&prefix) {
            Some(rest) if prefix != "/" => rest.to_owned(),
            _ => w,
        })
        .collect();
    let Some((starts, instances)) = interpret(&argv, &dir) else {
        return Vec::new();
    };
    vec![Runner {
        label: format!(
            "{} `{}`",
            crate::text::display_path(path),
            crate::sources::command::shell_join(&argv)
        ),
        instances,
        starts,
        within: Some(Starts::Image),
        workload: None,
    }]
}

/// The folder a container's relative paths start from: the image is built from the app's
/// folder, not from where its manifests are kept (`deploy/`, `k8s/`). The nearest folder
/// at or above `dir` with a `package.json`, a Dockerfile or a PM2 ecosystem file, else
/// `dir`.
fn app_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| {
            [
                "package.json",
                "Dockerfile",
                "ecosystem.config.js",
                "ecosystem.config.cjs",
            ]
            .iter()
            .any(|f| d.join(f).is_file())
        })
        .map_or_else(|| dir.to_path_buf(), Path::to_path_buf)
}

/// Whether a YAML file holds workloads that run code (read for their replicas).
pub fn looks_like_workload(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    text.lines().any(|l| {
        let l = l.trim_start_matches(['-', ' ']);
        matches!(
            l.trim_end(),
            "kind: Deployment" | "kind: StatefulSet" | "kind: HorizontalPodAutoscaler"
        )
    })
}

fn path_in<'n>(node: &'n Node, keys: &[&str]) -> Option<&'n Node> {
    keys.iter().try_fold(node, |n, k| get(n, k))
}

/// Kubernetes Deployments and StatefulSets (each container's command), and the HPAs'
/// `minReplicas` by target, from every document of a YAML file.
pub fn kubernetes(path: &Path, text: &str) -> (Vec<Runner>, Vec<(String, u64)>) {
    let dir = app_root(&dir_of(path));
    let shown = crate::text::display_path(path);
    let (mut runners, mut hpas) = (Vec::new(), Vec::new());
    for (start, end) in crate::sources::kubernetes::documents(text) {
        let Some(doc) = text.get(start..end) else {
            continue;
        };
        let Ok(root) = yaml::parse(doc) else {
            continue;
        };
        let kind = get(&root, "kind").and_then(str_at).map(|k| k.value);
        let name = path_in(&root, &["metadata", "name"])
            .and_then(str_at)
            .map_or_else(|| "?".to_owned(), |n| n.value);
        match kind.as_deref() {
            Some("HorizontalPodAutoscaler") => {
                let target_kind =
                    path_in(&root, &["spec", "scaleTargetRef", "kind"]).and_then(str_at);
                let target = path_in(&root, &["spec", "scaleTargetRef", "name"]).and_then(str_at);
                let min = path_in(&root, &["spec", "minReplicas"])
                    .and_then(int_at)
                    .map_or(1, |m| u64::try_from(m.value.max(1)).unwrap_or(1));
                if let (Some(k), Some(t)) = (target_kind, target) {
                    hpas.push((format!("{}/{}", k.value, t.value), min));
                }
            }
            Some(k @ ("Deployment" | "StatefulSet")) => {
                let replicas = path_in(&root, &["spec", "replicas"])
                    .and_then(int_at)
                    .map_or(1, |r| u64::try_from(r.value.max(0)).unwrap_or(1));
                let containers = path_in(&root, &["spec", "template", "spec", "containers"]);
                let Some(Value::Seq(containers)) = containers.map(|c| &c.value) else {
                    continue;
                };
                for c in containers {
                    let mut argv = get(c, "command").map(words).unwrap_or_default();
                    let own_command = !argv.is_empty();
                    argv.extend(get(c, "args").map(words).unwrap_or_default());
                    let workdir = get(c, "workingDir").and_then(str_at).map(|w| w.value);
                    let argv: Vec<String> = match &workdir {
                        Some(w) => {
                            let prefix = format!("{}/", w.trim_end_matches('/'));
                            argv.into_iter()
                                .map(|a| a.strip_prefix(&prefix).map_or(a.clone(), str::to_owned))
                                .collect()
                        }
                        None => argv,
                    };
                    let starts = if own_command {
                        interpret(&argv, &dir)
                    } else {
                        Some((Starts::Image, 1))
                    };
                    let Some((starts, instances)) = starts else {
                        continue;
                    };
                    runners.push(Runner {
                        label: format!("{k} `{name}` in {shown}"),
                        instances: replicas.saturating_mul(instances),
                        starts,
                        within: None,
                        workload: Some(format!("{k}/{name}")),
                    });
                }
            }
            _ => {}
        }
    }
    (runners, hpas)
}

/// A PM2 ecosystem file's apps, registering or not: each starts its script.
pub fn pm2_apps(path: &Path, root: &Node) -> Vec<Runner> {
    let dir = dir_of(path);
    let shown = crate::text::display_path(path);
    let Ok(apps) = pm2::app_list(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, app) in apps.into_iter().enumerate() {
        let Some(script) = pm2::pick(app, &pm2::SCRIPT).and_then(str_at) else {
            continue;
        };
        let cwd = pm2::pick(app, &pm2::CWD)
            .and_then(str_at)
            .map_or_else(|| dir.clone(), |c| normalize(&dir.join(c.value)));
        let mut argv = split_words(&script.value);
        if argv.len() == 1 && super::is_code_path(Path::new(&script.value)) {
            argv.insert(0, "node".to_owned());
        }
        if let Some(args) = pm2::pick(app, &pm2::ARGS) {
            argv.extend(words(args));
        }
        let Some((starts, _)) = interpret(&argv, &cwd) else {
            continue;
        };
        let instances = pm2::pick(app, &pm2::INSTANCES).map_or(1, |n| pm2::instances_of(&n.value));
        let cluster = pm2::pick(app, &pm2::EXEC_MODE)
            .and_then(str_at)
            .map_or(instances > 1, |m| m.value.starts_with("cluster"));
        let name = pm2::pick(app, &pm2::NAME)
            .and_then(str_at)
            .map_or_else(|| format!("apps[{i}]"), |n| n.value);
        let mode = if cluster { "cluster" } else { "fork" };
        out.push(Runner {
            label: format!(
                "PM2 app `{name}` in {shown} ({mode} mode, {} instance{})",
                instances,
                if instances == 1 { "" } else { "s" }
            ),
            instances,
            starts,
            within: Some(Starts::Pm2File(normalize(path))),
            workload: None,
        });
    }
    out
}
