//! CUDA tests that choose a third-party library's CUDA accelerator: `accelerator = "gpu" if
//! torch.cuda.is_available() else "cpu"`, `devices = torch.cuda.device_count()`, or an `if
//! n_gpus > 1:` that sets them, fed to a Lightning `Trainer` or `Fabric`. Extended to any
//! accelerator, the test makes a TPU VM ask Lightning for its CUDA accelerator ("gpu"), which
//! fails at `Trainer(...)` where the original fell back to the CPU; Lightning has no TorchTPU
//! accelerator (LIB012). Such a test keeps CUDA's question, with a note.

use std::collections::HashSet;

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::RuleSet;
use crate::port::semantic::Semantic;

/// The keywords of a Lightning `Trainer`/`Fabric` that name its accelerator and devices.
const KEYWORDS: &[&str] = &["accelerator", "devices", "gpus", "auto_select_gpus"];

const NOTE: &str = "not rewritten: this CUDA test chooses the accelerator or devices given to Lightning (\"gpu\" is Lightning's CUDA accelerator; it has none for TorchTPU, LIB012): asked about any accelerator, a TPU VM would ask Lightning for CUDA and fail at Trainer creation; port the Lightning setup by hand";

/// Keep the fixes of CUD findings in code that chooses a Lightning accelerator.
pub(in crate::port::rewrite) fn keep_lightning_choices(
    sem: &Semantic,
    rules: &RuleSet,
    module: &[Stmt],
    diags: &mut [Diagnostic],
) {
    if !diags
        .iter()
        .any(|d| d.fix.is_some() && rules.rules[d.rule].family == "CUD")
    {
        return;
    }
    let mut calls = Calls {
        sem,
        values: vec![],
    };
    for stmt in module {
        calls.visit_stmt(stmt);
    }
    if calls.values.is_empty() {
        return;
    }
    let mut chosen: Vec<TextRange> = calls.values.iter().map(|e| e.range()).collect();
    let mut names: HashSet<String> = HashSet::new();
    for e in &calls.values {
        read_names(e, &mut names);
    }
    // Two rounds: `accelerator = "gpu"` under `if n_gpus > 0:`, `n_gpus = torch.cuda.device_count()`.
    for _ in 0..2 {
        let mut sets = Sets {
            names: &names,
            found: vec![],
        };
        for stmt in module {
            sets.visit_stmt(stmt);
        }
        for (range, reads) in sets.found {
            chosen.push(range);
            names.extend(reads);
        }
    }
    for d in diags.iter_mut() {
        if d.fix.is_some()
            && rules.rules[d.rule].family == "CUD"
            && chosen.iter().any(|r| r.contains_range(d.range))
        {
            d.keep(NOTE.to_string());
        }
    }
}

/// The values of the accelerator keywords of Lightning's `Trainer`/`Fabric` calls.
struct Calls<'s, 'a> {
    sem: &'s Semantic,
    values: Vec<&'a Expr>,
}

impl<'a> SourceOrderVisitor<'a> for Calls<'_, 'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr
            && self
                .sem
                .qualified_name(&c.func)
                .is_some_and(|q| is_lightning(&q))
        {
            for k in &c.arguments.keywords {
                if k.arg
                    .as_ref()
                    .is_some_and(|a| KEYWORDS.contains(&a.as_str()))
                {
                    self.values.push(&k.value);
                }
            }
        }
        source_order::walk_expr(self, expr);
    }
}

fn is_lightning(q: &str) -> bool {
    let root = ["lightning.", "pytorch_lightning.", "lightning_fabric."];
    root.iter().any(|r| q.starts_with(r)) && (q.ends_with(".Trainer") || q.ends_with(".Fabric"))
}

/// The statements that set one of `names` (an assignment, or an `if` whose branches assign
/// one: its test), with the names they read.
struct Sets<'n> {
    names: &'n HashSet<String>,
    found: Vec<(TextRange, HashSet<String>)>,
}

impl<'a> SourceOrderVisitor<'a> for Sets<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Assign(a) if a.targets.iter().any(|t| self.sets(t)) => {
                let mut reads = HashSet::new();
                read_names(&a.value, &mut reads);
                self.found.push((a.range(), reads));
            }
            Stmt::If(i) => {
                let branches = std::iter::once(&i.body[..])
                    .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]));
                if branches.into_iter().any(|b| self.assigns(b)) {
                    let tests = std::iter::once(&*i.test)
                        .chain(i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()));
                    for t in tests {
                        let mut reads = HashSet::new();
                        read_names(t, &mut reads);
                        self.found.push((t.range(), reads));
                    }
                }
            }
            _ => {}
        }
        source_order::walk_stmt(self, stmt);
    }
}

impl Sets<'_> {
    fn sets(&self, target: &Expr) -> bool {
        matches!(target, Expr::Name(n) if self.names.contains(n.id.as_str()))
    }

    fn assigns(&self, body: &[Stmt]) -> bool {
        body.iter().any(|s| match s {
            Stmt::Assign(a) => a.targets.iter().any(|t| self.sets(t)),
            _ => false,
        })
    }
}

/// The names an expression reads.
fn read_names(e: &Expr, out: &mut HashSet<String>) {
    struct Names<'o>(&'o mut HashSet<String>);
    impl<'a> SourceOrderVisitor<'a> for Names<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Name(n) = expr
                && n.ctx == ast::ExprContext::Load
            {
                self.0.insert(n.id.to_string());
            }
            source_order::walk_expr(self, expr);
        }
    }
    Names(out).visit_expr(e);
}
