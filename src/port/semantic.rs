//! Qualified-name resolution: which import a name in the source stands for.
//!
//! One pass over the module builds the scopes (module, class, function, lambda, comprehension)
//! and their bindings: imports (`import torch as T`, `from torch.cuda import amp`, also inside
//! functions), assignments, parameters, loop/with/except targets, `global`/`nonlocal`. Then
//! [`Semantic::qualified_name`] turns `T.cuda.synchronize` or `cuda.synchronize` into
//! `torch.cuda.synchronize`, and gives nothing for a local or parameter named `cuda`.
//!
//! Resolution follows Python's rules: a name bound anywhere in a function is local to the whole
//! function; class scopes are invisible to nested functions; at module level the binding in
//! force is the last one before the use. `x = None` (the `except ImportError:` idiom) does not
//! hide an import of the same name.

use std::collections::HashMap;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

pub type ScopeId = usize;
pub const MODULE_SCOPE: ScopeId = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    Comprehension,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingKind {
    /// An import: the qualified name it binds (`import torch.distributed as dist` → `torch.distributed`).
    Import { qualified: String },
    /// Any other binding (assignment, parameter, def, class, loop target, ...).
    Other,
    /// `name = None`: does not hide an earlier import of the same name.
    Weak,
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub name: String,
    pub kind: BindingKind,
    /// Where the binding takes effect (for imports: the alias).
    pub range: TextRange,
    /// For imports: the whole import statement.
    pub stmt: Option<TextRange>,
    pub scope: ScopeId,
}

#[derive(Debug)]
pub struct Scope {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// The source span whose names resolve in this scope first.
    pub span: TextRange,
    names: HashMap<String, Vec<usize>>,
    globals: Vec<String>,
    nonlocals: Vec<String>,
}

/// The scopes and bindings of one module.
pub struct Semantic {
    pub scopes: Vec<Scope>,
    pub bindings: Vec<Binding>,
    /// Every name that is read, with the binding it resolves to (if any).
    pub loads: Vec<(TextRange, Option<usize>)>,
}

impl Semantic {
    pub fn build(module: &ast::ModModule) -> Semantic {
        let mut c = Collector {
            scopes: vec![Scope {
                kind: ScopeKind::Module,
                parent: None,
                span: module.range(),
                names: HashMap::new(),
                globals: vec![],
                nonlocals: vec![],
            }],
            bindings: vec![],
            current: MODULE_SCOPE,
            loads: vec![],
            weak_assign: false,
            stmt: None,
        };
        c.visit_body(&module.body);
        let loads_raw = std::mem::take(&mut c.loads);
        let mut sem = Semantic {
            scopes: c.scopes,
            bindings: c.bindings,
            loads: Vec::with_capacity(loads_raw.len()),
        };
        for (range, name, scope) in loads_raw {
            let b = sem.lookup(scope, &name, range.start());
            sem.loads.push((range, b));
        }
        sem
    }

    /// The innermost scope whose span contains `pos`.
    pub fn scope_at(&self, pos: TextSize) -> ScopeId {
        let mut best = MODULE_SCOPE;
        // Scopes are created in source order and nest, so the last containing one is innermost.
        for (id, s) in self.scopes.iter().enumerate().skip(1) {
            if s.span.start() <= pos && pos < s.span.end().max(s.span.start() + TextSize::from(1)) {
                best = id;
            }
        }
        best
    }

    /// The binding `name` refers to when read at `pos`.
    pub fn resolve(&self, name: &str, pos: TextSize) -> Option<&Binding> {
        self.lookup(self.scope_at(pos), name, pos)
            .map(|i| &self.bindings[i])
    }

