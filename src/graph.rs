//! `batchguard graph`: the picture behind the cross-file rules. Jobs grouped by service,
//! `depends_on` edges (job -> the job it waits for), the registrations of each job, and
//! what is wrong highlighted in red: duplicated jobs (BG601) and the edges of cycles
//! (BG702). Registrations with no manifest job are drawn in a "no manifest" group. A job
//! registered in several places that one shared store guards (every place a `batchguard
//! run` on it) is drawn plainly, with the store it is guarded by.
//! Rendered as Graphviz DOT or Mermaid; the same [`Analysis`] as `lint` draws it.

use crate::lint::LintRun;
use crate::project::Analysis;
use crate::project::Dep;
use crate::project::Group;
use crate::project::Place;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Dot,
    Mermaid,
}

/// One box of the picture: a manifest job, or a job known only from registrations.
struct Node {
    id: String,
    title: String,
    lines: Vec<String>,
    duplicate: bool,
}

struct Picture {
    /// Service (or "" for no manifest) -> nodes in path order.
    groups: BTreeMap<String, Vec<Node>>,
    /// (from, to, in a cycle)
    edges: Vec<(String, String, bool)>,
    unknown: Vec<(String, String)>,
}

/// A place and where it is; a registration also shows its command as its source writes
/// it (secrets masked), so spellings that are one command can be seen side by side.
fn place_line(a: &Analysis, p: Place) -> String {
    let line = format!("{} - {}", a.describe(p), a.where_(p)).replace('`', "");
    match (p, a.command_text(p)) {
        (Place::Reg(_), Some(cmd)) => format!("{line}: {cmd}"),
        _ => line,
    }
}

fn regs_of(g: &Group) -> impl Iterator<Item = Place> + '_ {
    g.places
        .iter()
        .copied()
        .filter(|p| matches!(p, Place::Reg(_)))
}

/// What a group registered in several places is: a duplicate (BG601), or the HA pattern
/// guarded by one shared store.
fn dup_line(g: &Group) -> Option<String> {
    if !g.duplicate {
        return None;
    }
    Some(match &g.guarded {
        Some(store) => format!(
            "{} registrations, {}",
            crate::project::registrations(&g.places),
            crate::project::guard_note(store)
        ),
        None => format!(
            "DUPLICATE: registered in {} places{}",
            g.duplicated.len(),
            g.tie
                .as_ref()
                .map(|t| format!(" (deploy units tied by {})", t.replace('`', "")))
                .unwrap_or_default()
        ),
    })
}

fn picture(a: &Analysis) -> Picture {
    let mut pic = Picture {
        groups: BTreeMap::new(),
        edges: Vec::new(),
        unknown: Vec::new(),
    };
    let mut jobs: Vec<usize> = (0..a.project.jobs.len()).collect();
    jobs.sort_by_key(|&j| {
        let at = a.location(Place::Job(j));
        (a.display(at.file).to_owned(), at.span.start)
    });
    for j in jobs {
        let job = &a.project.jobs[j];
        let g = a
            .group_of
            .get(&Place::Job(j))
            .and_then(|&g| a.groups.get(g));
        let mut lines = Vec::new();
        if let Some(s) = &job.schedule {
            lines.push(format!("{} ({}, {})", s.value, job.dialect, job.zone()));
        }
        lines.push(format!("declared {}", a.where_(Place::Job(j))));
        let duplicate = g.is_some_and(|g| g.duplicate && g.guarded.is_none());
        if let Some(g) = g {
            lines.extend(regs_of(g).map(|p| place_line(a, p)));
            lines.extend(dup_line(g));
        }
        pic.groups
            .entry(job.service.clone())
            .or_default()
            .push(Node {
                id: format!("j{j}"),
                title: job.name.clone(),
                lines,
                duplicate,
            });
    }
    for (gi, g) in a.groups.iter().enumerate() {
        if g.places.iter().any(|p| matches!(p, Place::Job(_))) {
            continue;
        }
        let Some(&first) = g.places.first() else {
            continue;
        };
        let mut lines: Vec<String> = Vec::new();
        if let Place::Reg(r) = first {
            let reg = &a.project.regs[r];
            if let Some(s) = &reg.schedule {
                lines.push(format!("{} ({}, {})", s.value, reg.dialect, reg.zone()));
            }
        }
        lines.extend(g.places.iter().map(|p| place_line(a, *p)));
        // An in-process schedule: what runs its module, and how many processes fire it.
        for p in &g.places {
            if let Place::Reg(r) = p
                && let Some(code) = a.project.regs[*r].code.as_deref()
                && let Some(runner) = &code.runner
            {
                lines.push(format!(
                    "in {} process{}: {runner}",
                    a.project.regs[*r].instances,
                    if a.project.regs[*r].instances == 1 {
                        ""
                    } else {
                        "es"
                    }
                ));
            }
        }
        lines.extend(dup_line(g));
        let title = match first {
            Place::Reg(r) => a.project.regs[r].label.replace('`', ""),
            Place::Job(j) => a.project.jobs[j].name.clone(),
        };
        pic.groups.entry(String::new()).or_default().push(Node {
            id: format!("g{gi}"),
            title,
            lines,
            duplicate: g.duplicate && g.guarded.is_none(),
        });
    }
    let cycle_edges: HashSet<(usize, usize)> = a
        .cycles
        .iter()
        .flat_map(|c| (0..c.len()).map(move |i| (c[i], c[(i + 1) % c.len()])))
        .collect();
    for (j, deps) in a.deps.iter().enumerate() {
        for (d, dep) in a.project.jobs[j].depends_on.iter().zip(deps) {
            match dep {
                Dep::Resolved(t) => pic.edges.push((
                    format!("j{j}"),
                    format!("j{t}"),
                    cycle_edges.contains(&(j, *t)),
                )),
                _ => pic.unknown.push((format!("j{j}"), d.value.clone())),
            }
        }
    }
    pic
}

