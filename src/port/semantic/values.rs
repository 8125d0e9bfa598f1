//! What a name was bound to, for rewrites that need more than a qualified name: the `def`
//! behind a function name (does its body run the optimizer?), and whether an expression is
//! known to be a tensor or a module (made by a `torch` factory or an `nn` class, a parameter
//! or a variable annotated `torch.Tensor`/`nn.Module`, `next(m.parameters())`, a tensor method
//! or arithmetic on one). Anything else is unknown: callers treat unknown as "not proven".

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, ModModule, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::{BindingKind, Semantic};

/// The node that made a binding.
#[derive(Clone, Copy)]
pub enum Origin<'a> {
    Def(&'a ast::StmtFunctionDef),
    /// A parameter or an annotated assignment: the annotation.
    Annotated(&'a Expr),
    /// `name = value` (a single plain target).
    Value(&'a Expr),
    Unknown,
}

/// The node behind the binding a name at this position refers to.
pub fn origin<'a>(sem: &Semantic, module: &'a ModModule, name: &ast::ExprName) -> Origin<'a> {
    let Some(b) = sem.resolve(name.id.as_str(), name.range.start()) else {
        return Origin::Unknown;
    };
    if b.kind != BindingKind::Other {
        return Origin::Unknown;
    }
    let mut f = Finder {
        target: b.range,
        found: Origin::Unknown,
    };
    for s in &module.body {
        f.visit_stmt(s);
    }
    f.found
}

struct Finder<'a> {
    target: TextRange,
    found: Origin<'a>,
}

impl<'a> SourceOrderVisitor<'a> for Finder<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        if !node.range().contains_range(self.target) {
            return TraversalSignal::Skip;
        }
        match node {
            AnyNodeRef::StmtFunctionDef(f) => {
                if f.name.range == self.target {
                    self.found = Origin::Def(f);
                }
                for p in f.parameters.iter() {
                    if p.name().range == self.target {
                        self.found = p
                            .annotation()
                            .map(Origin::Annotated)
                            .unwrap_or(Origin::Unknown);
                    }
                }
            }
            AnyNodeRef::StmtAssign(a) => {
                if let [Expr::Name(n)] = &a.targets[..]
                    && n.range == self.target
                {
                    self.found = Origin::Value(&a.value);
                }
            }
            AnyNodeRef::StmtAnnAssign(a) if a.target.range() == self.target => {
                self.found = Origin::Annotated(&a.annotation);
            }
            _ => {}
        }
        TraversalSignal::Traverse
    }
}

/// `torch` functions that return a new tensor.
const FACTORIES: &[&str] = &[
    "tensor",
    "as_tensor",
    "from_numpy",
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "randperm",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "stack",
    "cat",
    "concat",
    "where",
    "matmul",
];

/// Methods of a tensor or a module that return a tensor or module again.
const SAME_KIND: &[&str] = &[
    "to",
    "cuda",
    "cpu",
    "tpu",
    "float",
    "half",
    "double",
    "bfloat16",
    "long",
    "int",
    "bool",
    "clone",
    "detach",
    "contiguous",
    "view",
    "reshape",
    "train",
    "eval",
    "requires_grad_",
];

/// Attributes of a tensor or a module that are tensors.
const TENSOR_ATTRIBUTES: &[&str] = &["weight", "bias", "grad", "data", "T"];

/// Annotations that name a tensor or a module.
const TYPES: &[&str] = &[
    "torch.Tensor",
    "torch.nn.Module",
    "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
    "torch.nn.modules.module.Module",
];

/// Is `e` known to be a tensor or a module?
pub fn is_tensor_or_module(sem: &Semantic, module: &ModModule, e: &Expr) -> bool {
    known(sem, module, e, 4)
}

