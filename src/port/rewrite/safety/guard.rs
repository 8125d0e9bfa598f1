//! Guards of CUDA-only code: is this test (`x.is_cuda`, `torch.cuda.is_available()`,
//! `x.device.type == "cuda"`) what keeps TPU tensors away from a Triton kernel, a CUDA graph, a
//! custom op or a compiled extension? `if not x.is_cuda: return portable(x)` before a Triton
//! launch, `if torch.cuda.is_available(): <CUDA graph>`, `y = kernel(x) if x.is_cuda else
//! ref(x)`, `@unittest.skipUnless(torch.cuda.is_available(), "CUDA-only")`: rewriting such a test
//! to ask about the TPU would send TPU tensors into CUDA code. A finding in such a test keeps no
//! fix; its note says what the guarded code is.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::cuda_only::{cuda_only_name, gpu_choice, top_level, triton_kernels};
use crate::port::rewrite::Checker;
use crate::port::semantic::Semantic;

/// A skip reason that says the test is about CUDA-only machinery.
static CUDA_ONLY_REASON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)cuda[- _]?only|only (on|for|with) cuda|triton|helion|cuda ?graph|cudnn|cutlass|nccl|cuda kernel|custom (cuda )?kernel|cpp_extension|flash.?attn|nvfuser|cupy|requires? (pytorch ?\+ ?)?cuda\b").unwrap()
});

/// Finds the first CUDA-only thing in statements or expressions.
struct Scan<'s> {
    sem: &'s Semantic,
    /// Local names of CUDA-only things (Triton kernels, modules built by `load_inline`), with
    /// what they are.
    kernels: HashMap<String, String>,
    found: Option<String>,
    /// Scanning the code a CUDA test selects: [`NOT_ON_A_TPU`] counts too.
    guarded: bool,
    /// A GPU choice by name counts too (not beside Lightning: LIB012 says more there).
    gpu_choices: bool,
}

/// Code that is not CUDA-only but must not be selected on a TPU: DataParallel replicates with
/// `torch.cuda.comm` broadcasts, so on a multi-chip TPU VM (where `torch.accelerator` counts the
/// chips) its first forward fails, where the CUDA count it was gated on kept it off (set H).
const NOT_ON_A_TPU: &[&str] = &[
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.DataParallel",
];

/// A project's or library's own single-process DataParallel (`DataParallelModel`,
/// `DataParallelCriterion`, `BalancedDataParallel`, `DataParallelWithCallback`): subclasses of
/// `nn.DataParallel` or copies of its scatter-gather, which fail on a TPU as it does (set O: a
/// Music Transformer's `DataParallelModel` behind a device-count guard).
fn data_parallel_variant(q: &str) -> bool {
    let last = q.rsplit('.').next().unwrap_or(q);
    last.contains("DataParallel") && !last.contains("Distributed")
}

impl Scan<'_> {
    /// Adds the names the statements of `body` assign from CUDA-only code (in order: a later
    /// assignment may build on an earlier one).
    fn assigned_kernels(&mut self, body: &[Stmt]) {
        for stmt in body {
            let Stmt::Assign(a) = stmt else { continue };
            self.found = None;
            self.visit_expr(&a.value);
            if let Some(what) = self.found.take() {
                for t in &a.targets {
                    if let Expr::Name(n) = t {
                        let desc = format!("`{}`, built by {what}", n.id);
                        self.kernels.insert(n.id.to_string(), desc);
                    }
                }
            }
        }
    }
}

impl Scan<'_> {
    /// What makes the qualified name `q` one a guard keeps (CUDA-only, or wrong on a TPU).
    fn named(&self, q: &str) -> Option<String> {
        cuda_only_name(q).or_else(|| {
            (self.guarded && (NOT_ON_A_TPU.contains(&q) || data_parallel_variant(q)))
                .then(|| format!("`{q}`, which fails on a multi-chip TPU host"))
        })
    }
}

