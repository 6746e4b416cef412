//! Application code as a registration source (SPEC 3.7): schedules found by their imports
//! in each library's dialect, the processes that run them (PM2, package.json, Dockerfile,
//! Deployments and HPAs), BG611/BG612, BG601 with a crontab, `init`, `--list-files`, and
//! the bounds (size, minified bundles, skipped folders, syntax errors, deep nesting,
//! bytes that are not UTF-8).

mod common;

use common::{NOW, bg, findings as of, message, write};
use std::path::Path;

/// `lint --format json ARGS` in `cwd`, with its exit code.
fn lint(cwd: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let out = bg()
        .current_dir(cwd)
        .args(["lint", "--format", "json", "--now", NOW])
        .args(args)
        .output()
        .expect("runs");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "json ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

const CLUSTER_OF_4: &str = r#"module.exports = {
  apps: [{ name: "api", script: "src/index.js", instances: 4, exec_mode: "cluster" }],
};
"#;

/// The incident: `src/jobs/settle.js` with node-cron, PM2 cluster mode with 4 instances.
fn incident(dir: &Path) {
    write(dir, "ecosystem.config.js", CLUSTER_OF_4);
    write(dir, "src/index.js", "require(\"./jobs/settle\");\n");
    write(
        dir,
        "src/jobs/settle.js",
        "const cron = require(\"node-cron\");\n\nasync function settle() {}\n\ncron.schedule(\"0 * * * *\", settle);\n",
    );
}

#[test]
fn the_incident_tree_is_bg611_naming_the_call_schedule_instances_and_ecosystem() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    let (exit, v) = lint(dir.path(), &["."]);
    assert_eq!(exit, 1, "{v}");
    let f = of(&v, "BG611");
    assert_eq!(f.len(), 1, "{v}");
    let m = message(f[0]);
    for want in [
        "src/jobs/settle.js:5",
        "`0 * * * *`",
        "4 processes",
        "ecosystem.config.js",
        "node-cron",
    ] {
        assert!(m.contains(want), "{want} not in {m}");
    }
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["file"], "src/jobs/settle.js");
    assert_eq!(f[0]["line"], 5);
    assert_eq!(v["summary"]["sources"]["code"], 2, "{v}");
    assert!(of(&v, "BG602").is_empty(), "BG611 stands for BG602: {v}");
}

#[test]
fn init_proposes_the_in_process_job_with_its_dialect() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    let out = bg()
        .current_dir(dir.path())
        .args(["init", "."])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let yaml = String::from_utf8_lossy(&out.stdout);
    for want in [
        "- name: settle",
        "schedule: \"0 * * * *\"",
        "scheduler: node-cron",
        "instances: 4",
        "command: [\"node\", \"src/jobs/settle.js\"]",
    ] {
        assert!(yaml.contains(want), "{want} not in {yaml}");
    }
}

#[test]
fn list_files_names_code_and_what_runs_it() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    write(
        dir.path(),
        "package.json",
        r#"{"scripts": {"start": "node src/index.js"}}"#,
    );
    let (_, v) = lint(dir.path(), &["--list-files", "."]);
    let files = v["files"].as_array().expect("files");
    let kind = |name: &str| {
        files.iter().find(|f| f["file"] == name).map(|f| {
            (
                f["kind"].clone(),
                f["registrations"].clone(),
                f["reason"].clone(),
            )
        })
    };
    assert_eq!(
        kind("src/jobs/settle.js").map(|k| (k.0, k.1)),
        Some(("code".into(), 1.into()))
    );
    let pkg = kind("package.json").expect("package.json listed");
    assert!(
        pkg.2.as_str().is_some_and(|r| r.contains("start")),
        "{pkg:?}"
    );
}

