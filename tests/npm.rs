//! The npm package's own suite (`npm/test/*.test.mjs`, Node's test runner) as part of
//! `cargo test`, so the README's one test command runs everything: `npm/pack.sh` builds the
//! release binary and both tarballs, `npm ci` installs the tests' tools from their committed
//! lockfile (pm2, node-cron, croner, typescript), and `node --test` runs the package as
//! installed, `guard()` against that binary, and the example app under a real PM2 cluster on
//! PostgreSQL and Redis. Fails when node or npm is missing under `CI=true`; skips with a
//! message elsewhere.

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn step(what: &str, cmd: &mut Command) {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed ({:?})\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_npm_package_passes_its_node_test_suite() {
    if !have("node") || !have("npm") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "node and npm are required in CI (.ci/run installs Debian's nodejs and npm)"
        );
        eprintln!("skipped: node or npm is not installed");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The binary this `cargo test` built, packed and tested as it is: a cargo inside this
    // one would wait for the build directory's lock, which the outer cargo holds. The Node
    // tests find it where `pack.sh` would have built it (`$CARGO_TARGET_DIR/release/`).
    let bin = env!("CARGO_BIN_EXE_batchguard");
    let target = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(target.path().join("release")).expect("mkdir");
    std::os::unix::fs::symlink(bin, target.path().join("release/batchguard")).expect("symlink");
    step(
        "npm/pack.sh",
        Command::new("bash")
            .arg("npm/pack.sh")
            .env("BATCHGUARD_PACK_BINARY", bin)
            .current_dir(root),
    );
    step(
        "npm ci of the test tools",
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(root.join("npm/test/tools")),
    );
    let mut tests: Vec<String> = std::fs::read_dir(root.join("npm/test"))
        .expect("npm/test")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.mjs"))
        .map(|p| p.display().to_string())
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no npm/test/*.test.mjs");
    step(
        "node --test npm/test/*.test.mjs",
        Command::new("node")
            .arg("--test")
            .args(&tests)
            .env("CARGO_TARGET_DIR", target.path())
            .env_remove("BATCHGUARD_BINARY")
            .current_dir(root),
    );
}
