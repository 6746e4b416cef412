use crate::declare_rule;
use crate::finding::Location;
use crate::lint::cross::CrossEmitter;
use crate::lint::rule::Rule;
use crate::project::Analysis;
use crate::project::Dep;

declare_rule! {
    /// ## What it does
    /// Resolves every `depends_on` entry across all manifests read: `service/name` exactly;
    /// a bare `name` within the same service first, then to the one job of that name in
    /// any service. A name no manifest declares, or a bare name that several other
    /// services declare (the message lists the candidates), is reported.
    ///
    /// ## Why it matters
    /// A dependency that points nowhere is never waited for: the job runs on input that
    /// was not prepared, and the source article's "did we do the work exactly once" cannot
    /// be answered for either job.
    ///
    /// ## Example
    /// ```yaml
    /// depends_on: [import-bank-statement]   # the job is import-bank-statements
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// depends_on: [import-bank-statements]
    /// ```
    pub struct UnknownDependency {
        code: "BG701",
        name: "unknown-dependency",
        severity: Error,
        scope: Project,
        summary: "`depends_on` names a job that exists nowhere",
        help: "name an existing job as `name` (same service) or `service/name`",
    }
}

impl Rule for UnknownDependency {
    fn check_project(&self, cx: &Analysis, out: &mut CrossEmitter) {
        for (j, deps) in cx.deps.iter().enumerate() {
            let job = &cx.project.jobs[j];
            for (d, dep) in job.depends_on.iter().zip(deps) {
                let (message, help) = match dep {
                    Dep::Resolved(_) => continue,
                    Dep::Unknown { suggestion } => (
                        format!(
                            "job `{}` depends on `{}`, which no manifest declares",
                            job.key(),
                            d.value
                        ),
                        match suggestion {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => Self::META.help.to_owned(),
                        },
                    ),
                    Dep::Ambiguous(c) => (
                        format!(
                            "job `{}` depends on `{}`, which several services declare: {}",
                            job.key(),
                            d.value,
                            c.join(", ")
                        ),
                        format!("write the one you mean as `service/name`, e.g. `{}`", c[0]),
                    ),
                };
                out.emit(
                    Location {
                        file: job.file,
                        span: d.span,
                    },
                    Some(job.service.clone()),
                    Some(job.name.clone()),
                    message,
                    help,
                    Vec::new(),
                );
            }
        }
    }
}
