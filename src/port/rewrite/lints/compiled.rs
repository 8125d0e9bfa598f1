//! Code that `torch.compile` traces, and what in it a TPU compiles badly: TorchTPU forces
//! `dynamic=False`, so every new shape is a new compile, and reading a value on the host breaks
//! the graph. Compiled functions are those decorated with `@torch.compile`, named in
//! `torch.compile(f)`, the `forward` of a class whose instance is compiled (`torch.compile(model)`,
//! `model.compile()`), and the module's functions and same-class methods they call.
//! `@spmd_safe` functions count for the rank-branch lint (CMP101): they must trace the same
//! program on every rank.

use std::collections::HashMap;

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::{Found, any_in, walk};
use crate::port::rewrite::Checker;
use crate::port::rules::Lint;

/// Names and attributes that hold the process rank, or whether it is the first. A bare `rank`
/// (also a matrix rank, as in LoRA) counts only compared with 0 or negated.
const RANK_NAMES: [&str; 9] = [
    "local_rank",
    "global_rank",
    "is_master",
    "is_main_process",
    "is_local_main_process",
    "is_rank_zero",
    "master_process",
    "process_index",
    "is_global_zero",
];

struct Def<'a> {
    def: &'a ast::StmtFunctionDef,
    class: Option<&'a str>,
}

/// The functions a compiler traces, and why.
pub(super) struct Compiled<'a> {
    /// (function, its class, spmd_safe rather than compiled)
    fns: Vec<(&'a ast::StmtFunctionDef, bool)>,
}