fn known(sem: &Semantic, module: &ModModule, e: &Expr, depth: u8) -> bool {
    if depth == 0 {
        return false;
    }
    let again = |e: &Expr| known(sem, module, e, depth - 1);
    match e {
        Expr::Name(n) => match origin(sem, module, n) {
            Origin::Annotated(a) => sem
                .qualified_name(a)
                .is_some_and(|q| TYPES.contains(&q.as_str())),
            Origin::Value(v) => again(v),
            _ => false,
        },
        Expr::Call(c) => {
            if let Some(q) = sem.qualified_name(&c.func) {
                let last = q.rsplit('.').next().unwrap_or("");
                return (q.starts_with("torch.")
                    && q.matches('.').count() == 1
                    && FACTORIES.contains(&last))
                    || (q.starts_with("torch.nn.")
                        && last.starts_with(|c: char| c.is_ascii_uppercase()));
            }
            match c.func.as_ref() {
                // next(m.parameters()), next(iter(m.buffers()))
                Expr::Name(n)
                    if n.id.as_str() == "next"
                        && sem.resolve("next", n.range.start()).is_none() =>
                {
                    let mut arg = c.arguments.args.first();
                    if let Some(Expr::Call(i)) = arg
                        && matches!(i.func.as_ref(), Expr::Name(n) if n.id.as_str() == "iter")
                    {
                        arg = i.arguments.args.first();
                    }
                    matches!(arg, Some(Expr::Call(p)) if matches!(p.func.as_ref(),
                        Expr::Attribute(a) if matches!(a.attr.as_str(), "parameters" | "buffers")))
                }
                Expr::Attribute(a) => SAME_KIND.contains(&a.attr.as_str()) && again(&a.value),
                _ => false,
            }
        }
        Expr::Attribute(a) => TENSOR_ATTRIBUTES.contains(&a.attr.as_str()) && again(&a.value),
        Expr::BinOp(b) => again(&b.left) || again(&b.right),
        _ => false,
    }
}

/// The call in a function's body that runs the optimizer or the backward pass (`.step()`,
/// `.zero_grad()`, `.backward()`, `xm.optimizer_step(...)`), which Dynamo cannot trace into
/// one graph.
pub fn runs_optimizer(body: &[Stmt]) -> Option<TextRange> {
    struct Find(Option<TextRange>);
    impl<'a> SourceOrderVisitor<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            if self.0.is_some() {
                return;
            }
            if let Expr::Call(c) = e
                && let Expr::Attribute(a) = c.func.as_ref()
                && matches!(
                    a.attr.as_str(),
                    "step" | "zero_grad" | "backward" | "optimizer_step"
                )
            {
                self.0 = Some(c.range());
                return;
            }
            ruff_python_ast::visitor::source_order::walk_expr(self, e);
        }
    }
    let mut f = Find(None);
    for s in body {
        f.visit_stmt(s);
    }
    f.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::parse::parse;

    /// Is the receiver of the last `.is_cuda` of `src` known to be a tensor or a module?
    fn known_receiver(src: &str) -> bool {
        struct Last<'a>(Option<&'a Expr>);
        impl<'a> SourceOrderVisitor<'a> for Last<'a> {
            fn visit_expr(&mut self, e: &'a Expr) {
                if let Expr::Attribute(a) = e
                    && a.attr.as_str() == "is_cuda"
                {
                    self.0 = Some(&a.value);
                }
                ruff_python_ast::visitor::source_order::walk_expr(self, e);
            }
        }
        let parsed = parse(src);
        let sem = Semantic::build(&parsed.module);
        let mut v = Last(None);
        for s in &parsed.module.body {
            v.visit_stmt(s);
        }
        is_tensor_or_module(&sem, &parsed.module, v.0.unwrap())
    }

    #[test]
    fn tensors_and_modules_are_known_by_their_origin() {
        assert!(known_receiver(
            "import torch\nx = torch.randn(3).to(d)\nx.is_cuda\n"
        ));
        assert!(known_receiver(
            "import torch.nn as nn\nm = nn.Linear(2, 2)\nm.weight.is_cuda\n"
        ));
        assert!(known_receiver(
            "import torch\ndef f(t: torch.Tensor):\n    return t.is_cuda\n"
        ));
        assert!(known_receiver("next(model.parameters()).is_cuda\n"));
        assert!(!known_receiver(
            "import torch\ndef f(cfg):\n    return cfg.is_cuda\n"
        ));
        assert!(!known_receiver("cfg = load()\ncfg.is_cuda\n"));
        assert!(!known_receiver(
            "import torch\nok = torch.cuda.is_available()\nok.is_cuda\n"
        ));
    }

    #[test]
    fn optimizer_calls_are_found() {
        let parsed = parse("def f(x):\n    loss = m(x)\n    loss.backward()\n");
        let Stmt::FunctionDef(f) = &parsed.module.body[0] else {
            panic!()
        };
        assert!(runs_optimizer(&f.body).is_some());
        let parsed = parse("def f(x):\n    return m(x)\n");
        let Stmt::FunctionDef(f) = &parsed.module.body[0] else {
            panic!()
        };
        assert!(runs_optimizer(&f.body).is_none());
    }
}
