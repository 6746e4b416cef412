use crate::declare_rule;
use crate::finding::Location;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Dep;

declare_rule! {
    /// ## What it does
    /// Finds jobs that depend on each other in a cycle (through `depends_on`, across
    /// services and files) and lists the cycle: `a -> b -> c -> a`. One finding per cycle,
    /// at the `depends_on` entry of its first job in path order, with every other entry of
    /// the cycle labelled.
    ///
    /// ## Why it matters
    /// A cycle has no first job: each waits for another, so either nothing runs or the
    /// order is whatever the scheduler happens to do, and a replay after an incident (the
    /// source article's quarterly rehearsal) cannot follow a defined order.
    ///
    /// ## Example
    /// ```yaml
    /// - name: settle
    ///   depends_on: [import]
    /// - name: import
    ///   depends_on: [settle]
    /// ```
    ///
    /// Use instead: remove one edge so the jobs form an order.
    pub struct DependencyCycle {
        code: "BG702",
        name: "dependency-cycle",
        severity: Error,
        scope: Project,
        summary: "jobs depend on each other in a cycle; the message lists the cycle",
        help: "remove one `depends_on` entry of the cycle so the jobs have an order",
    }
}

/// Where job `j` names job `t` in its `depends_on`.
fn edge_at(cx: &Analysis, j: usize, t: usize) -> Location {
    let job = &cx.project.jobs[j];
    let span = job
        .depends_on
        .iter()
        .zip(&cx.deps[j])
        .find(|(_, d)| matches!(d, Dep::Resolved(x) if *x == t))
        .map_or(job.span, |(d, _)| d.span);
    Location {
        file: job.file,
        span,
    }
}

impl Rule for DependencyCycle {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for cycle in &cx.cycles {
            let Some(&first) = cycle.first() else {
                continue;
            };
            let next = |i: usize| cycle[(i + 1) % cycle.len()];
            let mut names: Vec<String> = cycle.iter().map(|&j| cx.project.jobs[j].key()).collect();
            names.push(cx.project.jobs[first].key());
            let job = &cx.project.jobs[first];
            out.emit(
                edge_at(cx, first, next(0)),
                Some(job.service.clone()),
                Some(job.name.clone()),
                format!("dependency cycle: {}", names.join(" -> ")),
                Self::META.help.to_owned(),
                (1..cycle.len())
                    .map(|i| {
                        (
                            edge_at(cx, cycle[i], next(i)),
                            format!(
                                "`{}` depends on `{}`",
                                cx.project.jobs[cycle[i]].key(),
                                cx.project.jobs[next(i)].key()
                            ),
                        )
                    })
                    .collect(),
            );
        }
    }
}