impl<'a> Compiled<'a> {
    pub(super) fn of(c: &Checker<'a>) -> Compiled<'a> {
        let mut defs: Vec<Def<'a>> = vec![];
        let mut classes: Vec<&'a str> = vec![];
        // `model = Net(...)`: instance name → class name.
        let mut instances: HashMap<&'a str, &'a str> = HashMap::new();
        let mut compiled_args: Vec<&'a Expr> = vec![];
        let mut compiled_receivers: Vec<&'a Expr> = vec![];
        walk(&c.parsed.module.body, true, &mut |node, stack| match node {
            AnyNodeRef::StmtFunctionDef(f) => {
                let class = match stack.last() {
                    Some(AnyNodeRef::StmtClassDef(k)) => Some(k.name.as_str()),
                    _ => None,
                };
                defs.push(Def { def: f, class });
            }
            AnyNodeRef::StmtClassDef(k) => classes.push(k.name.as_str()),
            AnyNodeRef::StmtAssign(a) => {
                if let ([Expr::Name(t)], Expr::Call(call)) = (&a.targets[..], a.value.as_ref())
                    && let Expr::Name(k) = call.func.as_ref()
                {
                    instances.insert(t.id.as_str(), k.id.as_str());
                }
            }
            AnyNodeRef::ExprCall(call) => {
                if c.callee_named(call, &["compile"]).as_deref() == Some("torch.compile") {
                    if let Some(a) = call.arguments.find_argument_value("model", 0) {
                        compiled_args.push(a);
                    }
                } else if c.method_name(call) == Some("compile")
                    && call.arguments.args.is_empty()
                    && let Expr::Attribute(a) = call.func.as_ref()
                {
                    compiled_receivers.push(&a.value);
                }
            }
            _ => {}
        });
        let classes_here = |k: &str| classes.contains(&k);
        let mut roots: Vec<(usize, bool)> = vec![];
        let forward_of = |class: &str| {
            defs.iter()
                .position(|d| d.class == Some(class) && d.def.name.as_str() == "forward")
        };
        for (i, d) in defs.iter().enumerate() {
            for dec in &d.def.decorator_list {
                let e = match &dec.expression {
                    Expr::Call(call) => call.func.as_ref(),
                    e => e,
                };
                match c.sem.qualified_name(e).as_deref() {
                    Some("torch.compile") => roots.push((i, false)),
                    Some(q) if q.ends_with(".spmd_safe") => roots.push((i, true)),
                    _ => {}
                }
            }
        }
        for a in compiled_args {
            match a {
                Expr::Name(n) => {
                    let name = n.id.as_str();
                    if let Some(i) = defs.iter().position(|d| d.def.name.as_str() == name) {
                        roots.push((i, false));
                    } else if let Some(k) = instances.get(name).filter(|k| classes_here(k))
                        && let Some(i) = forward_of(k)
                    {
                        roots.push((i, false));
                    }
                }
                Expr::Call(call) => {
                    if let Expr::Name(k) = call.func.as_ref()
                        && let Some(i) = forward_of(k.id.as_str())
                    {
                        roots.push((i, false));
                    }
                }
                Expr::Attribute(at) => {
                    for (i, d) in defs.iter().enumerate() {
                        if d.class.is_some() && d.def.name.as_str() == at.attr.as_str() {
                            roots.push((i, false));
                        }
                    }
                }
                _ => {}
            }
        }
        for r in compiled_receivers {
            if let Expr::Name(n) = r
                && let Some(k) = instances.get(n.id.as_str())
                && let Some(i) = forward_of(k)
            {
                roots.push((i, false));
            }
        }
        // What a traced function calls is traced too: module functions by name, and methods of
        // its own class through `self`.
        let mut seen: Vec<bool> = vec![false; defs.len()];
        let mut spmd: Vec<bool> = vec![false; defs.len()];
        let mut work = roots;
        while let Some((i, is_spmd)) = work.pop() {
            if seen[i] {
                continue;
            }
            seen[i] = true;
            spmd[i] = is_spmd;
            let class = defs[i].class;
            walk(&defs[i].def.body, false, &mut |node, _| {
                let AnyNodeRef::ExprCall(call) = node else {
                    return;
                };
                let target = match call.func.as_ref() {
                    Expr::Name(n) => defs
                        .iter()
                        .position(|d| d.class.is_none() && d.def.name.as_str() == n.id.as_str()),
                    Expr::Attribute(a) if class.is_some() => match a.value.as_ref() {
                        Expr::Name(s) if s.id.as_str() == "self" => defs.iter().position(|d| {
                            d.class == class && d.def.name.as_str() == a.attr.as_str()
                        }),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(t) = target {
                    work.push((t, is_spmd));
                }
            });
        }
        let fns = defs
            .iter()
            .enumerate()
            .filter(|(i, _)| seen[*i])
            .map(|(i, d)| (d.def, spmd[i]))
            .collect();
        Compiled { fns }
    }

    /// The places one lint reports in the traced functions.
    pub(super) fn find(&self, c: &Checker<'a>, lint: Lint) -> Vec<Found> {
        let mut out: Vec<Found> = vec![];
        for (f, is_spmd) in &self.fns {
            if *is_spmd && lint != Lint::RankBranchInCompiled {
                continue;
            }
            let detail = if *is_spmd {
                format!(" in `{}`, an spmd_safe function", f.name)
            } else {
                format!(" in `{}`, which torch.compile traces", f.name)
            };
            let masks = mask_names(c, &f.body);
            walk(&f.body, false, &mut |node, _| {
                let hit = match lint {
                    Lint::NonzeroInCompiled => nonzero(c, node),
                    Lint::MaskReadInCompiled => mask_read(c, node, &masks),
                    Lint::UniqueInCompiled => unique(c, node),
                    Lint::HostValueInCompiled => host_value(c, node),
                    Lint::RankBranchInCompiled => rank_branch(c, node),
                    _ => None,
                };
                if let Some(range) = hit
                    && !out.iter().any(|o| o.range == range)
                {
                    out.push(Found {
                        range,
                        detail: detail.clone(),
                        fix: None,
                    });
                }
            });
        }
        out
    }
}

fn call_of(node: AnyNodeRef<'_>) -> Option<&ast::ExprCall> {
    match node {
        AnyNodeRef::ExprCall(c) => Some(c),
        _ => None,
    }
}

/// `torch.nonzero(x)`, `x.nonzero()`, `torch.argwhere`, `torch.where(cond)`.
fn nonzero(c: &Checker, node: AnyNodeRef) -> Option<TextRange> {
    let call = call_of(node)?;
    let args = &call.arguments;
    let hit = match c.callee(call).as_deref() {
        Some("torch.nonzero" | "torch.argwhere") => true,
        Some("torch.where") => args.args.len() == 1 && args.keywords.is_empty(),
        _ => matches!(c.method_name(call), Some("nonzero" | "argwhere")),
    };
    hit.then(|| call.range())
}

/// Names assigned a boolean mask in this body (`keep = scores > 0.5`).
fn mask_names<'a>(c: &Checker, body: &'a [Stmt]) -> Vec<&'a str> {
    let mut names = vec![];
    // Twice, so a mask built from another (`m = ~keep`) is seen.
    for _ in 0..2 {
        walk(body, false, &mut |node, _| {
            if let AnyNodeRef::StmtAssign(a) = node
                && let [Expr::Name(t)] = &a.targets[..]
                && is_mask(c, &a.value, &names)
                && !names.contains(&t.id.as_str())
            {
                names.push(t.id.as_str());
            }
        });
    }
    names
}

fn is_mask(c: &Checker, e: &Expr, names: &[&str]) -> bool {
    const METHODS: [&str; 12] = [
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "isnan",
        "isinf",
        "isfinite",
        "bool",
        "logical_not",
        "logical_and",
    ];
    match e {
        Expr::Compare(_) => true,
        Expr::Name(n) => names.contains(&n.id.as_str()),
        Expr::UnaryOp(u) => u.op == ast::UnaryOp::Invert && is_mask(c, &u.operand, names),
        Expr::BinOp(b) => {
            matches!(b.op, ast::Operator::BitAnd | ast::Operator::BitOr)
                && (is_mask(c, &b.left, names) || is_mask(c, &b.right, names))
        }
        Expr::Call(call) => {
            c.method_name(call).is_some_and(|m| METHODS.contains(&m))
                || c.callee(call).is_some_and(|q| {
                    q.strip_prefix("torch.")
                        .is_some_and(|m| METHODS.contains(&m) || m == "logical_or")
                })
        }
        _ => false,
    }
}

/// `x[mask]` read (not written), `torch.masked_select`.
fn mask_read(c: &Checker, node: AnyNodeRef, masks: &[&str]) -> Option<TextRange> {
    match node {
        AnyNodeRef::ExprSubscript(s) if s.ctx == ast::ExprContext::Load => {
            let hit = match s.slice.as_ref() {
                Expr::Tuple(t) => t.elts.iter().any(|e| is_mask(c, e, masks)),
                e => is_mask(c, e, masks),
            };
            hit.then(|| s.range())
        }
        AnyNodeRef::ExprCall(call) => (c.callee(call).as_deref() == Some("torch.masked_select")
            || c.method_name(call) == Some("masked_select"))
        .then(|| call.range()),
        _ => None,
    }
}

/// `unique`, `bincount` without `minlength`, `repeat_interleave` by a tensor without
/// `output_size`.
fn unique(c: &Checker, node: AnyNodeRef) -> Option<TextRange> {
    let call = call_of(node)?;
    let args = &call.arguments;
    let q = c.callee(call);
    let (name, function) = match (q.as_deref(), c.method_name(call)) {
        (Some(q), _) if q.starts_with("torch.") => (&q[6..], true),
        (_, Some(m)) => (m, false),
        _ => return None,
    };
    let hit = match name {
        "unique" | "unique_consecutive" => true,
        "bincount" => {
            args.find_keyword("minlength").is_none() && args.args.len() < 2 + usize::from(function)
        }
        "repeat_interleave" => {
            let repeats = args.find_argument_value("repeats", usize::from(function));
            args.find_keyword("output_size").is_none()
                && repeats.is_some_and(|r| !matches!(r, Expr::NumberLiteral(_)))
        }
        _ => false,
    };
    hit.then(|| call.range())
}

/// `.item()` / `.tolist()`, and `if`/`while` on a tensor's truth (`.any()`, `torch.all(...)`).
fn host_value(c: &Checker, node: AnyNodeRef) -> Option<TextRange> {
    let reads = |e: &Expr| matches!(e, Expr::Call(call) if matches!(c.method_name(call), Some("item" | "tolist")));
    match node {
        AnyNodeRef::ExprCall(call) if matches!(c.method_name(call), Some("item" | "tolist")) => {
            Some(call.range())
        }
        AnyNodeRef::StmtIf(ast::StmtIf { test, .. })
        | AnyNodeRef::StmtWhile(ast::StmtWhile { test, .. }) => {
            let truth = any_in(test, &mut |e| match e {
                Expr::Call(call) => {
                    matches!(c.method_name(call), Some("any" | "all"))
                        || matches!(
                            c.callee(call).as_deref(),
                            Some("torch.any" | "torch.all" | "torch.equal" | "torch.allclose")
                        )
                }
                _ => false,
            });
            (truth && !any_in(test, &mut |e| reads(e))).then(|| test.range())
        }
        _ => None,
    }
}

/// An `if`/`while`/conditional expression whose test asks for the rank.
fn rank_branch(c: &Checker, node: AnyNodeRef) -> Option<TextRange> {
    let test = match node {
        AnyNodeRef::StmtIf(i) => &i.test,
        AnyNodeRef::StmtWhile(w) => &w.test,
        AnyNodeRef::ExprIf(i) => &i.test,
        _ => return None,
    };
    let bare_rank = |e: &Expr| match e {
        Expr::Name(n) => n.id.as_str() == "rank",
        Expr::Attribute(a) => a.attr.as_str() == "rank",
        _ => false,
    };
    let zero = |e: &Expr| matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if *i == ast::Int::ZERO));
    let rank = any_in(test, &mut |e| match e {
        Expr::Name(n) => RANK_NAMES.contains(&n.id.as_str()),
        Expr::Attribute(a) => RANK_NAMES.contains(&a.attr.as_str()),
        Expr::Compare(cmp) => {
            let sides: Vec<&Expr> = std::iter::once(cmp.left.as_ref())
                .chain(cmp.comparators.iter())
                .collect();
            sides.iter().any(|s| bare_rank(s)) && sides.iter().any(|s| zero(s))
        }
        Expr::UnaryOp(u) => u.op == ast::UnaryOp::Not && bare_rank(&u.operand),
        Expr::Call(call) => {
            c.callee(call).is_some_and(|q| q.ends_with("get_rank"))
                || matches!(
                    c.method_name(call),
                    Some("get_rank" | "get_local_rank" | "get_global_rank")
                )
        }
        Expr::StringLiteral(s) => matches!(s.value.to_str(), "RANK" | "LOCAL_RANK"),
        _ => false,
    });
    rank.then(|| test.range())
}
