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
//! hide an import of the same name.//!
//! [`scope`] holds the data, [`collect`] the one pass that gathers it; this file answers the
//! questions about it; [`values`] finds what a name was bound to (a def, a tensor, a module).

pub mod collect;
pub mod scope;
pub mod values;

use rustc_hash::FxHashSet as HashSet;

use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::{TextRange, TextSize};

pub use scope::{Binding, BindingKind, MODULE_SCOPE, Scope, ScopeId, ScopeKind};

/// The scopes and bindings of one module.
pub struct Semantic {
    pub scopes: Vec<Scope>,
    pub bindings: Vec<Binding>,
    /// Every name that is read, with the binding it resolves to (if any).
    pub loads: Vec<(TextRange, Option<usize>)>,
    /// [`Self::scope_at`]'s answer from each position on, up to the next ([`innermost`]).
    innermost: Vec<(TextSize, ScopeId)>,
}

impl Semantic {
    pub fn build(module: &ast::ModModule) -> Semantic {
        let (scopes, bindings, loads_raw) = collect::collect(module);
        let mut sem = Semantic {
            innermost: innermost(&scopes),
            scopes,
            bindings,
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
        match self.innermost.partition_point(|(at, _)| *at <= pos) {
            0 => MODULE_SCOPE,
            n => self.innermost[n - 1].1,
        }
    }

    /// The binding `name` refers to when read at `pos`.
    pub fn resolve(&self, name: &str, pos: TextSize) -> Option<&Binding> {
        self.lookup(self.scope_at(pos), name, pos)
            .map(|i| &self.bindings[i])
    }

    /// [`Self::resolve`], where the binding is already made when code at `pos` runs: code of a
    /// function runs later and sees the module as it ends up; module-level code (a notebook's
    /// earlier cell) sees only what is bound above it (`DEVICE = 'cuda'` before `import torch`).
    pub fn bound_at(&self, name: &str, pos: TextSize) -> Option<&Binding> {
        let b = self.resolve(name, pos)?;
        let mut id = self.scope_at(pos);
        let deferred = loop {
            let s = &self.scopes[id];
            if s.kind == ScopeKind::Function {
                break true;
            }
            match s.parent {
                Some(p) => id = p,
                None => break false,
            }
        };
        (deferred || b.range.start() <= pos).then_some(b)
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

    /// Every name an import binds, in any scope: only chains rooted in one of these can resolve
    /// to a qualified name, so the matchers use it as a cheap first filter.
    pub fn import_names(&self) -> HashSet<&str> {
        self.bindings
            .iter()
            .filter(|b| matches!(b.kind, BindingKind::Import { .. }))
            .map(|b| b.name.as_str())
            .collect()
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

/// Where [`Semantic::scope_at`]'s answer changes, and to what: the last-made scope whose span
/// holds the position (scopes are made in source order and nest, so that is the innermost; an
/// empty span holds its start), or the module. Asked for every name read, so found by a binary
/// search here, made once by a sweep over the spans' ends (a module of a large library holds
/// thousands of scopes).
fn innermost(scopes: &[Scope]) -> Vec<(TextSize, ScopeId)> {
    let span = |s: &Scope| {
        (
            s.span.start(),
            s.span.end().max(s.span.start() + TextSize::from(1)),
        )
    };
    let mut points: Vec<TextSize> = scopes
        .iter()
        .skip(1)
        .flat_map(|s| [span(s).0, span(s).1])
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut starts: Vec<ScopeId> = (1..scopes.len()).collect();
    starts.sort_by_key(|id| span(&scopes[*id]).0);
    let mut next = starts.iter().peekable();
    let mut open = std::collections::BinaryHeap::new();
    let mut out: Vec<(TextSize, ScopeId)> = Vec::with_capacity(points.len());
    for at in points {
        while let Some(id) = next.next_if(|id| span(&scopes[**id]).0 == at) {
            open.push(*id);
        }
        // Scopes whose span has ended by here leave (each once, when it is the newest open).
        while open.peek().is_some_and(|id| span(&scopes[*id]).1 <= at) {
            open.pop();
        }
        let id = open.peek().copied().unwrap_or(MODULE_SCOPE);
        if out.last().is_none_or(|(_, last)| *last != id) {
            out.push((at, id));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use ruff_python_ast::visitor::{self, Visitor};

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

    /// The innermost scope at each position is the last-made scope holding it, as a scan of
    /// every scope finds it: nested functions, a class, lambdas in defaults (made before the
    /// function's own scope), comprehensions, and positions past the last scope.
    #[test]
    fn scope_at_is_the_last_made_scope_holding_the_position() {
        let src = "import torch\n\ndef f(a=lambda x: x + 1, b=[i for i in range(3)]):\n    \
                   def g():\n        return [y for y in {k: v for k, v in a}]\n    \
                   return g\n\nclass C:\n    h = lambda self: (z for z in self)\n\n    \
                   def m(self):\n        pass\n\nx = [w for w in range(2)]\n";
        let parsed = parse(src);
        let sem = Semantic::build(&parsed.module);
        assert!(sem.scopes.len() > 8, "{}", sem.scopes.len());
        for pos in 0..=src.len() as u32 {
            let pos = TextSize::from(pos);
            let scan = (1..sem.scopes.len())
                .rfind(|id| {
                    let s = sem.scopes[*id].span;
                    s.start() <= pos && pos < s.end().max(s.start() + TextSize::from(1))
                })
                .unwrap_or(MODULE_SCOPE);
            assert_eq!(sem.scope_at(pos), scan, "at {pos:?}");
        }
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