fn dot_str(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn mermaid_str(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

fn dot(pic: &Picture) -> String {
    let mut s = String::from(
        "digraph batchguard {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n",
    );
    for (i, (service, nodes)) in pic.groups.iter().enumerate() {
        let label = if service.is_empty() {
            "(no manifest)"
        } else {
            service
        };
        let _ = writeln!(
            s,
            "  subgraph cluster_{i} {{\n    label=\"{}\";",
            dot_str(label)
        );
        for n in nodes {
            let mut label = dot_str(&n.title);
            for l in &n.lines {
                label.push_str("\\n");
                label.push_str(&dot_str(l));
            }
            let style = if n.duplicate {
                ", color=red, fontcolor=red, penwidth=2"
            } else {
                ""
            };
            let _ = writeln!(s, "    {} [label=\"{label}\"{style}];", n.id);
        }
        s.push_str("  }\n");
    }
    for (from, to, cycle) in &pic.edges {
        let style = if *cycle {
            " [label=\"depends on (cycle)\", color=red, fontcolor=red, penwidth=2]"
        } else {
            " [label=\"depends on\"]"
        };
        let _ = writeln!(s, "  {from} -> {to}{style};");
    }
    for (i, (from, name)) in pic.unknown.iter().enumerate() {
        let _ = writeln!(
            s,
            "  unknown{i} [label=\"{} (unknown)\", style=dashed, color=red];\n  {from} -> unknown{i} [style=dashed, color=red];",
            dot_str(name)
        );
    }
    s.push_str("}\n");
    s
}

fn mermaid(pic: &Picture) -> String {
    let mut s = String::from("flowchart LR\n");
    let mut dup = Vec::new();
    for (i, (service, nodes)) in pic.groups.iter().enumerate() {
        let label = if service.is_empty() {
            "(no manifest)"
        } else {
            service
        };
        let _ = writeln!(s, "  subgraph s{i}[\"{}\"]", mermaid_str(label));
        for n in nodes {
            let mut label = mermaid_str(&n.title);
            for l in &n.lines {
                label.push_str("<br/>");
                label.push_str(&mermaid_str(l));
            }
            let _ = writeln!(s, "    {}[\"{label}\"]", n.id);
            if n.duplicate {
                dup.push(n.id.clone());
            }
        }
        s.push_str("  end\n");
    }
    let mut red_links = Vec::new();
    let mut link = 0;
    for (from, to, cycle) in &pic.edges {
        let label = if *cycle {
            "depends on (cycle)"
        } else {
            "depends on"
        };
        let _ = writeln!(s, "  {from} -->|{label}| {to}");
        if *cycle {
            red_links.push(link.to_string());
        }
        link += 1;
    }
    for (i, (from, name)) in pic.unknown.iter().enumerate() {
        let _ = writeln!(
            s,
            "  unknown{i}[\"{} (unknown)\"]\n  {from} -.->|depends on| unknown{i}",
            mermaid_str(name)
        );
        dup.push(format!("unknown{i}"));
        red_links.push(link.to_string());
        link += 1;
    }
    s.push_str("  classDef problem stroke:#d00,stroke-width:3px,color:#d00;\n");
    if !dup.is_empty() {
        let _ = writeln!(s, "  class {} problem;", dup.join(","));
    }
    if !red_links.is_empty() {
        let _ = writeln!(
            s,
            "  linkStyle {} stroke:#d00,stroke-width:3px;",
            red_links.join(",")
        );
    }
    s
}

/// Renders the graph of a lint run's files.
pub fn render(run: &LintRun, now: jiff::Timestamp, format: Format) -> String {
    let analysis = Analysis::new(&run.project, &run.files, now);
    let mut pic = picture(&analysis);
    // Jobs that run at boot (`@reboot`): no schedule, nothing to compare, but listed where
    // they are, with the file's runner.
    for (i, (file, read)) in run.files.iter().zip(&run.read).enumerate() {
        for (k, label) in read.boot.iter().enumerate() {
            let mut lines = vec![format!("at boot, no schedule - {}", file.display)];
            lines.extend(
                read.notes
                    .iter()
                    .filter(|n| n.starts_with("run by "))
                    .cloned(),
            );
            pic.groups.entry(String::new()).or_default().push(Node {
                id: format!("b{i}_{k}"),
                title: label.clone(),
                lines,
                duplicate: false,
            });
        }
    }
    // Whatever a label quotes, no secret BG801 masked is drawn.
    let secrets = crate::text::Secrets::new(&run.files);
    for n in pic.groups.values_mut().flatten() {
        n.title = secrets.redact(&n.title);
        for l in &mut n.lines {
            *l = secrets.redact(l);
        }
    }
    match format {
        Format::Dot => dot(&pic),
        Format::Mermaid => mermaid(&pic),
    }
}
