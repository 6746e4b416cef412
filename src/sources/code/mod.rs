//! Application code as a registration source (SPEC 3.7): the schedules a Node.js app
//! registers when it starts (`cron.schedule("0 * * * *", settle)`), and the processes
//! that run them.
//!
//! Each JavaScript/TypeScript file is parsed by oxc (`parse.rs`) on a stack of its own
//! (deep nesting cannot overflow the caller's), and its calls are found by what the module
//! imports: a `schedule` of a module that does not import node-cron is not a schedule.
//! Which process runs a call is decided after every file is read (`link.rs`): the entry
//! files of PM2 apps, `package.json`, Dockerfiles and Kubernetes Deployments
//! (`runners.rs`), followed through relative imports, their instance counts multiplied
//! when one runner starts another.
//!
//! | room | holds |
//! |---|---|
//! | `mod.rs` | which files are code, the bounds, one file -> its [`Read`] |
//! | `parse.rs` | the oxc visitor: bindings, calls, gates, guards |
//! | `nest.rs` | `@nestjs/schedule`'s `CronExpression` values |
//! | `runners.rs` | PM2 apps, `package.json`, Dockerfiles, Deployments -> [`Runner`]s |
//! | `link.rs` | modules, imports and runners -> each call's instances and runner |

pub mod lifetime;
mod link;
mod nest;
mod parse;
pub mod runners;

pub use link::{Module, link};
pub use runners::Runner;

use super::{Problem, Read, Registration, SourceKind};
use crate::manifest::Issue;
use crate::schedule::Dialect;
use crate::text::{Span, Spanned};
use std::path::Path;

/// Files over this size are not parsed: application modules are far smaller, and what is
/// larger is generated (bundles, vendored libraries).
pub const MAX_CODE_BYTES: usize = 1024 * 1024;

/// Bracket nesting deeper than this is refused before parsing (BG006): no hand-written
/// module comes near it, and the parser recurses once per level. Generous, because the
/// count is a pre-scan that does not know regular expressions (`/[(]/` opens a level
/// that never closes); the parse stack below holds this depth with room.
pub const MAX_NESTING: usize = 10_000;

/// The stack a file is parsed and visited on (grown on the heap by `stacker`).
const PARSE_STACK: usize = 256 * 1024 * 1024;

/// The scheduling libraries read (SPEC 3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Library {
    NodeCron,
    Croner,
    Cron,
    NodeSchedule,
    Nest,
}

impl Library {
    pub fn of_package(package: &str) -> Option<Self> {
        Some(match package {
            "node-cron" => Library::NodeCron,
            "croner" => Library::Croner,
            "cron" => Library::Cron,
            "node-schedule" => Library::NodeSchedule,
            "@nestjs/schedule" => Library::Nest,
            _ => return None,
        })
    }

    pub fn package(self) -> &'static str {
        match self {
            Library::NodeCron => "node-cron",
            Library::Croner => "croner",
            Library::Cron => "cron",
            Library::NodeSchedule => "node-schedule",
            Library::Nest => "@nestjs/schedule",
        }
    }

    /// SPEC 3.7: each library's expressions in its own dialect. node-schedule's
    /// cron-parser is read as `cron-npm`, the nearest (docs/decisions.md says where they
    /// differ).
    pub fn dialect(self) -> Dialect {
        match self {
            Library::NodeCron => Dialect::NodeCron,
            Library::Croner => Dialect::Croner,
            Library::Cron | Library::Nest | Library::NodeSchedule => Dialect::CronNpm,
        }
    }
}

/// One schedule call (or decorator) found in a module.
#[derive(Clone, Debug)]
pub struct Call {
    pub library: Library,
    /// The call expression, or the decorator.
    pub span: Span,
    /// How the call is written: `cron.schedule(…)`, `new CronJob(…)`, `@Cron(…)`.
    pub what: String,
    pub schedule: Option<Spanned<String>>,
    /// The expression as written when it is not static.
    pub not_static: Option<String>,
    pub zone: Option<Spanned<String>>,
    /// The callback runs under batchguard's guard, or node-cron's coordinator with a store.
    pub guarded: bool,
    /// What the call is gated on, and where.
    pub gate: Option<(Span, String)>,
    /// Where the callback's code is (the argument; the function it names; the method).
    pub callback_spans: Vec<Span>,
    /// The callback's identifier, when it is one.
    pub callback: Option<String>,
    /// The relative module the callback is imported from.
    pub callback_module: Option<String>,
    /// `@Interval(ms)`: the interval as written.
    pub interval: Option<String>,
}

