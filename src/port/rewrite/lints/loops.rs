//! Training loops: the innermost `for`/`while` whose body calls `.backward()` (on a loss, through
//! a GradScaler's `scale(loss)`, or `accelerator.backward(loss)`) and steps an optimizer, the host syncs inside it
//! (PERF002), and shuffled loaders that keep their last, smaller batch (DYN006).
//!
//! A sync under `if step % N == 0:` runs every N steps: that is the advice already followed,
//! so it is not reported.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::{Found, any_in, walk};
use crate::port::rewrite::Checker;

/// Methods that copy a tensor to the host.
const SYNC_METHODS: [&str; 4] = ["item", "tolist", "cpu", "numpy"];

const DATALOADERS: [&str; 2] = [
    "torch.utils.data.DataLoader",
    "torch.utils.data.dataloader.DataLoader",
];

/// One training loop.
struct Loop<'a> {
    start: TextRange,
    body: &'a [Stmt],
    /// Names whose `.backward()` is called (the losses).
    losses: Vec<&'a str>,
}

/// The module's training loops.
pub(super) struct Training<'a> {
    loops: Vec<Loop<'a>>,
}

impl<'a> Training<'a> {
    pub(super) fn of(c: &Checker<'a>) -> Training<'a> {
        let mut loops: Vec<Loop<'a>> = vec![];
        walk(&c.parsed.module.body, true, &mut |node, _| {
            let (range, body) = match node {
                AnyNodeRef::StmtFor(f) => (f.range, &f.body[..]),
                AnyNodeRef::StmtWhile(w) => (w.range, &w.body[..]),
                _ => return,
            };
            if let Some(losses) = backward_in(body) {
                loops.push(Loop {
                    start: range,
                    body,
                    losses,
                });
            }
        });
        // The step loop is the innermost one: an epoch loop around it holds the same syncs.
        let ranges: Vec<TextRange> = loops.iter().map(|l| l.start).collect();
        loops.retain(|l| {
            !ranges
                .iter()
                .any(|r| *r != l.start && l.start.contains_range(*r))
        });
        Training { loops }
    }

    /// Whether the module has a training loop.
    pub(super) fn trains(&self) -> bool {
        !self.loops.is_empty()
    }

    /// The bodies of the training loops.
    pub(super) fn bodies(&self) -> impl Iterator<Item = &'a [Stmt]> + '_ {
        self.loops.iter().map(|l| l.body)
    }

    /// Device-to-host copies that run on every step.
    pub(super) fn host_syncs(&self, c: &Checker<'a>) -> Vec<Found> {
        let mut out = vec![];
        for l in &self.loops {
            let mut here: Vec<TextRange> = vec![];
            walk(l.body, false, &mut |node, stack| {
                if periodic(node, stack) {
                    return;
                }
                if let Some(r) = sync_at(c, node, &l.losses) {
                    here.push(r);
                }
            });
            let line = c.src[..usize::from(l.start.start())].matches('\n').count() + 1;
            let n = here.len();
            for r in here {
                let detail = if n == 1 {
                    format!(" (the loop at line {line})")
                } else {
                    format!(" ({n} host syncs per step in the loop at line {line})")
                };
                out.push(Found {
                    range: r,
                    detail,
                    fix: None,
                });
            }
        }
        out
    }

    /// Shuffled (or sampled) DataLoaders without `drop_last=True`, in a file that trains.
    pub(super) fn partial_batches(&self, c: &Checker<'a>) -> Vec<Found> {
        if self.loops.is_empty() {
            return vec![];
        }
        let mut out = vec![];
        walk(&c.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            if !c
                .callee(call)
                .is_some_and(|q| DATALOADERS.contains(&q.as_str()))
            {
                return;
            }
            let kw = |name: &str| call.arguments.find_keyword(name).map(|k| &k.value);
            // A literal False keeps the partial batch; anything else is the user's choice.
            let keeps_last = match kw("drop_last") {
                None => true,
                Some(Expr::BooleanLiteral(b)) => !b.value,
                Some(_) => false,
            };
            let shuffled = match kw("shuffle") {
                Some(Expr::BooleanLiteral(b)) => b.value,
                Some(Expr::NoneLiteral(_)) | None => false,
                Some(_) => true,
            };
            let sampled = kw("sampler").is_some_and(|s| !s.is_none_literal_expr());
            if keeps_last && (shuffled || sampled) {
                out.push(Found::at(call.range()));
            }
        });
        out
    }
}

