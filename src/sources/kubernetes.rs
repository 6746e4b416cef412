//! Kubernetes manifests: every `kind: CronJob` (apiVersion `batch/…`) document of a
//! multi-document YAML file; Deployments, ConfigMaps and every other kind are ignored.
//!
//! The file is split at document markers (`---` / `...` at the start of a line, which YAML
//! forbids inside any scalar) and each document goes through the manifest parser
//! (`manifest::yaml::parse`), so the same limits apply per document (depth 128, alias
//! expansion 100,000 events) and the whole file is bounded by the 8 MiB size limit.
//!
//! A CronJob document without `spec.schedule` registers nothing; it is kept as
//! [`Unscheduled`] (a patch, or a resource the API server rejects: lint decides with the
//! file's deploy unit). A Helm / Go template document (one that does not parse and contains `{{`, or
//! that parses but uses Helm's `.Values`, `.Release`, `.Chart`, `include`, `{{-` …, whose
//! values are not final until rendered) is not read: one BG609 per file, located on the
//! first template and counting the documents left unread, rather than BG001 per document.
//!
//! `metadata.namespace` and the first container's `workingDir` are kept (located): CronJobs
//! in different namespaces are never duplicates, and the working directory resolves the
//! command's relative paths.

use super::{
    KubeFields, Problem, Read, Registration, SourceKind, Spanned, Tie, Unscheduled, get, int_at,
    str_at,
};
use crate::manifest::Issue;
use crate::manifest::yaml::{self, Node, Value};
use crate::text::Span;

/// The names a kustomization file goes by (kustomize accepts all three).
pub const KUSTOMIZATION_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The annotation that ties a CronJob to a manifest job.
pub const TIE_ANNOTATION: &str = "batchguard.dev/job";

/// A YAML file is read as Kubernetes when a line declares `kind: CronJob`.
pub fn looks_like_cronjob(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(8 << 20)]);
    text.lines().any(|l| {
        let l = l.trim_start_matches([' ', '-']).trim_end();
        l.strip_prefix("kind:")
            .map(|v| v.trim().trim_matches(['"', '\'']) == "CronJob")
            .unwrap_or(false)
    })
}

/// Byte ranges of the documents of a multi-document YAML text.
pub(crate) fn documents(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let marker = |m: &str| {
            line.strip_prefix(m)
                .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '\r', '\n']))
        };
        if marker("---") {
            out.push((start, pos));
            start = pos + 3;
        } else if marker("...") {
            out.push((start, pos));
            start = pos + line.len();
        }
        pos += line.len();
    }
    out.push((start, text.len()));
    out.retain(|&(s, e)| {
        text.get(s..e).is_some_and(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
    });
    out
}