impl<'a> SourceOrderVisitor<'a> for Scan<'_> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        if self.found.is_some() {
            return TraversalSignal::Skip;
        }
        self.found = match node {
            AnyNodeRef::StmtImport(i) => i.names.iter().find_map(|a| cuda_only_name(&a.name)),
            AnyNodeRef::StmtImportFrom(i) => {
                let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                cuda_only_name(module).or_else(|| {
                    i.names
                        .iter()
                        .find_map(|a| cuda_only_name(&format!("{module}.{}", a.name)))
                })
            }
            _ => None,
        };
        if self.found.is_some() {
            TraversalSignal::Skip
        } else {
            TraversalSignal::Traverse
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.found.is_some() {
            return;
        }
        self.found = match expr {
            Expr::Name(n) if n.ctx == ExprContext::Load => match self.kernels.get(n.id.as_str()) {
                Some(what) => Some(what.clone()),
                None => self.sem.qualified_name(expr).and_then(|q| self.named(&q)),
            },
            Expr::Attribute(a) if a.ctx == ExprContext::Load => {
                let method = match a.value.as_ref() {
                    Expr::Name(n) if n.id.as_str() == "self" => {
                        self.kernels.get(&format!("self.{}", a.attr)).cloned()
                    }
                    _ => None,
                };
                method.or_else(|| self.sem.qualified_name(expr).and_then(|q| self.named(&q)))
            }
            // A GPU choice handed on as a name (`'gpu' if torch.cuda.is_available() else
            // 'cpu'`, `opt.backend = 'gpu'`): the code it feeds builds its GPU path on CUDA
            // (set AC: a wavelet backend that put its filters on `torch.device('cuda')`).
            Expr::StringLiteral(s) if self.gpu_choices && gpu_choice(s.value.to_str()) => {
                Some(format!(
                    "the choice \"{}\", a GPU setting the code it feeds builds on CUDA",
                    s.value
                ))
            }
            _ => None,
        };
        if self.found.is_none() {
            source_order::walk_expr(self, expr);
        }
    }
}

impl<'a> Checker<'a> {
    /// Take the fixes off the findings made since (`diags`, `fallbacks`) that sit in the test of
    /// a guard of CUDA-only code, with a note saying why.
    pub(in crate::port::rewrite) fn keep_cuda_guards(&mut self, diags: usize, fallbacks: usize) {
        for i in diags..self.diags.len() {
            if self.diags[i].fix.is_some()
                && let Some(note) = self.cuda_only_guard(self.diags[i].range)
            {
                self.diags[i].keep(note);
            }
        }
        for i in fallbacks..self.fallbacks.len() {
            if self.fallbacks[i].fix.is_some()
                && let Some(note) = self.cuda_only_guard(self.fallbacks[i].range)
            {
                self.fallbacks[i].keep(note);
            }
        }
    }

    /// Take the fixes off the device findings made since `diags` (a device string, a `.cuda()`
    /// move) that sit in a function running CUDA-only code: `torch.randn(..., device="cuda")` or
    /// `w.cuda()` feeding a Triton or gemlite kernel names that kernel's device, not the
    /// program's.
    pub(in crate::port::rewrite) fn keep_cuda_only_devices(&mut self, diags: usize) {
        let mut note = None;
        for i in diags..self.diags.len() {
            let d = &self.diags[i];
            if d.fix.is_none() || !matches!(self.rule(d.rule).family.as_str(), "DEV" | "STM") {
                continue;
            }
            if note.is_none() {
                note = Some(self.cuda_only_function().map(device_note));
            }
            if let Some(Some(n)) = &note {
                self.diags[i].keep(n.clone());
            }
        }
    }

    /// What CUDA-only code the outermost function around the current node runs, if any.
    fn cuda_only_function(&self) -> Option<String> {
        let pos = self
            .stack
            .iter()
            .position(|n| matches!(n, AnyNodeRef::StmtFunctionDef(_)))?;
        let AnyNodeRef::StmtFunctionDef(f) = self.stack[pos] else {
            return None;
        };
        let mut scan = self.scanner(&self.stack[..=pos]);
        scan.scan_stmts(&f.body);
        if scan.found.is_some() {
            return scan.found;
        }
        // A parameter default of a method (`def __init__(self, device=torch.device("cuda"))`)
        // is the instance's device, which every method of the class uses.
        let in_parameters = self.stack[pos + 1..]
            .iter()
            .any(|n| matches!(n, AnyNodeRef::Parameters(_)));
        if let (true, Some(AnyNodeRef::StmtClassDef(c))) =
            (in_parameters, pos.checked_sub(1).map(|p| self.stack[p]))
        {
            for m in &c.body {
                if let ast::Stmt::FunctionDef(m) = m {
                    scan.scan_stmts(&m.body);
                }
            }
        }
        scan.found
    }

