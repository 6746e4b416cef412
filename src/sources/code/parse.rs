//! One JavaScript or TypeScript file, parsed by oxc and visited twice: first what the
//! module binds (imports, `require`s, top-level constants and functions), then every call
//! and decorator, with the `if`s and early returns that gate it.

use super::{Call, Library, ModuleInfo};
use crate::text::{Span, Spanned};
use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_ast_visit::{Visit, walk};
use oxc_span::{GetSpan, SourceType};
use std::collections::HashMap;

/// What a local name is bound to: a package's module (`None`: the module itself, as a
/// default or namespace import or `require`) or one of its exports.
#[derive(Clone, Debug)]
struct Binding {
    package: String,
    export: Option<String>,
}

/// Parses `text` as the file at `path` says (`.ts`, `.tsx`, …) and reads its schedules.
/// Runs on its caller's stack: the caller grows it (deep nesting).
pub fn module(path: &std::path::Path, text: &str) -> ModuleInfo {
    let source_type = SourceType::from_path(path).unwrap_or_else(|_| SourceType::mjs());
    let allocator = Allocator::default();
    let ret = oxc_parser::Parser::new(&allocator, text, source_type).parse();
    let mut info = ModuleInfo::default();
    for d in ret.diagnostics.errors().take(1) {
        let span = d
            .labels
            .first()
            .map(|l| {
                let s = l.span();
                Span::new(s.start as usize, s.size() as usize)
            })
            .unwrap_or_default();
        info.syntax_error = Some((span, d.message.to_string()));
    }
    let mut binds = Binds {
        text,
        bindings: HashMap::new(),
        consts: HashMap::new(),
        functions: HashMap::new(),
        relative: Vec::new(),
        local_modules: HashMap::new(),
    };
    for stmt in &ret.program.body {
        binds.top_level(stmt);
    }
    binds.visit_program(&ret.program);
    let mut calls = Calls {
        binds: &binds,
        gates: Vec::new(),
        method: None,
        calls: Vec::new(),
        guard_calls: Vec::new(),
    };
    calls.visit_program(&ret.program);
    let guard_calls = std::mem::take(&mut calls.guard_calls);
    let mut found = std::mem::take(&mut calls.calls);
    for c in &mut found {
        let inside = |s: Span| {
            guard_calls
                .iter()
                .any(|g| g.start >= s.start && g.end() <= s.end())
        };
        c.guarded |= c.callback_spans.iter().any(|s| inside(*s));
    }
    info.calls = found;
    info.imports = binds.relative;
    info
}

struct Binds<'t> {
    text: &'t str,
    bindings: HashMap<String, Binding>,
    /// Top-level `const NAME = "literal"`.
    consts: HashMap<String, Spanned<String>>,
    /// Top-level functions and `const f = () => …`, by name: a callback named by its
    /// identifier is looked at where it is defined.
    functions: HashMap<String, Span>,
    /// Relative specifiers of `import`, `export … from`, `require()` and `import()`.
    relative: Vec<String>,
    /// Names bound from a relative module, and its specifier: a callback imported from
    /// `./jobs/settle` is that module's job.
    local_modules: HashMap<String, String>,
}

fn span_of(s: oxc_span::Span) -> Span {
    Span::new(s.start as usize, (s.end - s.start) as usize)
}

/// The string a literal or a template without holes holds.
fn literal(e: &Expression) -> Option<Spanned<String>> {
    match e.get_inner_expression() {
        Expression::StringLiteral(s) => Some(Spanned::new(s.value.to_string(), span_of(s.span))),
        Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
            let q = t.quasis.first()?;
            let v = q.value.cooked.as_ref().unwrap_or(&q.value.raw);
            Some(Spanned::new(v.to_string(), span_of(t.span)))
        }
        _ => None,
    }
}

/// `require("x")`'s specifier.
fn require_of<'a>(e: &'a Expression<'a>) -> Option<&'a str> {
    let Expression::CallExpression(c) = e.get_inner_expression() else {
        return None;
    };
    let Expression::Identifier(id) = &c.callee else {
        return None;
    };
    if id.name != "require" || c.arguments.len() != 1 {
        return None;
    }
    match c.arguments.first()?.as_expression()?.get_inner_expression() {
        Expression::StringLiteral(s) => Some(s.value.as_str()),
        _ => None,
    }
}