/// Each library in its own dialect: an `L` is node-cron's and croner's, not cron-npm's
/// (BG106), so the dialect a call is read in shows.
#[test]
fn each_library_is_read_in_its_dialect_with_its_zone_option() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    write(d, "ecosystem.config.js", CLUSTER_OF_4);
    write(
        d,
        "src/index.js",
        "require('./a'); require('./b'); require('./c'); require('./d'); require('./e.ts');\n",
    );
    write(
        d,
        "src/a.js",
        "import { Cron } from 'croner';\nnew Cron('0 0 L * *', { timezone: 'Asia/Seoul' }, () => {});\n",
    );
    write(
        d,
        "src/b.js",
        "const { CronJob } = require('cron');\nCronJob.from({ cronTime: '0 0 L * *', onTick() {}, timeZone: 'Europe/Berlin' });\n",
    );
    write(
        d,
        "src/c.js",
        "const schedule = require('node-schedule');\nschedule.scheduleJob({ rule: '0 0 L * *', tz: 'UTC' }, () => {});\n",
    );
    write(
        d,
        "src/d.js",
        "const cron = require('node-cron');\ncron.schedule('0 0 L * *', () => {}, { timezone: 'America/New_York' });\n",
    );
    write(
        d,
        "src/e.ts",
        "import { Cron, CronExpression, Interval } from '@nestjs/schedule';\nexport class Jobs {\n  @Cron(CronExpression.EVERY_HOUR, { timeZone: 'Asia/Tokyo' })\n  settle(): void {}\n  @Interval(5000)\n  poll(): void {}\n}\n",
    );
    let (_, v) = lint(d, &["."]);
    let bg106: Vec<&str> = of(&v, "BG106")
        .iter()
        .filter_map(|f| f["file"].as_str())
        .collect();
    assert_eq!(bg106, ["src/b.js", "src/c.js"], "{v}");
    let bg611 = of(&v, "BG611");
    let all: Vec<&str> = bg611.iter().map(|f| message(f)).collect();
    assert_eq!(bg611.len(), 6, "{all:#?}");
    for want in [
        "(croner, `0 0 L * *` in Asia/Seoul)",
        "(cron, `0 0 L * *` in Europe/Berlin)",
        "(node-schedule, `0 0 L * *` in UTC)",
        "(node-cron, `0 0 L * *` in America/New_York)",
        "(@nestjs/schedule, `0 0-23/1 * * *` in Asia/Tokyo)",
        "(@nestjs/schedule, every 5000 ms)",
    ] {
        assert!(
            all.iter().any(|m| m.contains(want)),
            "{want} not in {all:#?}"
        );
    }
}

#[test]
fn runners_multiply_and_the_largest_is_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    // TypeScript sources for a `dist/` entry, mapped by tsconfig.json.
    write(
        d,
        "tsconfig.json",
        "{\n  // build\n  \"compilerOptions\": { \"outDir\": \"dist\", \"rootDir\": \"src\", },\n}\n",
    );
    write(d, "src/server.ts", "import './jobs';\n");
    write(d, "src/jobs/index.ts", "export * from './settle';\n");
    write(
        d,
        "src/jobs/settle.ts",
        "import cron from 'node-cron';\nexport const job = cron.schedule('0 * * * *', async () => {});\n",
    );
    write(
        d,
        "deploy/api.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: api\n          command: [\"pm2-runtime\", \"ecosystem.config.js\"]\n",
    );
    write(
        d,
        "ecosystem.config.js",
        "module.exports = { apps: [{ name: 'api', script: 'dist/server.js', instances: 4, exec_mode: 'cluster' }] };\n",
    );
    write(
        d,
        "deploy/worker.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: worker\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n        - name: w\n          command: [\"node\", \"dist/server.js\"]\n",
    );
    let (_, v) = lint(d, &["."]);
    let f = of(&v, "BG611");
    assert_eq!(f.len(), 1, "{v}");
    let m = message(f[0]);
    // The app's 4 workers in each of 3 pods, or the worker Deployment's 2: the largest
    // is named. Container paths start from the app's folder, not from `deploy/`.
    assert!(m.contains("src/jobs/settle.ts:2"), "{m}");
    assert!(m.contains("12 processes"), "{m}");
    assert!(
        m.contains("in each of 3 processes of Deployment `api`"),
        "{m}"
    );
    assert!(m.contains("1 other runner"), "{m}");
}

