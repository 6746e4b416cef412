//! Registrations tied to manifest jobs (SPEC 3.5 "Ties").

use super::Analysis;
use std::collections::HashMap;

impl Analysis<'_> {
    pub(super) fn by_key(&self) -> HashMap<String, Vec<usize>> {
        let mut m: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            m.entry(j.key()).or_default().push(i);
        }
        m
    }

    pub(super) fn resolve_ties(&mut self) {
        let keys = self.by_key();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            by_name.entry(j.name.as_str()).or_default().push(i);
        }
        self.ties = self
            .project
            .regs
            .iter()
            .map(|r| {
                let tie = r.tie.as_ref()?;
                if let Some(svc) = &tie.service {
                    return keys.get(&format!("{svc}/{}", tie.job))?.first().copied();
                }
                let cands = by_name.get(tie.job.as_str())?;
                if cands.len() == 1 {
                    return cands.first().copied();
                }
                // `--manifest PATH` picks among services by the manifest's file name.
                let m = tie.manifest.as_deref()?;
                let base = m.rsplit('/').next().unwrap_or(m);
                let hits: Vec<usize> = cands
                    .iter()
                    .copied()
                    .filter(|&j| {
                        self.files
                            .get(self.project.jobs[j].file)
                            .is_some_and(|f| f.display.ends_with(base))
                    })
                    .collect();
                (hits.len() == 1).then(|| hits[0])
            })
            .collect();
    }
}
