//! The one pass over a module that builds its scopes and bindings and records every read,
//! following Python's scoping rules (`global`, `nonlocal`, class scopes, comprehensions).

use rustc_hash::FxHashMap as HashMap;

use ruff_python_ast::name::Name;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::scope::{Binding, BindingKind, MODULE_SCOPE, Scope, ScopeId, ScopeKind};

/// Every read: its range, the name, and the scope it happens in (resolved afterwards).
pub type Load = (TextRange, Name, ScopeId);

/// Scopes, bindings and reads of a module.
pub fn collect(module: &ast::ModModule) -> (Vec<Scope>, Vec<Binding>, Vec<Load>) {
    let mut c = Collector {
        scopes: vec![Scope {
            kind: ScopeKind::Module,
            parent: None,
            span: module.range(),
            names: HashMap::default(),
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
    (c.scopes, c.bindings, c.loads)
}

struct Collector {
    scopes: Vec<Scope>,
    bindings: Vec<Binding>,
    current: ScopeId,
    loads: Vec<Load>,
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
        let name = Name::new(name);
        self.bindings.push(Binding {
            name: name.clone(),
            kind,
            range,
            stmt,
            scope,
        });
        self.scopes[scope].names.entry(name).or_default().push(idx);
    }

    fn push_scope(&mut self, kind: ScopeKind, span: TextRange) -> ScopeId {
        let id = self.scopes.len();
        self.scopes.push(Scope {
            kind,
            parent: Some(self.current),
            span,
            names: HashMap::default(),
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
                    self.loads.push((n.range, n.id.clone(), self.current));
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