    fn lookup(&self, scope: ScopeId, name: &str, pos: TextSize) -> Option<usize> {
        let mut id = scope;
        let mut nested = false;
        loop {
            let s = &self.scopes[id];
            if s.globals.iter().any(|g| g == name) {
                return self.pick(MODULE_SCOPE, name, pos, true);
            }
            let skip_class = s.kind == ScopeKind::Class && nested;
            if !skip_class
                && !s.nonlocals.iter().any(|g| g == name)
                && let Some(b) = self.pick(id, name, pos, nested)
            {
                return Some(b);
            }
            match s.parent {
                Some(p) => {
                    if s.kind != ScopeKind::Comprehension {
                        // Function and class bodies run later (or, for classes, see the
                        // module as it is then): treat the outer scope as "nested" lookup.
                        nested = nested || s.kind == ScopeKind::Function;
                    }
                    id = p;
                }
                None => return None,
            }
        }
    }

    fn pick(&self, scope: ScopeId, name: &str, pos: TextSize, nested: bool) -> Option<usize> {
        let ids = self.scopes[scope].names.get(name)?;
        let strong = |i: &&usize| self.bindings[**i].kind != BindingKind::Weak;
        let chosen = if nested {
            // Deferred code sees the module as it ends up.
            ids.iter().rev().find(strong).or(ids.last())
        } else {
            let before: Vec<&usize> = ids
                .iter()
                .filter(|i| self.bindings[**i].range.start() <= pos)
                .collect();
            if before.is_empty() {
                ids.first()
            } else {
                before
                    .iter()
                    .rev()
                    .find(|i| strong(i))
                    .copied()
                    .or(before.last().copied())
            }
        };
        chosen.copied()
    }

    /// The qualified name an expression stands for (`T.cuda.synchronize` → `torch.cuda.synchronize`),
    /// if its root is an imported name.
    pub fn qualified_name(&self, expr: &Expr) -> Option<String> {
        match expr {
            Expr::Name(n) => match &self.resolve(n.id.as_str(), n.range.start())?.kind {
                BindingKind::Import { qualified } => Some(qualified.clone()),
                _ => None,
            },
            Expr::Attribute(a) => {
                let mut q = self.qualified_name(&a.value)?;
                q.push('.');
                q.push_str(a.attr.as_str());
                Some(q)
            }
            _ => None,
        }
    }

    /// The root name of an attribute chain, if it resolves to an import.
    pub fn root_is_import(&self, expr: &Expr) -> bool {
        let mut e = expr;
        loop {
            match e {
                Expr::Attribute(a) => e = &a.value,
                Expr::Name(n) => {
                    return matches!(
                        self.resolve(n.id.as_str(), n.range.start())
                            .map(|b| &b.kind),
                        Some(BindingKind::Import { .. })
                    );
                }
                _ => return false,
            }
        }
    }

    /// Module-level import bindings, for rendering a qualified name with the file's own aliases.
    pub fn module_imports(&self) -> impl Iterator<Item = (&str, &str)> {
        self.bindings.iter().filter_map(|b| match &b.kind {
            BindingKind::Import { qualified } if b.scope == MODULE_SCOPE => {
                Some((b.name.as_str(), qualified.as_str()))
            }
            _ => None,
        })
    }

    /// Number of reads that resolve to each binding.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.bindings.len()];
        for (_, b) in &self.loads {
            if let Some(b) = b {
                counts[*b] += 1;
            }
        }
        counts
    }

    /// True if `name` is bound anywhere at module level.
    pub fn module_binds(&self, name: &str) -> bool {
        self.scopes[MODULE_SCOPE].names.contains_key(name)
    }
}

struct Collector {
    scopes: Vec<Scope>,
    bindings: Vec<Binding>,
    current: ScopeId,
    loads: Vec<(TextRange, String, ScopeId)>,
    weak_assign: bool,
    stmt: Option<TextRange>,
}

impl Collector {
    fn bind(&mut self, name: &str, range: TextRange, kind: BindingKind) {
        // `global x` / `nonlocal x` redirect the binding.
        let mut scope = self.current;
        if self.scopes[scope].globals.iter().any(|g| g == name) {
            scope = MODULE_SCOPE;
        }
        let idx = self.bindings.len();
        let stmt = match kind {
            BindingKind::Import { .. } => self.stmt,
            _ => None,
        };
        self.bindings.push(Binding {
            name: name.to_string(),
            kind,
            range,
            stmt,
            scope,
        });
        self.scopes[scope]
            .names
            .entry(name.to_string())
            .or_default()
            .push(idx);
    }