/// What a module gives the linking step.
#[derive(Clone, Debug, Default)]
pub struct ModuleInfo {
    pub calls: Vec<Call>,
    /// Relative specifiers it imports, requires or re-exports.
    pub imports: Vec<String>,
    pub syntax_error: Option<(Span, String)>,
}

/// What an in-process registration carries besides the common fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeFields {
    pub library: &'static str,
    /// `cron.schedule(…)`, `@Cron(…)`.
    pub call: String,
    pub guarded: bool,
    pub gate: Option<Spanned<String>>,
    /// The schedule as written when it is not static.
    pub not_static: Option<String>,
    /// `@Interval(ms)`.
    pub interval: Option<String>,
    /// What starts the module, with its instances (filled when linking), and how many
    /// other runners start it too.
    pub runner: Option<String>,
    pub other_runners: usize,
    /// The relative module the callback is imported from (its job's module, SPEC 3.7).
    pub callback_module: Option<String>,
}

/// A JavaScript or TypeScript file by its extension.
pub fn is_code_path(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx")
    ) && !path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".d.ts") || n.ends_with(".d.mts") || n.ends_with(".d.cts"))
}

/// Folders whose code is not the app's own (dependencies, build output, tests): skipped
/// while walking unless the walk starts inside one.
pub const SKIPPED_DIRS: [&str; 11] = [
    "node_modules",
    "dist",
    "build",
    "out",
    "coverage",
    "test",
    "tests",
    "__tests__",
    "__mocks__",
    "spec",
    "e2e",
];

/// A test file by its name (`x.test.ts`, `x.spec.js`).
pub fn is_test_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.contains(".test.") || name.contains(".spec.")
}

/// Why a code file is not parsed: over the size limit, or a minified bundle.
pub fn skip_reason(path: &Path, bytes: &[u8]) -> Option<String> {
    if bytes.len() > MAX_CODE_BYTES {
        return Some(format!(
            "code file of {} bytes, over the {} MiB limit for application code: skipped",
            bytes.len(),
            MAX_CODE_BYTES / 1024 / 1024
        ));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.contains(".min.") || minified(bytes) {
        return Some("minified bundle: skipped (its sources are read instead)".into());
    }
    None
}

/// Minified code: long lines on average (over 1,000 bytes per line in a file of 4 KiB or more).
fn minified(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(256 * 1024)];
    if head.len() < 4096 {
        return false;
    }
    let lines = head.iter().filter(|&&b| b == b'\n').count() + 1;
    head.len() / lines > 1000
}

