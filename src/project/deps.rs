//! The `depends_on` graph (SPEC 3.5 "Dependencies"): edges resolved to jobs, and cycles.

use super::{Analysis, Dep, Place};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

impl Analysis<'_> {
    pub(super) fn build_graph(&mut self) {
        let jobs = &self.project.jobs;
        let keys = self.by_key();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            by_name.entry(j.name.as_str()).or_default().push(i);
        }
        let names: Vec<&str> = keys.keys().map(String::as_str).collect();
        self.deps = jobs
            .iter()
            .map(|job| {
                job.depends_on
                    .iter()
                    .map(|d| {
                        let want = d.value.as_str();
                        if want.contains('/') {
                            return match keys.get(want).and_then(|v| v.first()) {
                                Some(&j) => Dep::Resolved(j),
                                None => Dep::Unknown {
                                    suggestion: crate::text::closest(want, &names)
                                        .map(str::to_owned),
                                },
                            };
                        }
                        if let Some(&j) = keys
                            .get(&format!("{}/{want}", job.service))
                            .and_then(|v| v.first())
                        {
                            return Dep::Resolved(j);
                        }
                        match by_name.get(want).map(Vec::as_slice) {
                            Some([j]) => Dep::Resolved(*j),
                            Some(many) if !many.is_empty() => {
                                let mut c: Vec<String> =
                                    many.iter().map(|&j| jobs[j].key()).collect();
                                c.sort();
                                c.dedup();
                                if c.len() == 1 {
                                    Dep::Resolved(many[0])
                                } else {
                                    Dep::Ambiguous(c)
                                }
                            }
                            _ => {
                                let local: Vec<&str> = jobs
                                    .iter()
                                    .filter(|j| j.service == job.service)
                                    .map(|j| j.name.as_str())
                                    .collect();
                                Dep::Unknown {
                                    suggestion: crate::text::closest(want, &local)
                                        .map(str::to_owned),
                                }
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let nodes: Vec<NodeIndex> = (0..jobs.len()).map(|j| g.add_node(j)).collect();
        for (j, deps) in self.deps.iter().enumerate() {
            for d in deps {
                if let Dep::Resolved(t) = d {
                    g.update_edge(nodes[j], nodes[*t], ());
                }
            }
        }
        for scc in petgraph::algo::tarjan_scc(&g) {
            let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
            if scc.len() < 2 && !self_loop {
                continue;
            }
            let members: Vec<usize> = scc.iter().map(|n| g[*n]).collect();
            let Some(&start) = members.iter().min_by(|a, b| {
                self.order_key(Place::Job(**a))
                    .cmp(&self.order_key(Place::Job(**b)))
            }) else {
                continue;
            };
            self.cycles.push(self.cycle_from(start, &members));
        }
        let mut cycles = std::mem::take(&mut self.cycles);
        cycles.sort_by(|a, b| {
            self.order_key(Place::Job(a[0]))
                .cmp(&self.order_key(Place::Job(b[0])))
        });
        self.cycles = cycles;
    }

    /// A shortest cycle through `start` inside the strongly connected `members`.
    fn cycle_from(&self, start: usize, members: &[usize]) -> Vec<usize> {
        let members: std::collections::HashSet<usize> = members.iter().copied().collect();
        let inside = |j: usize| members.contains(&j);
        let succ = |j: usize| -> Vec<usize> {
            self.deps[j]
                .iter()
                .filter_map(|d| match d {
                    Dep::Resolved(t) if inside(*t) => Some(*t),
                    _ => None,
                })
                .collect()
        };
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(j) = queue.pop_front() {
            for t in succ(j) {
                if t == start {
                    let mut path = vec![j];
                    let mut cur = j;
                    while cur != start {
                        cur = parent.get(&cur).copied().unwrap_or(start);
                        path.push(cur);
                    }
                    path.reverse();
                    return path;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(t) {
                    e.insert(j);
                    queue.push_back(t);
                }
            }
        }
        vec![start]
    }
}