    fn push_scope(&mut self, kind: ScopeKind, span: TextRange) -> ScopeId {
        let id = self.scopes.len();
        self.scopes.push(Scope {
            kind,
            parent: Some(self.current),
            span,
            names: HashMap::new(),
            globals: vec![],
            nonlocals: vec![],
        });
        let prev = self.current;
        self.current = id;
        prev
    }

    fn bind_parameters(&mut self, params: &'_ ast::Parameters) {
        for p in params.iter() {
            let p = p.as_parameter();
            self.bind(p.name.as_str(), p.name.range, BindingKind::Other);
        }
    }

    fn visit_parameter_defaults(&mut self, params: &ast::Parameters) {
        for p in params
            .posonlyargs
            .iter()
            .chain(&params.args)
            .chain(&params.kwonlyargs)
        {
            if let Some(d) = &p.default {
                self.visit_expr(d);
            }
            if let Some(a) = &p.parameter.annotation {
                self.visit_expr(a);
            }
        }
        for p in params.vararg.iter().chain(params.kwarg.iter()) {
            if let Some(a) = &p.annotation {
                self.visit_expr(a);
            }
        }
    }

    fn comprehension<'a>(
        &mut self,
        range: TextRange,
        generators: &'a [ast::Comprehension],
        elts: &[&'a Expr],
    ) {
        // The first iterable is evaluated in the enclosing scope.
        if let Some(first) = generators.first() {
            self.visit_expr(&first.iter);
        }
        let prev = self.push_scope(ScopeKind::Comprehension, range);
        for (i, g) in generators.iter().enumerate() {
            if i > 0 {
                self.visit_expr(&g.iter);
            }
            self.visit_expr(&g.target);
            for cond in &g.ifs {
                self.visit_expr(cond);
            }
        }
        for e in elts {
            self.visit_expr(e);
        }
        self.current = prev;
    }
}

fn body_span(body: &[Stmt], fallback: TextRange) -> TextRange {
    match (body.first(), body.last()) {
        (Some(f), Some(l)) => TextRange::new(f.start(), l.end()),
        _ => TextRange::empty(fallback.end()),
    }
}

