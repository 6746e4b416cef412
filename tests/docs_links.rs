//! Every relative link of the README and the manual (`docs/**/*.md`) resolves: its file
//! exists, and its `#anchor` is the GitHub slug of a heading of the page it names. No
//! network: links with a scheme (`https:`, `mailto:`) are not followed.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// README.md and every Markdown file under docs/, as paths relative to the repository.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read docs/")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![PathBuf::from("README.md")];
    walk(Path::new("docs"), &mut out);
    out
}

/// GitHub's anchor for a heading's text: lower case, every character but letters, digits,
/// `_`, `-` and spaces dropped, spaces made hyphens.
fn slug(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

struct Page {
    /// Every anchor of the page, repeated headings numbered `-1`, `-2` as GitHub does.
    anchors: BTreeSet<String>,
    /// Every link target with the line it is on.
    links: Vec<(usize, String)>,
}

fn read(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).expect("read page");
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut links = Vec::new();
    let mut heading: Option<String> = None;
    for (event, range) in Parser::new_ext(&text, Options::all()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                anchors.insert(if *n == 0 { base } else { format!("{base}-{n}") });
                *n += 1;
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push((line_of(range.start), dest_url.to_string()));
            }
            _ => {}
        }
    }
    Page { anchors, links }
}

/// `base/rel` with `.` and `..` folded, relative to the repository.
fn resolve(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                assert!(
                    out.pop(),
                    "{rel} from {} leaves the repository",
                    base.display()
                );
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every broken link of the README and the manual, as `page:line: target: why`.
fn broken_links() -> Vec<String> {
    let pages = pages();
    let mut cache: BTreeMap<PathBuf, Page> = BTreeMap::new();
    for p in &pages {
        cache.insert(p.clone(), read(p));
    }
    let mut broken = Vec::new();
    for p in &pages {
        let dir = p.parent().unwrap_or(Path::new(""));
        for (line, target) in cache[p].links.clone() {
            let at = format!("{}:{line}: {target}", p.display());
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if file.is_empty() {
                p.clone()
            } else {
                resolve(dir, file)
            };
            if !file.exists() {
                broken.push(format!("{at}: {} does not exist", file.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if file.extension().is_none_or(|e| e != "md") {
                broken.push(format!("{at}: an anchor into a file that is not Markdown"));
                continue;
            }
            let target_page = cache.entry(file.clone()).or_insert_with(|| read(&file));
            if !target_page.anchors.contains(anchor) {
                broken.push(format!(
                    "{at}: no heading of {} has the anchor #{anchor}",
                    file.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let broken = broken_links();
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The checker itself: GitHub's slugs, and a broken file and anchor are both caught.
#[test]
fn the_checker_sees_slugs_files_and_anchors() {
    assert_eq!(
        slug("What was read: --list-files"),
        "what-was-read---list-files"
    );
    assert_eq!(
        slug("Refusing a stale holder's writes (Node.js)"),
        "refusing-a-stale-holders-writes-nodejs"
    );
    assert_eq!(
        slug("Drill records and AU301: has recovery been rehearsed this quarter?"),
        "drill-records-and-au301-has-recovery-been-rehearsed-this-quarter"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("p.md");
    std::fs::write(
        &page,
        "# Title\n\n## Same\n\n## Same\n\n[a](#same-1) [b](#nope) [c](https://example.com/x#y)\n",
    )
    .expect("write");
    let p = read(&page);
    assert!(
        p.anchors.contains("title") && p.anchors.contains("same") && p.anchors.contains("same-1")
    );
    assert_eq!(
        p.links.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
        ["#same-1", "#nope", "https://example.com/x#y"]
    );
    assert_eq!(
        resolve(Path::new("docs/commands"), "../../examples/x.json"),
        PathBuf::from("examples/x.json")
    );
}