/// The losses of a loop body that calls `.backward()` (not inside nested functions); None when
/// it does not.
fn backward_in(body: &[Stmt]) -> Option<Vec<&str>> {
    let mut found = false;
    let mut stepped = false;
    let mut losses = vec![];
    walk(body, false, &mut |node, _| {
        let AnyNodeRef::ExprCall(call) = node else {
            return;
        };
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        if a.attr.as_str() == "step" {
            stepped = true;
        }
        if !matches!(a.attr.as_str(), "backward" | "manual_backward") {
            return;
        }
        found = true;
        // `loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`.
        let loss = match (a.value.as_ref(), call.arguments.args.first()) {
            (_, Some(Expr::Name(n))) => Some(n.id.as_str()),
            (Expr::Name(n), None) => Some(n.id.as_str()),
            (Expr::Call(inner), None) => match inner.arguments.args.first() {
                Some(Expr::Name(n)) => Some(n.id.as_str()),
                _ => None,
            },
            _ => None,
        };
        if let Some(l) = loss
            && !losses.contains(&l)
        {
            losses.push(l);
        }
    });
    // An optimizer step makes it training: a `.backward()` alone may be a guidance gradient
    // in an inference pipeline.
    (found && stepped).then_some(losses)
}

/// Is the node inside the body of an `if` that tests a modulo (`if step % 100 == 0:`)?
fn periodic(node: AnyNodeRef, stack: &[AnyNodeRef]) -> bool {
    stack.iter().any(|a| {
        let AnyNodeRef::StmtIf(i) = a else {
            return false;
        };
        let (Some(first), Some(last)) = (i.body.first(), i.body.last()) else {
            return false;
        };
        TextRange::new(first.start(), last.end()).contains_range(node.range())
            && any_in(
                &i.test,
                &mut |e| matches!(e, Expr::BinOp(b) if b.op == ast::Operator::Mod),
            )
    })
}

/// The range of a host sync at this node, if it is one.
fn sync_at(c: &Checker, node: AnyNodeRef, losses: &[&str]) -> Option<TextRange> {
    let is_loss = |e: &Expr| matches!(e, Expr::Name(n) if losses.contains(&n.id.as_str()));
    let syncs = |e: &Expr| match e {
        Expr::Call(call) => c
            .method_name(call)
            .is_some_and(|m| SYNC_METHODS.contains(&m)),
        _ => false,
    };
    match node {
        AnyNodeRef::ExprCall(call) => {
            if let Some(m) = c.method_name(call) {
                let no_args = call.arguments.args.is_empty() && call.arguments.keywords.is_empty();
                if SYNC_METHODS.contains(&m) && (no_args || m == "numpy") {
                    return Some(call.range());
                }
                let to_cpu = m == "to"
                    && (call
                        .arguments
                        .args
                        .first()
                        .or(call.arguments.find_keyword("device").map(|k| &k.value)))
                    .is_some_and(
                        |a| matches!(a, Expr::StringLiteral(s) if s.value.to_str() == "cpu"),
                    );
                return to_cpu.then(|| call.range());
            }
            let Expr::Name(f) = call.func.as_ref() else {
                return None;
            };
            match f.id.as_str() {
                // `float(loss)`: a Python number from a tensor.
                "float" | "int" | "bool" => call
                    .arguments
                    .args
                    .first()
                    .filter(|a| root_is(a, &is_loss))
                    .map(|_| call.range()),
                // `print(loss)`, `print(f"{loss:.3f}")`: formatting a tensor reads it.
                "print" => {
                    let args = &call.arguments.args;
                    (args.iter().any(|a| any_in(a, &mut |e| is_loss(e)))
                        && !args
                            .iter()
                            .any(|a| any_in(a, &mut |e| syncs(e) || is_cast(e))))
                    .then(|| call.range())
                }
                _ => None,
            }
        }
        // `if loss < best:`: the truth of a tensor.
        AnyNodeRef::StmtIf(ast::StmtIf { test, .. })
        | AnyNodeRef::StmtWhile(ast::StmtWhile { test, .. })
        | AnyNodeRef::StmtAssert(ast::StmtAssert { test, .. }) => {
            (matches!(
                test.as_ref(),
                Expr::Compare(_) | Expr::Call(_) | Expr::Name(_)
            ) && any_in(test, &mut |e| is_loss(e))
                && !any_in(test, &mut |e| syncs(e) || is_cast(e)))
            .then(|| test.range())
        }
        _ => None,
    }
}

/// `float(x)` / `int(x)` / `bool(x)`.
fn is_cast(e: &Expr) -> bool {
    matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(n) if matches!(n.id.as_str(), "float" | "int" | "bool")))
}

/// Is the root of an attribute/subscript chain a name `pred` accepts (`loss`, `loss.data`)?
fn root_is(e: &Expr, pred: &dyn Fn(&Expr) -> bool) -> bool {
    let mut e = e;
    loop {
        match e {
            Expr::Attribute(a) => e = &a.value,
            Expr::Subscript(s) => e = &s.value,
            other => return pred(other),
        }
    }
}