#[test]
fn a_deployment_with_an_hpa_and_a_dockerfile_image() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    write(
        d,
        "Dockerfile",
        "FROM node:22\nWORKDIR /app\nCOPY . .\nCMD [\"node\", \"/app/server.js\"]\n",
    );
    write(
        d,
        "server.js",
        "const { Cron } = require('croner');\nCron('*/5 * * * *', () => {});\n",
    );
    write(
        d,
        "k8s.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n        - name: api\n          image: api:1\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: api\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}\n  minReplicas: 5\n  maxReplicas: 10\n",
    );
    let (_, v) = lint(d, &["."]);
    let f = of(&v, "BG611");
    assert_eq!(f.len(), 1, "{v}");
    let m = message(f[0]);
    assert!(m.contains("5 processes"), "{m}");
    assert!(
        m.contains("minReplicas 5") && m.contains("Dockerfile"),
        "{m}"
    );
}

#[test]
fn pm2_fork_mode_with_one_instance_is_not_replicated() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    write(
        dir.path(),
        "ecosystem.config.js",
        "module.exports = { apps: [{ name: 'api', script: 'src/index.js', exec_mode: 'fork' }] };\n",
    );
    let (exit, v) = lint(dir.path(), &["."]);
    assert!(of(&v, "BG611").is_empty(), "{v}");
    assert_eq!(exit, 0, "{v}");
}

#[test]
fn gates_are_bg612_and_guards_silence_both() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    write(d, "ecosystem.config.js", CLUSTER_OF_4);
    write(
        d,
        "src/index.js",
        "require('./primary'); require('./early'); require('./flag'); require('./guarded'); require('./coordinated');\n",
    );
    write(
        d,
        "src/primary.js",
        "const cluster = require('node:cluster');\nconst cron = require('node-cron');\nif (cluster.isPrimary) cron.schedule('0 1 * * *', () => {});\n",
    );
    write(
        d,
        "src/early.js",
        "const cron = require('node-cron');\nfunction start() {\n  if (process.env.pm_id !== '0') return;\n  cron.schedule('0 2 * * *', () => {});\n}\nstart();\n",
    );
    write(
        d,
        "src/flag.js",
        "import cron from 'node-cron';\nprocess.env.RUN_CRON && cron.schedule('0 3 * * *', () => {});\n",
    );
    write(
        d,
        "src/guarded.js",
        "import cron from 'node-cron';\nimport { guard } from 'batchguard';\nconst run = () => guard({ job: 'x' }, async () => {});\ncron.schedule('0 4 * * *', run);\n",
    );
    write(
        d,
        "src/coordinated.js",
        "import cron from 'node-cron';\ncron.schedule('0 5 * * *', () => {}, { distributed: true, coordinator: redisCoordinator });\ncron.schedule('0 6 * * *', () => {}, { distributed: true });\n",
    );
    let (_, v) = lint(d, &["."]);
    assert!(of(&v, "BG611").is_empty(), "{v}");
    let mut gated: Vec<&str> = of(&v, "BG612")
        .iter()
        .filter_map(|f| f["file"].as_str())
        .collect();
    gated.sort_unstable();
    assert_eq!(
        gated,
        [
            "src/coordinated.js",
            "src/early.js",
            "src/flag.js",
            "src/primary.js"
        ],
        "{v}"
    );
}

#[test]
fn non_static_schedules_are_kept_and_said() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    write(
        dir.path(),
        "src/jobs/settle.js",
        "const cron = require('node-cron');\ncron.schedule(process.env.SETTLE_CRON, () => {});\n",
    );
    let (_, v) = lint(dir.path(), &["."]);
    let f = of(&v, "BG611");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        message(f[0]).contains("schedule not static (`process.env.SETTLE_CRON`)"),
        "{}",
        message(f[0])
    );
}

#[test]
fn tests_comments_strings_and_other_modules_are_not_schedules() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    write(d, "ecosystem.config.js", CLUSTER_OF_4);
    write(
        d,
        "src/index.js",
        "// cron.schedule('0 * * * *', settle)\nconst note = \"cron.schedule('0 * * * *', settle)\";\nconst cron = require('./my-cron');\ncron.schedule('0 * * * *', () => {});\n",
    );
    write(d, "src/my-cron.js", "exports.schedule = () => {};\n");
    let settle = "const cron = require('node-cron');\ncron.schedule('0 * * * *', () => {});\n";
    write(d, "test/settle.js", settle);
    write(d, "src/settle.test.js", settle);
    write(d, "node_modules/x/index.js", settle);
    write(d, "dist/index.js", settle);
    let (exit, v) = lint(d, &["."]);
    assert_eq!(exit, 0, "{v}");
    assert_eq!(v["summary"]["registrations"], 0, "{v}");
    // Named on the command line, a test file is read.
    let (_, v) = lint(d, &["test/settle.js"]);
    assert_eq!(v["summary"]["registrations"], 1, "{v}");
}