fn shift(node: &mut Node, by: usize) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        n.span.start += by;
        match &mut n.value {
            Value::Seq(items) => stack.extend(items.iter_mut()),
            Value::Map(entries) => {
                for (k, v) in entries.iter_mut() {
                    stack.push(k);
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
}

/// Helm's own words: a document that uses them is a template even when it parses.
const HELM_MARKERS: &[&str] = &[
    ".Values",
    ".Release.",
    ".Chart.",
    ".Capabilities.",
    ".Files.",
    "{{-",
    "-}}",
    "{{ include ",
    "{{ template ",
    "{{ if ",
    "{{ range ",
    "{{ with ",
    "{{ end",
    "{{/*",
];

/// Where a document's first template action starts, when it is a template.
fn template_at(doc: &str, parses: bool) -> Option<usize> {
    let at = doc.find("{{")?;
    (!parses || HELM_MARKERS.iter().any(|m| doc.contains(m))).then_some(at)
}

pub fn read(text: &str) -> Read {
    let mut out = Read::default();
    let docs = documents(text);
    let total = docs.len();
    let mut templates: Vec<usize> = Vec::new();
    for (start, end) in docs {
        let Some(doc) = text.get(start..end) else {
            continue;
        };
        let parsed = yaml::parse(doc);
        if let Some(at) = template_at(doc, parsed.is_ok()) {
            // A Helm / Go template is not YAML, or not its final values, until rendered.
            templates.push(start + at);
            continue;
        }
        match parsed {
            Ok(mut root) => {
                shift(&mut root, start);
                // `kind: List` (what `kubectl get -o yaml` prints) holds its objects in `items`.
                let is_list = get(&root, "kind")
                    .and_then(str_at)
                    .is_some_and(|k| k.value == "List");
                match get(&root, "items").map(|i| &i.value) {
                    Some(Value::Seq(items)) if is_list => {
                        for item in items {
                            if let Some(r) = cronjob(item) {
                                out.registrations.push(r);
                                out.roots.push(item.clone());
                            } else if let Some(u) = unscheduled(item) {
                                out.unscheduled.push(u);
                                out.roots.push(item.clone());
                            }
                        }
                    }
                    _ => {
                        if let Some(r) = cronjob(&root) {
                            out.registrations.push(r);
                            out.roots.push(root);
                        } else if let Some(u) = unscheduled(&root) {
                            out.unscheduled.push(u);
                            out.roots.push(root);
                        }
                    }
                }
            }
            Err(err) => {
                let (issue, message, help) = yaml::classify_error(&err);
                let mut span = yaml::error_span(&err, doc);
                span.start += start;
                out.problems.push(Problem {
                    issue,
                    span,
                    message,
                    help: help.to_owned(),
                });
            }
        }
    }
    if let Some(&first) = templates.first() {
        let n = templates.len();
        let (docs, are, they) = if n == 1 {
            ("document", "is", "it was")
        } else {
            ("documents", "are", "they were")
        };
        let of = if n == total {
            String::new()
        } else {
            format!(" of {total}")
        };
        out.problems.push(Problem {
            issue: Issue::SourceNotRead,
            span: Span::new(first, 2),
            message: format!(
                "this file is a Helm / Go template: {n}{of} YAML {docs} (`{{{{ … }}}}`) {are} not YAML, or not final, until rendered, so {they} not read"
            ),
            help: "lint the rendered manifests (`helm template … > rendered.yaml`); a duplicate may hide in this one".into(),
        });
    }
    out
}

fn path<'n>(node: &'n Node, keys: &[&str]) -> Option<&'n Node> {
    keys.iter().try_fold(node, |n, k| get(n, k))
}

/// A CronJob (`batch/…` or no apiVersion, as a patch may omit it) without `spec.schedule`.
fn unscheduled(root: &Node) -> Option<Unscheduled> {
    let kind = get(root, "kind").and_then(str_at)?;
    let api = get(root, "apiVersion").and_then(str_at);
    if kind.value != "CronJob"
        || api.is_some_and(|a| !a.value.starts_with("batch/"))
        || path(root, &["spec", "schedule"]).is_some()
    {
        return None;
    }
    let name = path(root, &["metadata", "name"]).and_then(str_at);
    let complete = path(
        root,
        &[
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "containers",
        ],
    )
    .is_some_and(|c| match &c.value {
        Value::Seq(items) => items.iter().any(|c| get(c, "image").is_some()),
        _ => false,
    });
    Some(Unscheduled {
        file: 0,
        span: name.as_ref().map_or(kind.span, |n| n.span),
        label: format!(
            "CronJob `{}`",
            name.as_ref().map_or("(unnamed)", |n| n.value.as_str())
        ),
        complete,
    })
}

