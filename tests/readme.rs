//! The README is the landing page and `docs/` the manual: the rule list of `docs/rules.md` is
//! the registry's, the README's first two commands are the demo and what CI runs, and every
//! command `batchguard --help` lists has an example in the README and a page of its own.

mod common;

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let a = text
        .find(start)
        .map(|i| i + start.len())
        .expect("start marker");
    let b = a + text[a..].find(end).expect("end marker");
    text[a..b].trim_start_matches('\n')
}

fn readme() -> String {
    std::fs::read_to_string("README.md").expect("README.md")
}

#[test]
fn docs_rule_list_matches_registry() {
    let page = std::fs::read_to_string("docs/rules.md").expect("docs/rules.md");
    let listed = between(&page, "<!-- rules:start -->", "<!-- rules:end -->");
    assert_eq!(
        listed,
        batchguard::rules_markdown(),
        "docs/rules.md rule list is stale: run scripts/readme-rules.sh (or paste `cargo run -q -- rules --format markdown` between the markers)"
    );
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = readme();
    let ci = std::fs::read_to_string(".ci/run").expect(".ci/run");
    let first_block = between(&readme, "```sh\n", "```");
    let mut lines = first_block
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim());
    let demo = lines.next().expect("first line of the first block");
    assert_eq!(demo, "./scripts/demo.sh", "the README starts with the demo");
    assert!(
        std::path::Path::new("scripts/demo.sh").is_file(),
        "scripts/demo.sh exists"
    );
    let test_cmd = lines
        .next()
        .expect("second line of the first block is the test command");
    assert_eq!(test_cmd, "cargo test --locked");
    assert!(ci.contains(test_cmd), ".ci/run must run `{test_cmd}`");
}

/// The landing page stays short: what the tool is, install, one example per command, links.
#[test]
fn readme_is_a_landing_page_with_an_example_and_a_page_per_command() {
    let readme = readme();
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: the manual belongs in docs/, the README under 250"
    );
    assert!(
        readme.contains("](docs/README.md)"),
        "README links the manual's index"
    );

    let help = common::bg().arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = between(&help, "Commands:\n", "\n\n")
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(
        commands.len() >= 10,
        "commands read from --help: {commands:?}"
    );

    let examples: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .flat_map(str::lines)
        .map(|l| l.trim_start_matches("npx ").trim())
        .collect();
    let index = std::fs::read_to_string("docs/README.md").expect("docs/README.md");
    for c in commands {
        let page = format!("docs/commands/{c}.md");
        assert!(
            std::path::Path::new(&page).is_file(),
            "`batchguard {c}` has no page {page}"
        );
        assert!(
            readme.contains(&format!("]({page})")),
            "the README does not link {page}"
        );
        assert!(
            index.contains(&format!("](commands/{c}.md)")),
            "docs/README.md does not link commands/{c}.md"
        );
        let call = format!("batchguard {c} ");
        assert!(
            examples
                .iter()
                .any(|l| l.starts_with(&call) || *l == call.trim_end()),
            "the README has no example of `batchguard {c}` in a ```sh block"
        );
    }
}
