//! The import graph keeps its shape (STYLE.md, docs/architecture.md): data flows one way,
//! leaves <- models <- analyses <- guard <- reports <- commands <- main. Every top-level
//! module of `src/` may use only the modules listed for it here; a `crate::X` path in a
//! module that may not use X fails this test with the file that has it. Adding a module
//! means adding its row, which is the moment to decide where it sits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module -> the crate modules it may use. `commands` and `main` sit on top and may use
/// anything; `lib` only declares modules and chains the registry.
const ALLOWED: &[(&str, &[&str])] = &[
    // Leaves: the shared vocabulary and the services with no domain in them.
    ("text", &[]),
    ("finding", &["text"]),
    ("process", &[]),
    ("db", &[]),
    // Models: sources -> model.
    ("schedule", &["text"]),
    ("manifest", &["schedule", "text"]),
    ("config", &["finding", "manifest", "text"]),
    ("snapshot", &["text"]),
    ("sources", &["manifest", "process", "schedule", "text"]),
    ("ledger", &["db", "schedule", "text"]),
    (
        "project",
        &["db", "finding", "manifest", "schedule", "sources", "text"],
    ),
    // Analyses: never each other, a store, the guard or a report.
    (
        "lint",
        &[
            "config",
            "declare_rule",
            "finding",
            "manifest",
            "project",
            "schedule",
            "sources",
            "text",
        ],
    ),
    (
        "audit",
        &[
            "config",
            "declare_check",
            "finding",
            "ledger",
            "manifest",
            "schedule",
            "snapshot",
            "text",
        ],
    ),
    // The guard and its store.
    ("store", &["db", "ledger", "text"]),
    // Check-ins and spans: what `run` tells monitors and collectors.
    ("notify", &["manifest", "store"]),
    (
        "guard",
        &[
            "config", "db", "manifest", "notify", "process", "schedule", "snapshot", "store",
            "text",
        ],
    ),
    // The drill: real `run` processes in sandboxes, judged by what the sandbox holds.
    (
        "drill",
        &[
            "db", "guard", "ledger", "manifest", "process", "snapshot", "store", "text",
        ],
    ),
    // Live views: the ledger followed as it grows, judged by the audit, with the store's
    // leases (watch, metrics).
    (
        "live",
        &[
            "audit", "config", "db", "ledger", "manifest", "store", "text",
        ],
    ),
    // Views of the model and the analyses.
    ("slots", &["manifest", "schedule", "text"]),
    ("schema", &["config", "ledger", "manifest"]),
    ("graph", &["lint", "project", "text"]),
    (
        "init",
        &["config", "lint", "manifest", "project", "sources", "text"],
    ),
    (
        "report",
        &[
            "audit", "drill", "finding", "lint", "live", "manifest", "project", "sources", "text",
        ],
    ),
    ("cli", &["ledger", "manifest"]),
];

/// On top: may use every module.
const TOP: &[&str] = &["commands", "main", "lib"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `crate::NAME` paths in the code (comments dropped), lower-case names only (modules and
/// exported macros, not `crate::REGISTRY`).
fn used_modules(text: &str, own: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                .collect();
            if !name.is_empty() && name != own {
                out.insert(name);
            }
            rest = after;
        }
    }
    out
}

#[test]
fn imports_run_one_way() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix("src").expect("under src");
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        let module = first.trim_end_matches(".rs").to_owned();
        if TOP.contains(&module.as_str()) {
            continue;
        }
        let Some(may) = allowed.get(module.as_str()) else {
            wrong.push(format!(
                "src/{}: module `{module}` has no row in tests/architecture.rs",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("readable");
        for used in used_modules(&text, &module) {
            if !may.contains(used.as_str()) {
                wrong.push(format!(
                    "src/{}: `{module}` uses `crate::{used}`, which it may not",
                    rel.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "backward imports:\n{}", wrong.join("\n"));
}

#[test]
fn the_table_names_real_modules() {
    for (m, deps) in ALLOWED {
        for name in std::iter::once(m).chain(deps.iter()) {
            let macro_name = name.starts_with("declare_");
            let exists = Path::new("src").join(format!("{name}.rs")).exists()
                || Path::new("src").join(name).is_dir();
            assert!(
                exists || macro_name,
                "`{name}` in tests/architecture.rs is no module of src/"
            );
        }
    }
}

/// The public surface is the re-export list in `src/lib.rs`: a `pub mod` there would
/// publish a whole module again, and the compiler would stop reporting its dead code.
#[test]
fn every_module_is_crate_private() {
    let lib = std::fs::read_to_string("src/lib.rs").expect("src/lib.rs");
    let public: Vec<&str> = lib
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("pub mod ") || l.starts_with("pub(crate) mod ")
        })
        .collect();
    assert!(
        public.is_empty(),
        "src/lib.rs: declare modules with `mod` and re-export what is public: {public:?}"
    );
    assert!(
        lib.contains("\nmod lint;\n"),
        "src/lib.rs declares its modules"
    );
}