impl<'a> Visitor<'a> for Collector {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                for d in &f.decorator_list {
                    self.visit_decorator(d);
                }
                self.visit_parameter_defaults(&f.parameters);
                if let Some(r) = &f.returns {
                    self.visit_expr(r);
                }
                self.bind(f.name.as_str(), f.name.range, BindingKind::Other);
                let prev = self.push_scope(ScopeKind::Function, body_span(&f.body, f.range));
                self.bind_parameters(&f.parameters);
                self.visit_body(&f.body);
                self.current = prev;
            }
            Stmt::ClassDef(c) => {
                for d in &c.decorator_list {
                    self.visit_decorator(d);
                }
                if let Some(args) = &c.arguments {
                    self.visit_arguments(args);
                }
                self.bind(c.name.as_str(), c.name.range, BindingKind::Other);
                let prev = self.push_scope(ScopeKind::Class, body_span(&c.body, c.range));
                self.visit_body(&c.body);
                self.current = prev;
            }
            Stmt::Import(imp) => {
                self.stmt = Some(imp.range);
                for alias in &imp.names {
                    let full = alias.name.as_str();
                    match &alias.asname {
                        Some(asname) => self.bind(
                            asname.as_str(),
                            alias.range,
                            BindingKind::Import {
                                qualified: full.to_string(),
                            },
                        ),
                        None => {
                            let root = full.split('.').next().unwrap_or(full);
                            self.bind(
                                root,
                                alias.range,
                                BindingKind::Import {
                                    qualified: root.to_string(),
                                },
                            )
                        }
                    }
                }
                self.stmt = None;
            }
            Stmt::ImportFrom(imp) => {
                self.stmt = Some(imp.range);
                for alias in &imp.names {
                    let name = alias.name.as_str();
                    if name == "*" {
                        continue;
                    }
                    let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                    let kind = match (&imp.module, imp.level) {
                        (Some(m), 0) => BindingKind::Import {
                            qualified: format!("{}.{}", m.as_str(), name),
                        },
                        _ => BindingKind::Other,
                    };
                    self.bind(bound.as_str(), alias.range, kind);
                }
                self.stmt = None;
            }
            Stmt::Global(g) => {
                for n in &g.names {
                    self.scopes[self.current].globals.push(n.to_string());
                }
            }
            Stmt::Nonlocal(g) => {
                for n in &g.names {
                    self.scopes[self.current].nonlocals.push(n.to_string());
                }
            }
            Stmt::Assign(a) => {
                self.visit_expr(&a.value);
                self.weak_assign = a.value.is_none_literal_expr();
                for t in &a.targets {
                    self.visit_expr(t);
                }
                self.weak_assign = false;
            }
            Stmt::Try(t) => {
                self.visit_body(&t.body);
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    if let Some(ty) = &h.type_ {
                        self.visit_expr(ty);
                    }
                    if let Some(n) = &h.name {
                        self.bind(n.as_str(), n.range, BindingKind::Other);
                    }
                    self.visit_body(&h.body);
                }
                self.visit_body(&t.orelse);
                self.visit_body(&t.finalbody);
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(n) => match n.ctx {
                ExprContext::Load => {
                    self.loads.push((n.range, n.id.to_string(), self.current));
                }
                ExprContext::Store | ExprContext::Del => {
                    let kind = if self.weak_assign {
                        BindingKind::Weak
                    } else {
                        BindingKind::Other
                    };
                    self.bind(n.id.as_str(), n.range, kind);
                }
                ExprContext::Invalid => {}
            },
            Expr::Named(named) => {
                self.visit_expr(&named.value);
                // A walrus in a comprehension binds in the enclosing function/module.
                let prev = self.current;
                while self.scopes[self.current].kind == ScopeKind::Comprehension {
                    self.current = self.scopes[self.current].parent.unwrap_or(MODULE_SCOPE);
                }
                self.visit_expr(&named.target);
                self.current = prev;
            }
            Expr::Lambda(l) => {
                if let Some(p) = &l.parameters {
                    self.visit_parameter_defaults(p);
                }
                let prev = self.push_scope(ScopeKind::Function, l.body.range());
                if let Some(p) = &l.parameters {
                    self.bind_parameters(p);
                }
                self.visit_expr(&l.body);
                self.current = prev;
            }
            Expr::ListComp(c) => self.comprehension(c.range, &c.generators, &[&c.elt]),
            Expr::SetComp(c) => self.comprehension(c.range, &c.generators, &[&c.elt]),
            Expr::Generator(c) => self.comprehension(c.range, &c.generators, &[&c.elt]),
            Expr::DictComp(c) => {
                let mut elts: Vec<&Expr> = vec![&c.value];
                if let Some(k) = &c.key {
                    elts.insert(0, k);
                }
                self.comprehension(c.range, &c.generators, &elts)
            }
            _ => visitor::walk_expr(self, expr),
        }
    }

    fn visit_pattern(&mut self, pattern: &'a ast::Pattern) {
        match pattern {
            ast::Pattern::MatchAs(p) => {
                if let Some(n) = &p.name {
                    self.bind(n.as_str(), n.range, BindingKind::Other);
                }
            }
            ast::Pattern::MatchStar(p) => {
                if let Some(n) = &p.name {
                    self.bind(n.as_str(), n.range, BindingKind::Other);
                }
            }
            ast::Pattern::MatchMapping(p) => {
                if let Some(n) = &p.rest {
                    self.bind(n.as_str(), n.range, BindingKind::Other);
                }
            }
            _ => {}
        }
        visitor::walk_pattern(self, pattern);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::parse::parse;

    /// Qualified names of every call's callee, in source order (None where it is not an import).
    fn callees(src: &str) -> Vec<Option<String>> {
        struct Calls<'s> {
            sem: &'s Semantic,
            out: Vec<Option<String>>,
        }
        impl<'a> Visitor<'a> for Calls<'_> {
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(c) = expr {
                    self.out.push(self.sem.qualified_name(&c.func));
                }
                visitor::walk_expr(self, expr);
            }
        }
        let parsed = parse(src);
        assert!(!parsed.has_errors(), "{:?}", parsed.errors);
        let sem = Semantic::build(&parsed.module);
        let mut v = Calls {
            sem: &sem,
            out: vec![],
        };
        v.visit_body(&parsed.module.body);
        v.out
    }

    fn q(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn import_aliases() {
        let src = "import torch as T\nfrom torch import cuda\nfrom torch.cuda import amp\n\
                   import torch.distributed as dist\nimport torch_xla.core.xla_model as xm\n\
                   from torch_xla.core import xla_model as xm2\n\
                   T.cuda.synchronize()\ncuda.synchronize()\namp.autocast()\n\
                   dist.init_process_group()\nxm.mark_step()\nxm2.mark_step()\n";
        assert_eq!(
            callees(src),
            vec![
                q("torch.cuda.synchronize"),
                q("torch.cuda.synchronize"),
                q("torch.cuda.amp.autocast"),
                q("torch.distributed.init_process_group"),
                q("torch_xla.core.xla_model.mark_step"),
                q("torch_xla.core.xla_model.mark_step"),
            ]
        );
    }

    #[test]
    fn dotted_import_binds_the_root() {
        assert_eq!(
            callees("import torch.cuda\ntorch.cuda.synchronize()\n"),
            vec![q("torch.cuda.synchronize")]
        );
    }

    #[test]
    fn shadowing_by_parameter_and_assignment() {
        let src = "from torch import cuda\n\
                   def f(cuda):\n    cuda.synchronize()\n\
                   def g():\n    cuda = Thing()\n    cuda.synchronize()\n\
                   def h():\n    cuda.synchronize()\n\
                   class C:\n    cuda = 1\n    def m(self):\n        cuda.synchronize()\n\
                   [cuda.synchronize() for cuda in xs]\n";
        assert_eq!(
            callees(src),
            vec![
                None,
                None,
                None,
                q("torch.cuda.synchronize"),
                q("torch.cuda.synchronize"),
                None,
            ]
        );
    }

    #[test]
    fn imports_inside_functions_and_module_rebinding() {
        let src = "def f():\n    import torch as tt\n    tt.cuda.synchronize()\n\
                   def g():\n    tt.cuda.synchronize()\n\
                   import torch\ntorch.cuda.synchronize()\ntorch = None\n";
        // `torch = None` is weak: it does not hide the import.
        assert_eq!(
            callees(src),
            vec![
                q("torch.cuda.synchronize"),
                None,
                q("torch.cuda.synchronize")
            ]
        );
        let src = "import torch\ntorch = Fake()\ntorch.cuda.synchronize()\n";
        assert_eq!(callees(src), vec![None, None]);
    }

    #[test]
    fn try_import_fallback_to_none() {
        let src = "try:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n    xm = None\n\
                   def step():\n    xm.mark_step()\n";
        assert_eq!(callees(src), vec![q("torch_xla.core.xla_model.mark_step")]);
    }

    #[test]
    fn global_declaration_and_relative_imports() {
        let src = "from . import cuda\ncuda.synchronize()\n\
                   import torch\ndef f():\n    global torch\n    torch = 3\n";
        assert_eq!(callees(src), vec![None]);
    }

    #[test]
    fn use_counts_track_reads() {
        let parsed = parse("import torch\nimport os\nx = torch.zeros(1)\ny = torch\n");
        let sem = Semantic::build(&parsed.module);
        let counts = sem.use_counts();
        let torch = sem.bindings.iter().position(|b| b.name == "torch").unwrap();
        let os = sem.bindings.iter().position(|b| b.name == "os").unwrap();
        assert_eq!(counts[torch], 2);
        assert_eq!(counts[os], 0);
    }
}