fn cronjob(root: &Node) -> Option<Registration> {
    let kind = get(root, "kind").and_then(str_at)?;
    // A CronJob without a schedule is a patch (kustomize), not a registration.
    path(root, &["spec", "schedule"])?;
    let api = get(root, "apiVersion").and_then(str_at);
    if kind.value != "CronJob" || api.is_some_and(|a| !a.value.starts_with("batch/")) {
        return None;
    }
    let name = path(root, &["metadata", "name"]).and_then(str_at);
    let spec = get(root, "spec");
    let field = |keys: &[&str]| spec.and_then(|s| path(s, keys));
    let job_spec = field(&["jobTemplate", "spec"]);
    let container = job_spec
        .and_then(|j| path(j, &["template", "spec", "containers"]))
        .and_then(|c| match &c.value {
            Value::Seq(items) => items.first(),
            _ => None,
        });
    let mut command = Vec::new();
    let mut command_span = None;
    if let Some(c) = container {
        for key in ["command", "args"] {
            if let Some(n) = get(c, key) {
                command.extend(super::words(n));
                command_span.get_or_insert(n.span);
            }
        }
    }
    let span = name.as_ref().map_or(root.span, |n| n.span);
    let command_span = command_span.or(container.map(|c| c.span)).unwrap_or(span);
    let annotation = path(root, &["metadata", "annotations", TIE_ANNOTATION]).and_then(str_at);
    let tie = match annotation {
        Some(a) => Some(match a.value.split_once('/') {
            Some((svc, job)) => Tie {
                service: Some(svc.to_owned()),
                job: job.to_owned(),
                manifest: None,
                span: a.span,
            },
            None => Tie {
                service: None,
                job: a.value.clone(),
                manifest: None,
                span: a.span,
            },
        }),
        None => super::batchguard_tie(&command, command_span),
    };
    let bool_at = |n: &Node| match n.value {
        Value::Bool(b) => Some(Spanned {
            value: b,
            span: n.span,
        }),
        _ => None,
    };
    let kube = KubeFields {
        concurrency_policy: field(&["concurrencyPolicy"]).and_then(str_at),
        starting_deadline_seconds: field(&["startingDeadlineSeconds"]).and_then(int_at),
        backoff_limit: job_spec
            .and_then(|j| get(j, "backoffLimit"))
            .and_then(int_at),
        active_deadline_seconds: job_spec
            .and_then(|j| get(j, "activeDeadlineSeconds"))
            .and_then(int_at),
        suspend: field(&["suspend"]).and_then(bool_at),
    };
    let wrapped = super::is_wrapped(&command);
    let workdir = container
        .and_then(|c| get(c, "workingDir"))
        .and_then(str_at);
    let namespace = path(root, &["metadata", "namespace"]).and_then(str_at);
    let store_env = container.and_then(store_env);
    Some(Registration {
        kind: SourceKind::Kubernetes,
        file: 0,
        span,
        label: format!(
            "CronJob `{}`",
            name.as_ref().map_or("(unnamed)", |n| n.value.as_str())
        ),
        schedule: field(&["schedule"]).and_then(str_at),
        timezone: field(&["timeZone"]).and_then(str_at),
        dialect: SourceKind::Kubernetes.dialect(),
        command,
        command_span,
        instances: 1,
        instances_span: None,
        cluster: false,
        kube: Some(kube),
        tie,
        wrapped,
        workdir,
        namespace,
        store_env,
        ..Registration::default()
    })
}