/// The packages whose calls are read, and batchguard's own guard.
fn watched(package: &str) -> bool {
    Library::of_package(package).is_some() || package == "batchguard"
}

impl Binds<'_> {
    fn note_specifier(&mut self, spec: &str) {
        if spec.starts_with("./") || spec.starts_with("../") || spec == "." || spec == ".." {
            self.relative.push(spec.to_owned());
        }
    }

    fn bind(&mut self, local: &str, package: &str, export: Option<&str>) {
        if package.starts_with('.') {
            self.local_modules
                .insert(local.to_owned(), package.to_owned());
        }
        if watched(package) {
            self.bindings.insert(
                local.to_owned(),
                Binding {
                    package: package.to_owned(),
                    export: export.map(str::to_owned),
                },
            );
        }
    }

    fn top_level(&mut self, stmt: &Statement) {
        let decl = match stmt {
            Statement::VariableDeclaration(d) => Some(&**d),
            Statement::ExportDeclaration(e) => match &e.declaration {
                Declaration::VariableDeclaration(d) => Some(&**d),
                Declaration::FunctionDeclaration(f) => {
                    if let Some(id) = &f.id {
                        self.functions.insert(id.name.to_string(), span_of(f.span));
                    }
                    None
                }
                _ => None,
            },
            Statement::FunctionDeclaration(f) => {
                if let Some(id) = &f.id {
                    self.functions.insert(id.name.to_string(), span_of(f.span));
                }
                None
            }
            _ => None,
        };
        let Some(decl) = decl else { return };
        for d in &decl.declarations {
            let (BindingPattern::BindingIdentifier(id), Some(init)) = (&d.id, &d.init) else {
                continue;
            };
            let name = id.name.to_string();
            if decl.kind == VariableDeclarationKind::Const
                && let Some(v) = literal(init)
            {
                self.consts.insert(name.clone(), v);
            }
            if matches!(
                init.get_inner_expression(),
                Expression::ArrowFunctionExpression(_)
                    | Expression::FunctionExpression(_)
                    | Expression::CallExpression(_)
            ) {
                self.functions.insert(name, span_of(d.span));
            }
        }
    }
}