#[test]
fn bounds_size_minified_syntax_errors_nesting_and_bytes() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let settle = "const cron = require('node-cron');\ncron.schedule('0 * * * *', () => {});\n";
    write(
        d,
        "big.js",
        format!("{settle}{}", "// pad\n".repeat(200_000)),
    );
    write(
        d,
        "bundle.js",
        format!("{settle}var a={};", "x".repeat(8000)).replace('\n', ";"),
    );
    write(d, "broken.js", format!("{settle}const = ;\n"));
    write(
        d,
        "deep.js",
        format!(
            "{settle}const x = {}1{};\n",
            "[\n".repeat(50_000),
            "]\n".repeat(50_000)
        ),
    );
    let mut latin1 = settle.as_bytes().to_vec();
    latin1.extend_from_slice(b"// caf\xe9\n");
    write(d, "latin1.js", latin1);
    write(d, "ok.js", settle);
    let (_, v) = lint(d, &["--list-files", "."]);
    let files = v["files"].as_array().expect("files");
    let entry = |name: &str| files.iter().find(|f| f["file"] == name).cloned();
    let reason = |name: &str| {
        entry(name)
            .and_then(|f| f["reason"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    assert!(reason("big.js").contains("over the 1 MiB limit"), "{v}");
    assert!(reason("bundle.js").contains("minified"), "{v}");
    let syntax = of(&v, "BG609");
    assert_eq!(syntax.len(), 1, "{v}");
    assert_eq!(syntax[0]["file"], "broken.js");
    assert_eq!(syntax[0]["line"], 3);
    let deep = of(&v, "BG006");
    assert_eq!(deep.len(), 1, "{v}");
    assert_eq!(deep[0]["file"], "deep.js");
    let latin = entry("latin1.js").expect("latin1 read");
    assert_eq!(latin["registrations"], 1, "{latin}");
    assert!(
        latin["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("UTF-8")),
        "{latin}"
    );
    // The other files are still read.
    assert_eq!(entry("ok.js").expect("ok")["registrations"], 1);
}

#[test]
fn an_in_process_schedule_and_a_crontab_line_running_its_module_are_one_job() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    write(
        dir.path(),
        "deploy/crontab",
        "0 * * * * cd /srv/app && node src/jobs/settle.js >> /var/log/settle.log 2>&1\n",
    );
    write(dir.path(), "package.json", "{\"name\": \"app\"}\n");
    let (_, v) = lint(dir.path(), &["."]);
    let f = of(&v, "BG601");
    assert_eq!(f.len(), 1, "{v}");
    let m = message(f[0]);
    assert!(
        m.contains("src/jobs/settle.js:5") && m.contains("crontab"),
        "{m}"
    );
}

#[test]
fn graph_shows_the_in_process_job_and_what_runs_it() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    let out = bg()
        .current_dir(dir.path())
        .args(["graph", "--format", "mermaid", "."])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("src/jobs/settle.js:5"), "{text}");
    assert!(
        text.contains("in 4 processes: PM2 app `api` in ecosystem.config.js"),
        "{text}"
    );
}

#[test]
fn a_javascript_comment_suppresses_bg611_with_a_reason() {
    let dir = tempfile::tempdir().expect("tmp");
    incident(dir.path());
    write(
        dir.path(),
        "src/jobs/settle.js",
        "const cron = require(\"node-cron\");\n// batchguard: allow BG611 -- settle is idempotent per invoice\ncron.schedule(\"0 * * * *\", () => {});\n",
    );
    let (exit, v) = lint(dir.path(), &["."]);
    assert_eq!(exit, 0, "{v}");
    assert!(of(&v, "BG611").is_empty(), "{v}");
    assert_eq!(v["summary"]["suppressed"], 1, "{v}");
}