    /// If the expression at `range` is (part of) the test of a guard whose code is CUDA-only:
    /// the note for its finding.
    fn cuda_only_guard(&self, range: TextRange) -> Option<String> {
        self.guard_in(&self.stack, range, true)
    }

    /// [`Self::cuda_only_guard`] for the expression at `range` with these ancestors; with
    /// `follow`, a test first assigned to a name (`use_triton = x.is_cuda and HAS_TRITON`) is
    /// followed to the guards that read the name.
    fn guard_in(&self, stack: &[AnyNodeRef<'a>], range: TextRange, follow: bool) -> Option<String> {
        for pos in (0..stack.len()).rev() {
            match stack[pos] {
                AnyNodeRef::StmtIf(s) if s.test.range().contains_range(range) => {
                    let mut scan = self.guard_scanner(stack);
                    scan.scan_stmts(&s.body);
                    for c in &s.elif_else_clauses {
                        scan.scan_stmts(&c.body);
                    }
                    if s.body.last().is_some_and(exits) {
                        let parent = pos.checked_sub(1).map(|p| stack[p]);
                        scan.scan_rest(self.after(parent, s.range));
                    }
                    if scan.found.is_none() && follow {
                        let mut blocks = vec![&s.body[..]];
                        blocks.extend(s.elif_else_clauses.iter().map(|c| &c.body[..]));
                        let mut reads = self.flag_reads(&blocks).into_iter();
                        return reads.find_map(|(anc, at)| self.guard_in(&anc, at, false));
                    }
                    return scan.found.map(guard_note);
                }
                AnyNodeRef::ElifElseClause(c)
                    if c.test
                        .as_ref()
                        .is_some_and(|t| t.range().contains_range(range)) =>
                {
                    let mut scan = self.guard_scanner(stack);
                    scan.scan_stmts(&c.body);
                    return scan.found.map(guard_note);
                }
                AnyNodeRef::StmtAssert(a) if a.test.range().contains_range(range) => {
                    let mut scan = self.guard_scanner(stack);
                    let parent = pos.checked_sub(1).map(|p| stack[p]);
                    scan.scan_rest(self.after(parent, a.range));
                    return scan.found.map(guard_note);
                }
                AnyNodeRef::ExprIf(e) if e.test.range().contains_range(range) => {
                    let mut scan = self.guard_scanner(stack);
                    scan.visit_expr(&e.body);
                    scan.visit_expr(&e.orelse);
                    return scan.found.map(guard_note);
                }
                AnyNodeRef::ExprCall(c)
                    if is_skip(&c.func)
                        && c.arguments
                            .args
                            .first()
                            .is_some_and(|a| a.range().contains_range(range)) =>
                {
                    return self.skip_guard(c, &stack[..pos]);
                }
                AnyNodeRef::StmtAssign(a) if follow && is_test_like(&a.value) => {
                    return self
                        .uses_of_assigned(stack, range, true)
                        .into_iter()
                        .find_map(|(anc, at)| self.guard_in(&anc, at, false));
                }
                AnyNodeRef::StmtReturn(r)
                    if follow && r.value.as_deref().is_some_and(is_test_like) =>
                {
                    return self.predicate_guard(&stack[..pos]);
                }
                AnyNodeRef::StmtFunctionDef(_)
                | AnyNodeRef::StmtClassDef(_)
                | AnyNodeRef::ExprLambda(_) => return None,
                n if n.as_stmt_ref().is_some() => return None,
                _ => {}
            }
        }
        None
    }

    /// [`Self::guard_in`] for a call of a predicate (`callers.rs`), not followed further.
    pub(super) fn guard_of_call(&self, stack: &[AnyNodeRef<'a>], at: TextRange) -> Option<String> {
        self.guard_in(stack, at, false)
    }

    /// `skipUnless(torch.cuda.is_available(), reason)`: CUDA-only if the reason says so or the
    /// decorated test uses CUDA-only code.
    fn skip_guard(&self, c: &ast::ExprCall, ancestors: &[AnyNodeRef<'a>]) -> Option<String> {
        let reason = c
            .arguments
            .args
            .get(1)
            .or_else(|| c.arguments.find_keyword("reason").map(|k| &k.value))
            .or_else(|| c.arguments.find_keyword("msg").map(|k| &k.value));
        if let Some(Expr::StringLiteral(s)) = reason
            && let Some(m) = CUDA_ONLY_REASON.find(s.value.to_str())
        {
            return Some(skip_note(&format!("the reason says \"{}\"", m.as_str())));
        }
        let n = ancestors.len();
        if n >= 2 && matches!(ancestors[n - 1], AnyNodeRef::Decorator(_)) {
            let mut scan = self.scanner(ancestors);
            match ancestors[n - 2] {
                AnyNodeRef::StmtFunctionDef(f) => scan.scan_stmts(&f.body),
                AnyNodeRef::StmtClassDef(k) => scan.scan_stmts(&k.body),
                _ => {}
            }
            return scan.found.map(|w| skip_note(&format!("the test uses {w}")));
        }
        // `pytestmark = pytest.mark.skipif(...)` selects every test of the module.
        if let Some(AnyNodeRef::StmtAssign(a)) = ancestors.last()
            && a.targets
                .iter()
                .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == "pytestmark"))
        {
            let mut scan = self.scanner(ancestors);
            scan.scan_stmts(&self.parsed.module.body);
            return scan
                .found
                .map(|w| skip_note(&format!("the module's tests use {w}")));
        }
        None
    }

    /// The module's CUDA-only functions and the names it imports from CUDA-only modules of its
    /// project, found once.
    pub(in crate::port::rewrite) fn cuda_defs(&self) -> &HashMap<String, String> {
        self.cuda_defs.get_or_init(|| {
            let body = &self.parsed.module.body;
            let imported = match &self.facts.path {
                Some(path) => crate::port::neighbours::cuda_only_imports(path, body),
                None => HashMap::new(),
            };
            cuda_only_defs(body, self.sem, imported)
        })
    }

    /// A scan that knows the file's Triton kernels and the names the module, and the function
    /// around the guard, assign from CUDA-only code.
    fn scanner(&self, stack: &[AnyNodeRef<'a>]) -> Scan<'_> {
        // The module's part is the same for every guard of the file: made once.
        let kernels = self
            .module_kernels
            .get_or_init(|| {
                let mut scan = Scan {
                    sem: self.sem,
                    kernels: self.cuda_defs().clone(),
                    found: None,
                    guarded: false,
                    gpu_choices: false,
                };
                scan.assigned_kernels(&self.parsed.module.body);
                scan.kernels
            })
            .clone();
        let mut scan = Scan {
            sem: self.sem,
            kernels,
            found: None,
            guarded: false,
            gpu_choices: false,
        };
        let func = stack.iter().rev().find_map(|n| match n {
            AnyNodeRef::StmtFunctionDef(f) => Some(&f.body[..]),
            _ => None,
        });
        if let Some(body) = func {
            scan.assigned_kernels(body);
        }
        scan.found = None;
        scan
    }

    /// [`Self::scanner`] for the code a CUDA test selects (under the portable port, which
    /// extends the test to the TPU, [`NOT_ON_A_TPU`] counts too; `--to tpu` keeps its output).
    fn guard_scanner(&self, stack: &[AnyNodeRef<'a>]) -> Scan<'_> {
        let mut scan = self.scanner(stack);
        scan.guarded = self.target == crate::port::rules::Target::Portable;
        scan.gpu_choices = scan.guarded && !self.src.contains("lightning");
        scan
    }

    /// The statements after `stmt` in the block of `parent` that holds it (the module's body
    /// when there is no parent).
    fn after(&self, parent: Option<AnyNodeRef<'a>>, stmt: TextRange) -> &'a [Stmt] {
        let blocks: Vec<&'a [Stmt]> = match parent {
            None => vec![&self.parsed.module.body],
            Some(AnyNodeRef::StmtFunctionDef(f)) => vec![&f.body],
            Some(AnyNodeRef::StmtClassDef(c)) => vec![&c.body],
            Some(AnyNodeRef::StmtIf(i)) => vec![&i.body],
            Some(AnyNodeRef::ElifElseClause(c)) => vec![&c.body],
            Some(AnyNodeRef::StmtFor(f)) => vec![&f.body, &f.orelse],
            Some(AnyNodeRef::StmtWhile(w)) => vec![&w.body, &w.orelse],
            Some(AnyNodeRef::StmtWith(w)) => vec![&w.body],
            Some(AnyNodeRef::StmtTry(t)) => vec![&t.body, &t.orelse, &t.finalbody],
            Some(AnyNodeRef::ExceptHandlerExceptHandler(h)) => vec![&h.body],
            Some(AnyNodeRef::MatchCase(m)) => vec![&m.body],
            _ => vec![],
        };
        for b in blocks {
            if let Some(i) = b.iter().position(|s| s.range() == stmt) {
                return &b[i + 1..];
            }
        }
        &[]
    }
}

impl Scan<'_> {
    fn scan_stmts(&mut self, stmts: &[Stmt]) {
        for stmt in stmts {
            self.visit_stmt(stmt);
        }
    }

    /// The code that runs after a guard that leaves: its statements, not the functions and
    /// classes it defines (a `@triton.jit` kernel defined later in the module runs nothing).
    fn scan_rest(&mut self, stmts: &[Stmt]) {
        for stmt in stmts {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                self.visit_stmt(stmt);
            }
        }
    }
}

/// The module's CUDA-only functions: Triton kernels, names imported from CUDA-only modules of
/// the project (`imported`), and functions and methods (as `self.name`) that use one or other
/// CUDA-only code (two levels deep).
fn cuda_only_defs(
    module: &[Stmt],
    sem: &Semantic,
    imported: HashMap<String, String>,
) -> HashMap<String, String> {
    let mut kernels = triton_kernels(module, sem);
    kernels.extend(imported);
    let mut scan = Scan {
        sem,
        kernels,
        found: None,
        guarded: false,
        gpu_choices: false,
    };
    let mut defs: Vec<(String, &[Stmt])> = vec![];
    for stmt in top_level(module) {
        match stmt {
            Stmt::FunctionDef(f) => defs.push((f.name.to_string(), &f.body)),
            Stmt::ClassDef(c) => {
                for m in &c.body {
                    if let Stmt::FunctionDef(f) = m {
                        defs.push((format!("self.{}", f.name), &f.body));
                    }
                }
            }
            _ => {}
        }
    }
    // Until nothing changes: a wrapper of a wrapper of a kernel runs the kernel.
    loop {
        let mut changed = false;
        for (name, body) in &defs {
            if scan.kernels.contains_key(name) {
                continue;
            }
            scan.found = None;
            scan.scan_stmts(body);
            if let Some(what) = scan.found.take() {
                let desc = format!("`{name}`, which uses {what}");
                scan.kernels.insert(name.clone(), desc);
                changed = true;
            }
        }
        if !changed {
            return scan.kernels;
        }
    }
}

/// A value that is a condition (`x.is_cuda and ...`, `torch.cuda.is_available()`, `not ...`,
/// a comparison): only such an assignment is followed to its uses.
fn is_test_like(e: &Expr) -> bool {
    match e {
        Expr::BoolOp(_) | Expr::UnaryOp(_) | Expr::Compare(_) => true,
        Expr::Attribute(a) => a.attr.starts_with("is_"),
        Expr::Call(c) => matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.starts_with("is_")),
        _ => false,
    }
}

/// Does the block end by leaving (so the code after the `if` is the other branch)?
pub(super) fn exits(s: &Stmt) -> bool {
    match s {
        Stmt::Return(_) | Stmt::Raise(_) | Stmt::Continue(_) | Stmt::Break(_) => true,
        // `self.skipTest(...)`, `pytest.skip(...)`: the test ends there.
        Stmt::Expr(e) => matches!(
            e.value.as_ref(),
            Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
                if a.attr.as_str() == "skipTest"
                    || (a.attr.as_str() == "skip"
                        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "pytest")))
        ),
        _ => false,
    }
}

/// `unittest.skipIf`, `skipUnless`, `pytest.mark.skipif`.
fn is_skip(func: &Expr) -> bool {
    let name = match func {
        Expr::Attribute(a) => a.attr.as_str(),
        Expr::Name(n) => n.id.as_str(),
        _ => return false,
    };
    matches!(name, "skipIf" | "skipUnless" | "skipif")
}

fn guard_note(what: String) -> String {
    let only = if what.contains("torch_xla") {
        "PyTorch/XLA-only"
    } else {
        "CUDA-only"
    };
    format!(
        "not rewritten: this test guards {only} code ({what}); on a TPU the portable path \
         must keep running, so leave the guard as it is (or port the {only} path by hand)"
    )
}

fn device_note(what: String) -> String {
    format!(
        "not rewritten: this function runs CUDA-only code ({what}), so the device here is that \
         code's, not the program's; port the function by hand"
    )
}

fn skip_note(why: &str) -> String {
    format!(
        "not rewritten: this skip condition keeps a CUDA-only test off other devices ({why}); \
         leave it as it is, or port the test by hand"
    )
}