/// The deepest bracket nesting outside strings and comments, and where it passes
/// [`MAX_NESTING`]. Written by hand: it must run before (instead of) the parser.
fn too_deep(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            q @ (b'"' | b'\'' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q && !(q != b'`' && b[i] == b'\n') {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Reads one code file: its schedules as registrations (instances 1 and no runner until
/// [`link`]), its relative imports.
pub fn read(path: &Path, bytes: &[u8]) -> Read {
    let mut out = Read::default();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.to_owned(),
        Err(e) => {
            out.notes.push(format!(
                "not UTF-8 (byte {}): read with U+FFFD for each bad byte, as node does",
                e.valid_up_to()
            ));
            String::from_utf8_lossy(bytes).into_owned()
        }
    };
    if let Some(at) = too_deep(&text) {
        out.problems.push(Problem {
            issue: Issue::InputLimit,
            span: Span::new(at, 1),
            message: format!(
                "brackets nest deeper than {MAX_NESTING} levels here: the file was not parsed"
            ),
            help: "generated code is not read; point lint at the sources it is built from".into(),
        });
        out.text = text;
        return out;
    }
    let info = stacker::grow(PARSE_STACK, || parse::module(path, &text));
    if let Some((span, message)) = &info.syntax_error {
        out.problems.push(Problem {
            issue: Issue::SourceNotRead,
            span: *span,
            message: format!(
                "JavaScript/TypeScript syntax error: {message}; schedules after it may be missed"
            ),
            help: "fix the syntax error (node would refuse the file too)".into(),
        });
    }
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("module")
        .to_owned();
    for c in &info.calls {
        out.registrations.push(registration(c, &stem));
    }
    out.imports = info.imports;
    out.text = text;
    out
}

fn registration(c: &Call, stem: &str) -> Registration {
    let name = c.callback.clone().unwrap_or_else(|| stem.to_owned());
    Registration {
        kind: SourceKind::Code,
        file: 0,
        span: c.span,
        label: format!("{} `{name}`", c.library.package()),
        schedule: c.schedule.clone(),
        timezone: c.zone.clone(),
        dialect: c.library.dialect(),
        command: Vec::new(),
        command_span: c.span,
        instances: 1,
        code: Some(Box::new(CodeFields {
            library: c.library.package(),
            call: c.what.clone(),
            guarded: c.guarded,
            gate: c.gate.as_ref().map(|(s, w)| Spanned::new(w.clone(), *s)),
            not_static: c.not_static.clone(),
            interval: c.interval.clone(),
            runner: None,
            other_runners: 0,
            callback_module: c.callback_module.clone(),
        })),
        ..Registration::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_js(src: &str) -> Read {
        read(Path::new("a.ts"), src.as_bytes())
    }

    #[test]
    fn calls_are_found_by_their_import() {
        let r = read_js(
            "import cron from 'node-cron';\nconst x = { schedule() {} };\nx.schedule('0 * * * *', f);\ncron.schedule('0 * * * *', () => settle());\n",
        );
        assert_eq!(r.registrations.len(), 1);
        assert_eq!(
            r.registrations[0]
                .schedule
                .as_ref()
                .map(|s| s.value.as_str()),
            Some("0 * * * *")
        );
    }

    #[test]
    fn strings_and_comments_are_not_calls() {
        let r = read_js(
            "const cron = require('node-cron');\n// cron.schedule('0 * * * *', f)\nconst s = \"cron.schedule('0 * * * *', f)\";\n",
        );
        assert!(r.registrations.is_empty());
    }

    #[test]
    fn consts_templates_and_dynamic_expressions() {
        let r = read_js(
            "import { CronJob } from 'cron';\nconst EVERY = '0 3 * * *';\nnew CronJob(EVERY, f, null, true, 'Asia/Seoul');\nnew CronJob(`*/5 * * * *`, f);\nnew CronJob(process.env.CRON, f);\n",
        );
        let s: Vec<_> = r
            .registrations
            .iter()
            .map(|r| r.schedule.as_ref().map(|s| s.value.clone()))
            .collect();
        assert_eq!(
            s,
            [Some("0 3 * * *".into()), Some("*/5 * * * *".into()), None]
        );
        assert_eq!(r.registrations[0].zone(), "Asia/Seoul");
        let code = r.registrations[2].code.as_ref().expect("code");
        assert_eq!(code.not_static.as_deref(), Some("process.env.CRON"));
    }

    #[test]
    fn gates_and_guards() {
        let r = read_js(
            "import cron from 'node-cron';\nimport { guarded } from 'batchguard';\nif (process.env.NODE_APP_INSTANCE === '0') { cron.schedule('0 * * * *', a); }\ncron.schedule('0 * * * *', guarded({ job: 'b' }, b));\n",
        );
        let c0 = r.registrations[0].code.as_ref().expect("code");
        assert!(c0.gate.is_some() && !c0.guarded);
        let c1 = r.registrations[1].code.as_ref().expect("code");
        assert!(c1.gate.is_none() && c1.guarded);
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let src = format!("const x = {}1{};", "[".repeat(200_000), "]".repeat(200_000));
        let r = read_js(&src);
        assert_eq!(r.problems[0].issue, Issue::InputLimit);
        // Unary chains have no brackets: the grown stack takes them.
        let src = format!("const y = {}1;", "!".repeat(100_000));
        let r = read_js(&src);
        assert!(r.registrations.is_empty());
        // Just under the limit, the parse fits its stack.
        let n = MAX_NESTING - 1;
        let src = format!(
            "import cron from 'node-cron';\nconst x = {}1{};\ncron.schedule('0 * * * *', f);",
            "(".repeat(n),
            ")".repeat(n)
        );
        let r = read_js(&src);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 1);
    }

    #[test]
    fn a_syntax_error_is_located() {
        let r =
            read_js("import cron from 'node-cron';\ncron.schedule('0 * * * *', f);\nconst = ;\n");
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].issue, Issue::SourceNotRead);
        assert!(r.problems[0].span.start > 40, "{:?}", r.problems[0]);
    }
}