/// The container's `BATCHGUARD_STORE` env entry: its literal `value`, or `$(valueFrom)`
/// for a value taken from a Secret or ConfigMap (given, but not written here). An
/// `envFrom` imports names this file does not list, so it may give it too: `$(envFrom)`.
fn store_env(container: &Node) -> Option<Spanned<String>> {
    let entry = match &get(container, "env").map(|e| &e.value) {
        Some(Value::Seq(items)) => items.iter().find(|e| {
            get(e, "name")
                .and_then(str_at)
                .is_some_and(|n| n.value == super::STORE_ENV)
        }),
        _ => None,
    };
    let reference = |name: &str, n: &Node| Spanned {
        value: format!("$({name})"),
        span: n.span,
    };
    match entry {
        Some(e) => get(e, "value").and_then(str_at).or_else(|| {
            let from = get(e, "valueFrom")?;
            // Which Secret or ConfigMap key: two entries compare equal only when they
            // name the same one.
            let named = ["secretKeyRef", "configMapKeyRef"].iter().find_map(|kind| {
                let r = get(from, kind)?;
                let name = get(r, "name").and_then(str_at)?.value;
                let key = get(r, "key").and_then(str_at)?.value;
                Some(format!("{kind} {name}/{key}"))
            });
            Some(reference(named.as_deref().unwrap_or("valueFrom"), from))
        }),
        None => get(container, "envFrom").map(|n| reference("envFrom", n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTI: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: settle\n  annotations:\n    batchguard.dev/job: billing/settle-payments\nspec:\n  schedule: \"0 * * * *\"\n  timeZone: Asia/Seoul\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: c\n              command: [node, jobs/settle.js]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n";

    #[test]
    fn reads_only_cronjobs_with_spans() {
        let r = read(MULTI);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 1);
        let c = &r.registrations[0];
        let s = c
            .schedule
            .as_ref()
            .map(|s| &MULTI[s.span.start..s.span.end()]);
        assert_eq!(s, Some("\"0 * * * *\""));
        assert_eq!(
            c.tie.as_ref().map(|t| t.job.as_str()),
            Some("settle-payments")
        );
        assert_eq!(c.command, ["node", "jobs/settle.js"]);
        assert_eq!(c.zone(), "Asia/Seoul");
    }

    #[test]
    fn syntax_error_is_located_in_its_document() {
        let text = "kind: CronJob\n---\nkind: CronJob\nspec: [\n";
        let r = read(text);
        assert_eq!(r.problems.len(), 1);
        assert!(r.problems[0].span.start >= 18);
    }

    #[test]
    fn templates_and_patches() {
        let r = read("kind: CronJob\nspec:\n  schedule: {{ .Values.schedule }}\n  x: [\n");
        assert_eq!(
            r.problems.first().map(|p| p.issue),
            Some(Issue::SourceNotRead)
        );
        let r = read(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  suspend: true\n",
        );
        assert!(r.problems.is_empty() && r.registrations.is_empty());
        assert_eq!(r.unscheduled.len(), 1);
        assert!(!r.unscheduled[0].complete, "no container: a patch");
        let whole = read(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: y}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: c, image: busybox}]\n",
        );
        assert!(whole.registrations.is_empty());
        assert_eq!(whole.unscheduled.len(), 1);
        assert!(whole.unscheduled[0].complete);
        assert_eq!(whole.unscheduled[0].label, "CronJob `y`");
    }

    #[test]
    fn go_template_text_in_a_plain_cronjob_is_read() {
        // `docker ps --format '{{.Names}}'` is an argument, not a Helm template.
        let text = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: ps}\nspec:\n  schedule: \"0 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: c\n              args: [\"docker ps --format '{{.Names}}'\"]\n";
        let r = read(text);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 1);
    }

    #[test]
    fn one_bg609_counts_the_template_documents() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\nkind: CronJob\nmetadata:\n  name: \"{{ .Release.Name }}\"\nspec: {schedule: \"0 * * * *\"}\n";
        let r = read(text);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(
            r.problems[0].message.contains("1 of 2 YAML document "),
            "{}",
            r.problems[0].message
        );
        assert_eq!(&text[r.problems[0].span.start..][..2], "{{");
        assert!(r.registrations.is_empty());
    }

    #[test]
    fn lists_hold_cronjobs() {
        let text = "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: batch/v1\n    kind: CronJob\n    metadata: {name: a}\n    spec: {schedule: \"0 * * * *\"}\n";
        let r = read(text);
        assert_eq!(r.registrations.len(), 1);
        assert_eq!(r.registrations[0].label, "CronJob `a`");
    }
}
