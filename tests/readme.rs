//! The README's rule list is the registry's, and its test command is what CI runs.

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let a = text
        .find(start)
        .map(|i| i + start.len())
        .expect("start marker");
    let b = a + text[a..].find(end).expect("end marker");
    text[a..b].trim_start_matches('\n')
}

#[test]
fn readme_rule_list_matches_registry() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let listed = between(&readme, "<!-- rules:start -->", "<!-- rules:end -->");
    assert_eq!(
        listed,
        batchguard::rules_markdown(),
        "README rule list is stale: paste `cargo run -q -- rules --format markdown` between the markers"
    );
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let ci = std::fs::read_to_string(".ci/run").expect(".ci/run");
    let first_block = between(&readme, "```sh\n", "```");
    let test_cmd = first_block
        .lines()
        .nth(1)
        .and_then(|l| l.split('#').next())
        .map(str::trim)
        .expect("second line of the first block is the test command");
    assert!(ci.contains(test_cmd), ".ci/run must run `{test_cmd}`");
}