impl<'a> Visit<'a> for Binds<'_> {
    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        let package = it.source.value.as_str();
        self.note_specifier(package);
        for s in it.specifiers.iter().flatten() {
            match s {
                ImportDeclarationSpecifier::ImportSpecifier(s) => {
                    let export = s.imported.name();
                    self.bind(s.local.name.as_str(), package, Some(export.as_str()));
                }
                ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                    self.bind(s.local.name.as_str(), package, None);
                }
                ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                    self.bind(s.local.name.as_str(), package, None);
                }
            }
        }
    }

    fn visit_export_from_declaration(&mut self, it: &ExportFromDeclaration<'a>) {
        self.note_specifier(it.source.value.as_str());
    }

    fn visit_export_all_declaration(&mut self, it: &ExportAllDeclaration<'a>) {
        self.note_specifier(it.source.value.as_str());
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        if let Expression::StringLiteral(s) = it.source.get_inner_expression() {
            self.note_specifier(s.value.as_str());
        }
        walk::walk_import_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if let Expression::Identifier(id) = &it.callee
            && id.name == "require"
            && let Some(Expression::StringLiteral(s)) =
                it.arguments.first().and_then(|a| a.as_expression())
        {
            self.note_specifier(s.value.as_str());
        }
        walk::walk_call_expression(self, it);
    }

    fn visit_variable_declarator(&mut self, it: &VariableDeclarator<'a>) {
        if let Some(init) = &it.init
            && let Some(package) = require_of(init)
        {
            let package = package.to_owned();
            match &it.id {
                BindingPattern::BindingIdentifier(id) => {
                    self.bind(id.name.as_str(), &package, None)
                }
                BindingPattern::ObjectPattern(obj) => {
                    for p in &obj.properties {
                        let Some(key) = p.key.static_name() else {
                            continue;
                        };
                        if let BindingPattern::BindingIdentifier(local) = &p.value {
                            self.bind(local.name.as_str(), &package, Some(&key));
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(init) = &it.init
            && let Expression::StaticMemberExpression(m) = init.get_inner_expression()
            && let Some(package) = require_of(&m.object)
            && let BindingPattern::BindingIdentifier(id) = &it.id
        {
            // `const CronJob = require("cron").CronJob`
            let package = package.to_owned();
            self.bind(id.name.as_str(), &package, Some(m.property.name.as_str()));
        }
        walk::walk_variable_declarator(self, it);
    }
}

/// Finds the calls, with the gates around each.
struct Calls<'b, 't> {
    binds: &'b Binds<'t>,
    /// Conditions in force: what the code is gated on, innermost last.
    gates: Vec<(Span, String)>,
    /// The method whose decorators are being read (a NestJS handler).
    method: Option<Span>,
    calls: Vec<Call>,
    /// Calls of batchguard's `guard`/`guarded`.
    guard_calls: Vec<Span>,
}

/// What an `if` test (or the left of `&&`) gates on, when it singles out one instance:
/// `NODE_APP_INSTANCE`, `pm_id`, `cluster.isPrimary`/`isMaster`, or an env flag.
fn gate_of(test: &Expression, text: &str) -> Option<String> {
    struct Find {
        found: Vec<String>,
    }
    impl<'a> Visit<'a> for Find {
        fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
            let prop = it.property.name.as_str();
            if let Expression::StaticMemberExpression(o) = &it.object
                && o.property.name == "env"
                && matches!(&o.object, Expression::Identifier(p) if p.name == "process")
            {
                self.found.push(format!("env {prop}"));
            }
            if matches!(
                prop,
                "isPrimary" | "isMaster" | "pm_id" | "NODE_APP_INSTANCE"
            ) {
                self.found.push(prop.to_owned());
            }
            walk::walk_static_member_expression(self, it);
        }
        fn visit_computed_member_expression(&mut self, it: &ComputedMemberExpression<'a>) {
            if let Expression::StaticMemberExpression(o) = &it.object
                && o.property.name == "env"
                && let Expression::StringLiteral(s) = &it.expression
            {
                self.found.push(format!("env {}", s.value));
            }
            walk::walk_computed_member_expression(self, it);
        }
        fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
            if matches!(it.name.as_str(), "isPrimary" | "isMaster") {
                self.found.push(it.name.to_string());
            }
        }
    }
    let mut f = Find { found: Vec::new() };
    f.visit_expression(test);
    let pick = |k: &str| f.found.iter().any(|x| x == k || x == &format!("env {k}"));
    let what = if pick("NODE_APP_INSTANCE") {
        "on one PM2 instance (`NODE_APP_INSTANCE`)".to_owned()
    } else if pick("pm_id") {
        "on one PM2 process (`pm_id`)".to_owned()
    } else if pick("isPrimary") || pick("isMaster") {
        "on the cluster's primary process (`cluster.isPrimary`)".to_owned()
    } else if let Some(env) = f.found.iter().find_map(|x| x.strip_prefix("env ")) {
        format!("where the env flag `{env}` says so")
    } else {
        return None;
    };
    let shown = text
        .get(test.span().start as usize..test.span().end as usize)
        .unwrap_or("");
    Some(format!("{what}, gated by `{}`", shorten(shown)))
}

fn shorten(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 60 {
        format!("{}…", one.chars().take(60).collect::<String>())
    } else {
        one
    }
}

/// A statement that leaves the function or the process: `return`, `throw`, `process.exit()`.
fn exits(stmt: &Statement) -> bool {
    match stmt {
        Statement::ReturnStatement(_) | Statement::ThrowStatement(_) => true,
        Statement::BlockStatement(b) => b.body.last().is_some_and(exits),
        Statement::ExpressionStatement(e) => matches!(
            &e.expression,
            Expression::CallExpression(c) if matches!(&c.callee,
                Expression::StaticMemberExpression(m) if m.property.name == "exit")
        ),
        _ => false,
    }
}

/// The nearest dialect's NestJS `CronExpression` members (`@nestjs/schedule` 6).
fn nest_expression(member: &str) -> Option<&'static str> {
    super::nest::expression(member)
}

impl Calls<'_, '_> {
    /// The package and export a callee names: `cron.schedule` -> (node-cron, schedule).
    fn target(&self, callee: &Expression) -> Option<(String, String)> {
        match callee.get_inner_expression() {
            Expression::Identifier(id) => {
                let b = self.binds.bindings.get(id.name.as_str())?;
                Some((
                    b.package.clone(),
                    b.export.clone().unwrap_or_else(|| "default".into()),
                ))
            }
            Expression::StaticMemberExpression(m) => {
                let prop = m.property.name.to_string();
                match m.object.get_inner_expression() {
                    Expression::Identifier(id) => {
                        let b = self.binds.bindings.get(id.name.as_str())?;
                        Some(match &b.export {
                            // `CronJob.from(…)`
                            Some(export) => (b.package.clone(), format!("{export}.{prop}")),
                            None => (b.package.clone(), prop),
                        })
                    }
                    // `require("node-cron").schedule(…)`
                    e @ Expression::CallExpression(_) => Some((require_of(e)?.to_owned(), prop)),
                    // `cron.CronJob.from(…)`
                    Expression::StaticMemberExpression(inner) => {
                        let Expression::Identifier(id) = inner.object.get_inner_expression() else {
                            return None;
                        };
                        let b = self.binds.bindings.get(id.name.as_str())?;
                        b.export
                            .is_none()
                            .then(|| (b.package.clone(), format!("{}.{prop}", inner.property.name)))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The expression's value: a literal, a template without holes, a `const` of this
    /// module, or a NestJS `CronExpression` member.
    fn value(&self, e: &Expression) -> Result<Spanned<String>, String> {
        if let Some(v) = literal(e) {
            return Ok(v);
        }
        let at = span_of(e.span());
        match e.get_inner_expression() {
            Expression::Identifier(id) => {
                if let Some(v) = self.binds.consts.get(id.name.as_str()) {
                    return Ok(Spanned::new(v.value.clone(), at));
                }
            }
            Expression::StaticMemberExpression(m) => {
                if let Expression::Identifier(o) = &m.object
                    && o.name == "CronExpression"
                    && let Some(v) = nest_expression(m.property.name.as_str())
                {
                    return Ok(Spanned::new(v.to_owned(), at));
                }
            }
            _ => {}
        }
        let shown = self.binds.text.get(at.start..at.end()).unwrap_or("");
        Err(shorten(shown))
    }

    /// `key` of an object literal argument.
    fn option<'e>(obj: Option<&'e Expression<'e>>, key: &str) -> Option<&'e Expression<'e>> {
        let Expression::ObjectExpression(o) = obj?.get_inner_expression() else {
            return None;
        };
        o.properties.iter().find_map(|p| match p {
            ObjectPropertyKind::ObjectProperty(p)
                if p.key.static_name().as_deref() == Some(key) =>
            {
                Some(&p.value)
            }
            _ => None,
        })
    }

    /// Where a callback's code is: the argument, and the function it names.
    fn callback_spans(&self, cb: Option<&Expression>) -> (Vec<Span>, Option<String>) {
        let Some(cb) = cb else {
            return (Vec::new(), None);
        };
        let mut spans = vec![span_of(cb.span())];
        let mut named = None;
        if let Expression::Identifier(id) = cb.get_inner_expression() {
            if let Some(s) = self.binds.functions.get(id.name.as_str()) {
                spans.push(*s);
            }
            named = Some(id.name.to_string());
        }
        (spans, named)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        library: Library,
        span: Span,
        what: String,
        expr: Option<&Expression>,
        zone: Option<&Expression>,
        cb: Option<&Expression>,
        options: Option<&Expression>,
    ) {
        let (schedule, not_static) = match expr.map(|e| self.value(e)) {
            Some(Ok(v)) => (Some(v), None),
            Some(Err(shown)) => (None, Some(shown)),
            None => (None, Some("no expression".to_owned())),
        };
        let zone = zone.and_then(|z| self.value(z).ok());
        let (mut callback_spans, callback) = self.callback_spans(cb);
        let callback_module = callback
            .as_ref()
            .and_then(|c| self.binds.local_modules.get(c).cloned());
        if let Some(m) = self.method {
            callback_spans.push(m);
        }
        let mut gate = self.gates.last().cloned();
        let mut guarded = false;
        // node-cron 4: `{ distributed: true, coordinator }` runs each tick on one instance
        // when the coordinator is a shared store; without one, on one process only.
        if let Some(d) = Self::option(options, "distributed")
            && !matches!(d.get_inner_expression(), Expression::BooleanLiteral(b) if !b.value)
        {
            if Self::option(options, "coordinator").is_some() {
                guarded = true;
            } else if gate.is_none() {
                gate = Some((
                    span_of(d.span()),
                    "on one process: node-cron's `distributed` without a shared coordinator"
                        .to_owned(),
                ));
            }
        }
        self.calls.push(Call {
            library,
            span,
            what,
            schedule,
            not_static,
            zone,
            guarded,
            gate,
            callback_spans,
            callback,
            callback_module,
            interval: None,
        });
    }

    fn on_call(&mut self, span: Span, callee: &Expression, args: &[Argument], is_new: bool) {
        let Some((package, export)) = self.target(callee) else {
            return;
        };
        let arg = |i: usize| args.get(i).and_then(|a| a.as_expression());
        let shown = |s: &str| format!("{}{s}(…)", if is_new { "new " } else { "" });
        let callee_text = self
            .binds
            .text
            .get(callee.span().start as usize..callee.span().end as usize)
            .unwrap_or(&export)
            .to_owned();
        match (package.as_str(), export.as_str()) {
            ("batchguard", "guard" | "guarded") => self.guard_calls.push(span),
            ("node-cron", "schedule" | "createTask") => {
                let opts = arg(2);
                self.record(
                    Library::NodeCron,
                    span,
                    shown(&callee_text),
                    arg(0),
                    Self::option(opts, "timezone"),
                    arg(1),
                    opts,
                );
            }
            ("croner", "Cron" | "default") => {
                let opts = arg(1).filter(|e| {
                    matches!(e.get_inner_expression(), Expression::ObjectExpression(_))
                });
                let cb = if opts.is_some() { arg(2) } else { arg(1) };
                self.record(
                    Library::Croner,
                    span,
                    shown(&callee_text),
                    arg(0),
                    Self::option(opts, "timezone"),
                    cb,
                    opts,
                );
            }
            ("cron", "CronJob") if is_new => {
                self.record(
                    Library::Cron,
                    span,
                    shown(&callee_text),
                    arg(0),
                    arg(4),
                    arg(1),
                    None,
                );
            }
            ("cron", "CronJob.from") => {
                let o = arg(0);
                self.record(
                    Library::Cron,
                    span,
                    shown(&callee_text),
                    Self::option(o, "cronTime"),
                    Self::option(o, "timeZone"),
                    Self::option(o, "onTick"),
                    None,
                );
            }
            ("node-schedule", "scheduleJob") => {
                // `scheduleJob(name, spec, fn)` names the job first.
                let (spec, cb) = if args.len() >= 3 {
                    (arg(1), arg(2))
                } else {
                    (arg(0), arg(1))
                };
                let (expr, zone) = match spec.map(|s| s.get_inner_expression()) {
                    Some(Expression::ObjectExpression(_)) => {
                        (Self::option(spec, "rule"), Self::option(spec, "tz"))
                    }
                    _ => (spec, None),
                };
                self.record(
                    Library::NodeSchedule,
                    span,
                    shown(&callee_text),
                    expr,
                    zone,
                    cb,
                    None,
                );
            }
            ("@nestjs/schedule", "Cron") => {
                let opts = arg(1);
                self.record(
                    Library::Nest,
                    span,
                    format!("@{callee_text}(…)"),
                    arg(0),
                    Self::option(opts, "timeZone"),
                    None,
                    None,
                );
            }
            ("@nestjs/schedule", "Interval") => {
                let ms = if args.len() >= 2 { arg(1) } else { arg(0) };
                let shown_ms = ms
                    .and_then(|e| {
                        self.binds
                            .text
                            .get(e.span().start as usize..e.span().end as usize)
                    })
                    .unwrap_or("?")
                    .to_owned();
                self.record(
                    Library::Nest,
                    span,
                    format!("@{callee_text}(…)"),
                    None,
                    None,
                    None,
                    None,
                );
                if let Some(c) = self.calls.last_mut() {
                    c.not_static = None;
                    c.interval = Some(shown_ms);
                }
            }
            _ => {}
        }
    }
}

impl<'a> Visit<'a> for Calls<'_, '_> {
    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        self.on_call(span_of(it.span), &it.callee, &it.arguments, false);
        walk::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        self.on_call(span_of(it.span), &it.callee, &it.arguments, true);
        walk::walk_new_expression(self, it);
    }

    fn visit_method_definition(&mut self, it: &MethodDefinition<'a>) {
        let outer = self.method.replace(span_of(it.span));
        walk::walk_method_definition(self, it);
        self.method = outer;
    }

    fn visit_if_statement(&mut self, it: &IfStatement<'a>) {
        self.visit_expression(&it.test);
        let gate = gate_of(&it.test, self.binds.text);
        if let Some(g) = &gate {
            self.gates.push((span_of(it.test.span()), g.clone()));
        }
        self.visit_statement(&it.consequent);
        if gate.is_some() {
            self.gates.pop();
        }
        if let Some(alt) = &it.alternate {
            self.visit_statement(alt);
        }
    }

    fn visit_logical_expression(&mut self, it: &LogicalExpression<'a>) {
        self.visit_expression(&it.left);
        let gate = (it.operator == LogicalOperator::And)
            .then(|| gate_of(&it.left, self.binds.text))
            .flatten();
        if let Some(g) = &gate {
            self.gates.push((span_of(it.left.span()), g.clone()));
        }
        self.visit_expression(&it.right);
        if gate.is_some() {
            self.gates.pop();
        }
    }

    fn visit_conditional_expression(&mut self, it: &ConditionalExpression<'a>) {
        self.visit_expression(&it.test);
        let gate = gate_of(&it.test, self.binds.text);
        if let Some(g) = &gate {
            self.gates.push((span_of(it.test.span()), g.clone()));
        }
        self.visit_expression(&it.consequent);
        if gate.is_some() {
            self.gates.pop();
        }
        self.visit_expression(&it.alternate);
    }

    fn visit_statements(&mut self, it: &oxc_allocator::Vec<'a, Statement<'a>>) {
        // `if (process.env.NODE_APP_INSTANCE !== "0") return;` gates what follows it.
        let depth = self.gates.len();
        for stmt in it {
            self.visit_statement(stmt);
            if let Statement::IfStatement(s) = stmt
                && s.alternate.is_none()
                && exits(&s.consequent)
                && let Some(g) = gate_of(&s.test, self.binds.text)
            {
                self.gates.push((span_of(s.test.span()), g));
            }
        }
        self.gates.truncate(depth);
    }
}

/// `compilerOptions.outDir` and `rootDir` of a `tsconfig.json`, which is JSON with
/// comments and trailing commas: read as a JavaScript expression.
pub fn tsconfig_dirs(text: &str) -> (Option<String>, Option<String>) {
    let allocator = Allocator::default();
    let wrapped = format!("({text}\n)");
    let Ok(expr) =
        oxc_parser::Parser::new(&allocator, &wrapped, SourceType::cjs()).parse_expression()
    else {
        return (None, None);
    };
    let options = Calls::option(Some(&expr), "compilerOptions");
    let dir = |key| {
        Calls::option(options, key)
            .and_then(literal)
            .map(|s| s.value)
    };
    (dir("outDir"), dir("rootDir"))
}
