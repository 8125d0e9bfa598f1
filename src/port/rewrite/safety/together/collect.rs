//! The guards of a module for [`super::keep_together`]: each `if`/`elif` chain, conditional
//! expression, `and` test and skip decorator with the code it selects, the CUDA names in the
//! module (strings, identifiers, calls of its CUDA-only functions, flags that ask about CUDA,
//! here or in a module of the project it imports them from) and its negated comparisons.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::port::rewrite::safety::cuda_only::CUDA_ONLY_ROOTS;

/// A test and the code it selects.
pub(super) struct Guard {
    pub(super) test: TextRange,
    pub(super) arms: Vec<TextRange>,
    /// The tests of its chain (its own among them), where another backend may be tested.
    pub(super) chain: Vec<TextRange>,
}

pub(super) fn says_cuda(s: &str) -> bool {
    CUDA_WORD.is_match(s)
}

pub(super) static CUDA_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)cuda|rocm").unwrap());

/// Prose that names CUDA-only machinery (`"not supported for AWQ CUDA/XPU kernels"`).
pub(super) static CUDA_MACHINERY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bcuda\b[^.]{0,12}\bkernels?\b|cuda[- _]?only|cuda ?graph|cpp_extension|\btriton\b",
    )
    .unwrap()
});

/// Identifiers about NVIDIA/AMD hardware: capability checks and CUDA-only libraries (one
/// case-insensitive pattern, so no lower-cased copy per identifier).
pub(super) static CUDA_IDENT: LazyLock<Regex> = LazyLock::new(|| {
    let libraries: Vec<String> = CUDA_ONLY_ROOTS
        .iter()
        .filter(|r| !r.contains('.'))
        .map(|r| regex::escape(r))
        .collect();
    Regex::new(&format!(
        r"(?i)rocm|pynvml|nvidia_smi|gputil|(^|_)(sm\d+|sm_at_least|sm_version|mi\d{{3}}|hopper|blackwell|ampere|fa3|cublas|cudnn|nvml|nccl)(_|$|\d)|{}",
        libraries.join("|")
    ))
    .unwrap()
});

/// Another backend's name inside an identifier or string (`torch.xpu`, `is_torch_npu_available`,
/// `"mps"`), lower-cased.
pub(super) static OTHER_BACKEND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(^|[^a-z])(xpu|mps|npu|mlu|musa|hpu|neuron|neuroncore|mtia|tpu|xla|habana|gaudi|ascend|ipex)([^a-z]|$)").unwrap()
});

/// A branch for the TPU: TorchTPU's or PyTorch/XLA's (which a port makes TorchTPU's).
pub(super) static TPU_BRANCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(^|[^a-z])(tpu|xla)([^a-z]|$)").unwrap());

/// A string that names CUDA: a name (`"cuda"`, `"CUDAExecutionProvider"`), or prose that names
/// CUDA-only machinery. Other prose about CUDA (a log line, a skip reason) is a message, not
/// CUDA code.
/// A function named for GPUs (`is_torch_bf16_gpu_available`, `get_gpu_memory`).
static GPU_WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)(^|_)gpus?(_|$)").unwrap());

/// A helper named for memory statistics (`get_memory_stats`, `log_peak_memory`).
static MEMORY_STATS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)memory_(stats|summary)|peak_mem|max_memory").unwrap());

pub(super) fn string_says_cuda(s: &str) -> bool {
    says_cuda(s) && (!s.contains(char::is_whitespace) || CUDA_MACHINERY.is_match(s))
}

/// An identifier that names CUDA-only code: `forward_cuda`, `is_sm_at_least_90`, `has_gemlite`.
pub(super) fn ident_says_cuda(id: &str) -> bool {
    CUDA_IDENT.is_match(id)
}

pub(super) fn block(stmts: &[ast::Stmt]) -> Option<TextRange> {
    let first = stmts.first()?;
    let last = stmts.last()?;
    Some(TextRange::new(first.start(), last.end()))
}

/// `torch.load(...)` with no `map_location`: its tensors go back to the devices they were saved
/// from.
fn restores_devices(c: &ast::ExprCall) -> bool {
    matches!(c.func.as_ref(), Expr::Attribute(a)
        if a.attr.as_str() == "load" && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "torch"))
        && c.arguments.find_keyword("map_location").is_none()
        && c.arguments.args.len() < 2
}

/// Collects the guards and the CUDA names of a module.
pub(super) struct Collect<'d> {
    /// Names the module imports with `from ... import` at top level: the import, and the name
    /// in the module it is read from.
    imported: HashMap<&'d str, (&'d ast::StmtImportFrom, &'d str)>,
    /// Where those names are read.
    imported_uses: Vec<(&'d str, TextRange)>,
    /// The module's CUDA-only functions (`guard.rs`): calling one is CUDA code.
    cuda_defs: &'d HashMap<String, String>,
    /// Tests of an `if` that only rejects (`...: raise ValueError`): validations a TPU passes,
    /// whose negated comparisons are not gates.
    validations: Vec<TextRange>,
    g: Guards,
}

/// One clause of an `if`/`elif`/`else` chain: its test (none for `else`) and its body.
pub(super) struct Clause {
    pub(super) test: Option<TextRange>,
    pub(super) body: TextRange,
    /// An `else` that rejects what reaches it (`raise`, `assert False`, `sys.exit(...)`).
    pub(super) rejects: bool,
}

/// A chain whose first clause only picks a device (`if torch.cuda.is_available(): device =
/// "cuda"`, or `"cuda" if torch.cuda.is_available() else ...`): under `--to portable` it gets an
/// accelerator branch (`branch.rs`) where it also tests another backend.
pub(super) struct Branch {
    /// The first clause's test.
    pub(super) test: TextRange,
    /// Its body: the statements, or the conditional expression's value.
    pub(super) body: TextRange,
    pub(super) kind: BranchKind,
}

pub(super) enum BranchKind {
    /// An `if` statement (starting at `start`): the branch goes before its `else` (at `before`),
    /// or after its end.
    Stmt {
        start: TextSize,
        before: Option<TextSize>,
        end: TextSize,
    },
    /// A conditional expression: the branch replaces its last `else` value.
    Expr { last: TextRange },
}

/// A statement that only binds a value (`device = "cuda"`, `self.device = ...`) or returns
/// one (`return torch.device("cuda")`, a helper that picks the device).
fn binds(s: &ast::Stmt) -> bool {
    match s {
        ast::Stmt::Assign(a) => {
            a.targets.len() == 1 && matches!(a.targets[0], Expr::Name(_) | Expr::Attribute(_))
        }
        ast::Stmt::Return(r) => r.value.is_some(),
        _ => false,
    }
}

/// Does this statement leave the function (or the test): `return`, `raise`, a skip?
fn exits(s: &ast::Stmt) -> bool {
    match s {
        ast::Stmt::Return(_) | ast::Stmt::Raise(_) => true,
        ast::Stmt::Expr(e) => matches!(e.value.as_ref(), Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Attribute(a) if matches!(a.attr.as_str(), "skipTest" | "skip" | "exit"))),
        _ => false,
    }
}

/// Does this block start by rejecting what reaches it?
fn rejects(body: &[ast::Stmt]) -> bool {
    match body.first() {
        Some(ast::Stmt::Raise(_)) => true,
        Some(ast::Stmt::Assert(a)) => {
            matches!(a.test.as_ref(), Expr::BooleanLiteral(b) if !b.value)
        }
        Some(ast::Stmt::Expr(e)) => matches!(e.value.as_ref(), Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.as_str() == "exit")),
        _ => false,
    }
}

/// The first of `tests` that names another backend once the findings in it are blanked out
/// (a CUD finding on `torch.tpu.is_available()` names no other backend).
pub(super) fn other_backend(
    src: &str,
    tests: &[TextRange],
    findings: &[TextRange],
) -> Option<TextRange> {
    naming(&OTHER_BACKEND, src, tests, findings)
}

/// The first of `tests` whose text, with the findings in it blanked out, matches `re`.
pub(super) fn naming(
    re: &Regex,
    src: &str,
    tests: &[TextRange],
    findings: &[TextRange],
) -> Option<TextRange> {
    tests.iter().copied().find(|t| {
        let mut text = src[*t].to_ascii_lowercase().into_bytes();
        for f in findings.iter().filter(|f| t.contains_range(**f)) {
            let (a, b) = (
                (f.start() - t.start()).to_usize(),
                (f.end() - t.start()).to_usize(),
            );
            text[a..b].fill(b' ');
        }
        re.is_match(&String::from_utf8_lossy(&text))
    })
}

impl Collect<'_> {
    fn stmt_if(&mut self, s: &ast::StmtIf) {
        let mut tests = vec![s.test.range()];
        tests.extend(
            s.elif_else_clauses
                .iter()
                .filter_map(|c| c.test.as_ref())
                .map(|t| t.range()),
        );
        let clauses = std::iter::once((Some(s.test.range()), &s.body))
            .chain(
                s.elif_else_clauses
                    .iter()
                    .map(|c| (c.test.as_ref().map(|t| t.range()), &c.body)),
            )
            .filter_map(|(test, body)| {
                Some(Clause {
                    test,
                    body: block(body)?,
                    rejects: test.is_none() && rejects(body),
                })
            })
            .collect();
        self.g.chains.push(clauses);
        // `if 'cpu' not in device and 'cuda' not in device: raise ValueError` (set AB).
        if s.elif_else_clauses.is_empty()
            && s.body.len() <= 3
            && matches!(s.body.last(), Some(ast::Stmt::Raise(_)))
        {
            self.validations.push(s.test.range());
        }
        let elifs = s.elif_else_clauses.iter().any(|c| c.test.is_some());
        if elifs
            && (1..=3).contains(&s.body.len())
            && s.body.iter().all(binds)
            && let Some(body) = block(&s.body)
        {
            let last = s.elif_else_clauses.last();
            self.g.branches.push(Branch {
                test: s.test.range(),
                body,
                kind: BranchKind::Stmt {
                    start: s.start(),
                    before: last.filter(|c| c.test.is_none()).map(|c| c.start()),
                    end: s.end(),
                },
            });
        }
        let mut arms: Vec<TextRange> = block(&s.body).into_iter().collect();
        for (i, c) in s.elif_else_clauses.iter().enumerate() {
            arms.push(c.range());
            if let Some(test) = &c.test {
                // An `elif` selects its own body and the clauses after it.
                let mut own: Vec<TextRange> = block(&c.body).into_iter().collect();
                own.extend(s.elif_else_clauses[i + 1..].iter().map(|c| c.range()));
                self.g.guards.push(Guard {
                    test: test.range(),
                    arms: own,
                    chain: tests.clone(),
                });
            }
        }
        self.g.guards.push(Guard {
            test: s.test.range(),
            arms,
            chain: tests,
        });
    }

    /// `if not torch.cuda.is_available(): return` (or `self.skipTest(...)`, `pytest.skip(...)`,
    /// `raise SkipTest`) in a function's body: the test selects the rest of the function too (set
    /// U: a test that builds a tiny-cuda-nn network after returning early without CUDA).
    fn early_exits(&mut self, body: &[ast::Stmt]) {
        for (i, s) in body.iter().enumerate() {
            let ast::Stmt::If(s) = s else { continue };
            let (Some(rest), true) = (block(&body[i + 1..]), s.elif_else_clauses.is_empty()) else {
                continue;
            };
            // `if not <test>: return`: the rest runs when the test holds (CUDA's code).
            let negated = matches!(s.test.as_ref(), Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not);
            if negated && s.body.len() <= 3 && s.body.last().is_some_and(exits) {
                self.g.guards.push(Guard {
                    test: s.test.range(),
                    arms: vec![rest],
                    chain: vec![s.test.range()],
                });
            }
        }
    }

    /// `@skipIf(test, ...)`, `@pytest.mark.skipif(test, ...)`: the test selects the body.
    fn skip_decorators(&mut self, decorators: &[ast::Decorator], body: &[ast::Stmt]) {
        for (name, c) in crate::port::parse::decorator_calls(decorators) {
            if let (true, Some(test)) = (
                matches!(name, "skipIf" | "skipUnless" | "skipif"),
                c.arguments.args.first(),
            ) {
                self.g.guards.push(Guard {
                    test: test.range(),
                    arms: block(body).into_iter().collect(),
                    chain: vec![test.range()],
                });
            }
        }
    }
}

impl<'a: 'd, 'd> SourceOrderVisitor<'a> for Collect<'d> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        match node {
            AnyNodeRef::StmtIf(s) => self.stmt_if(s),
            AnyNodeRef::StmtFunctionDef(f) => {
                self.skip_decorators(&f.decorator_list, &f.body);
                self.early_exits(&f.body);
            }
            AnyNodeRef::StmtClassDef(c) => self.skip_decorators(&c.decorator_list, &c.body),
            // `mps.is_available() and not torch.cuda.is_available()` outside an `if`.
            AnyNodeRef::ExprBoolOp(b) if b.op == ast::BoolOp::And => self.g.guards.push(Guard {
                test: b.range,
                arms: vec![],
                chain: vec![b.range],
            }),
            AnyNodeRef::ExprIf(e) => {
                // `"cuda" if cuda else "mps" if mps else "cpu"`: its last `else` value.
                let device = matches!(e.body.as_ref(), Expr::StringLiteral(_) | Expr::Call(_));
                let mut last = e.orelse.as_ref();
                while let Expr::If(inner) = last {
                    last = inner.orelse.as_ref();
                }
                if device
                    && matches!(e.orelse.as_ref(), Expr::If(_))
                    && !self
                        .g
                        .branches
                        .iter()
                        .any(|b| b.body.contains_range(e.range))
                {
                    self.g.branches.push(Branch {
                        test: e.test.range(),
                        body: e.body.range(),
                        kind: BranchKind::Expr { last: last.range() },
                    });
                }
                self.g.guards.push(Guard {
                    test: e.test.range(),
                    arms: vec![e.body.range(), e.orelse.range()],
                    chain: vec![e.test.range(), e.orelse.range()],
                });
            }
            AnyNodeRef::ExprStringLiteral(s) if string_says_cuda(s.value.to_str()) => {
                self.g.names.push(s.range);
            }
            AnyNodeRef::ExprFString(f) => {
                let literal = f.value.elements().any(|e| match e {
                    ast::InterpolatedStringElement::Literal(l) => string_says_cuda(&l.value),
                    _ => false,
                });
                if literal {
                    self.g.names.push(f.range);
                }
            }
            // What a script prints about CUDA is not CUDA code ("Using CUDA").
            AnyNodeRef::ExprCall(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "print") =>
            {
                return TraversalSignal::Skip;
            }
            AnyNodeRef::ExprCall(c) => {
                if let Expr::Name(n) = c.func.as_ref()
                    && let Some(at) = self.g.calls.get_mut(n.id.as_str())
                {
                    at.push(c.range());
                }
                let callee = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => "",
                };
                let key = match c.func.as_ref() {
                    Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
                    {
                        format!("self.{}", a.attr)
                    }
                    _ => callee.to_string(),
                };
                if says_cuda(callee) || ident_says_cuda(callee) || self.cuda_defs.contains_key(&key)
                {
                    self.g.names.push(c.range());
                } else if callee == "load" && restores_devices(c) {
                    // A checkpoint restored onto the devices it was saved from (set T: `if
                    // torch.cuda.is_available(): torch.load(f) else: torch.load(f,
                    // map_location=...)`; a TPU VM cannot read its CUDA storages).
                    self.g.names.push(c.range());
                } else if GPU_WORD.is_match(callee) {
                    self.g.arm_names.push(c.range());
                }
                let torch = {
                    let mut e = c.func.as_ref();
                    while let Expr::Attribute(a) = e {
                        e = a.value.as_ref();
                    }
                    matches!(e, Expr::Name(n) if n.id.as_str() == "torch")
                };
                if !torch && MEMORY_STATS.is_match(callee) {
                    self.g.stats.push(c.range());
                }
            }
            AnyNodeRef::ExprAttribute(a) => {
                let attr = a.attr.as_str();
                // `torch.cuda`, `torch.backends.cuda`, `self.torch.cuda` (the module, whatever
                // is read from it).
                let module = attr == "cuda"
                    && match a.value.as_ref() {
                        Expr::Name(n) => n.id.as_str() == "torch",
                        Expr::Attribute(b) => matches!(b.attr.as_str(), "backends" | "torch"),
                        _ => false,
                    };
                if module || attr == "is_cuda" || attr == "hip" || ident_says_cuda(attr) {
                    self.g.names.push(a.range);
                }
                let torch = matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "torch");
                if torch && matches!(attr, "float16" | "half") {
                    self.g.fp16.push(a.range);
                }
            }
            AnyNodeRef::ExprCompare(c)
                if c.ops.iter().any(|o| {
                    matches!(o, ast::CmpOp::NotEq | ast::CmpOp::NotIn | ast::CmpOp::IsNot)
                }) =>
            {
                self.g.negated.push(c.range);
            }
            AnyNodeRef::ExprName(n) => {
                if ident_says_cuda(n.id.as_str()) {
                    self.g.names.push(n.range);
                } else if says_cuda(n.id.as_str()) {
                    self.g.arm_names.push(n.range);
                } else if n.ctx == ast::ExprContext::Load
                    && self.g.flags.contains_key(n.id.as_str())
                {
                    self.g.flag_uses.push((n.id.to_string(), n.range));
                } else if n.ctx == ast::ExprContext::Load
                    && self.imported.contains_key(n.id.as_str())
                {
                    self.imported_uses.push((n.id.as_str(), n.range));
                }
            }
            _ => {}
        }
        TraversalSignal::Traverse
    }
}

/// The guards and CUDA names of a module, for [`keep_together`].
pub(in crate::port::rewrite) struct Guards {
    pub(super) guards: Vec<Guard>,
    pub(super) names: Vec<TextRange>,
    /// Names that say CUDA when they sit in the code a test selects, not in a test: variables
    /// named for CUDA (`cuda_devices.add(i)`), calls of functions named for GPUs
    /// (`is_torch_bf16_gpu_available()`). A test may read a user's `use_cuda` flag and still be
    /// the program's device choice; code it selects that counts CUDA devices is CUDA's.
    pub(super) arm_names: Vec<TextRange>,
    /// The module's top-level functions: name and body.
    pub(super) helpers: Vec<(String, TextRange)>,
    /// Where each helper is called by its plain name (`_make_outlier_tensor(...)`).
    pub(super) calls: HashMap<String, Vec<TextRange>>,
    /// `torch.float16` / `torch.half` in the code: a dtype chosen for CUDA.
    pub(super) fp16: Vec<TextRange>,
    /// Calls of memory-statistics helpers that are not PyTorch's (`training.get_memory_stats`).
    pub(super) stats: Vec<TextRange>,
    /// Comparisons by `!=`, `not in`, `is not` (but in a validation's test).
    pub(super) negated: Vec<TextRange>,
    /// `if`/`elif`/`else` chains.
    pub(super) chains: Vec<Vec<Clause>>,
    /// Module-level flags (`_SUPPORTS_FLEX = torch.cuda.is_available() and ...`): name → value.
    pub(super) flags: HashMap<String, TextRange>,
    /// Where the flags are read.
    pub(super) flag_uses: Vec<(String, TextRange)>,
    /// Chains that pick a device first, for an accelerator branch.
    pub(super) branches: Vec<Branch>,
    /// Tests asking the same question go together ([`super::question`]): a program's, under
    /// `--to portable` (a library's functions are called apart).
    pub(in crate::port::rewrite) ask_once: bool,
}

impl Guards {
    /// `imported_flag(import, name)` says whether a name the module imports from its project
    /// is a flag that asks about CUDA there (asked only for names read in a test).
    pub(in crate::port::rewrite) fn of(
        body: &[ast::Stmt],
        cuda_defs: &HashMap<String, String>,
        imported_flag: &dyn Fn(&ast::StmtImportFrom, &str) -> bool,
    ) -> Guards {
        let helpers: Vec<(String, TextRange)> = body
            .iter()
            .filter_map(|s| match s {
                ast::Stmt::FunctionDef(f) => Some((f.name.to_string(), block(&f.body)?)),
                _ => None,
            })
            .collect();
        let calls = helpers
            .iter()
            .map(|(name, _)| (name.clone(), vec![]))
            .collect();
        let mut imported = HashMap::new();
        for s in body {
            if let ast::Stmt::ImportFrom(i) = s {
                for a in &i.names {
                    let local = a.asname.as_ref().unwrap_or(&a.name).as_str();
                    imported.insert(local, (i, a.name.as_str()));
                }
            }
        }
        let flags = body
            .iter()
            .filter_map(|s| match s {
                ast::Stmt::Assign(a) => match a.targets.as_slice() {
                    [Expr::Name(n)] => Some((n.id.to_string(), a.value.range())),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let mut c = Collect {
            cuda_defs,
            imported,
            imported_uses: vec![],
            validations: vec![],
            g: Guards {
                guards: vec![],
                names: vec![],
                arm_names: vec![],
                helpers,
                calls,
                fp16: vec![],
                stats: vec![],
                negated: vec![],
                chains: vec![],
                flags,
                flag_uses: vec![],
                branches: vec![],
                ask_once: false,
            },
        };
        for stmt in body {
            source_order::walk_stmt(&mut c, stmt);
        }
        let mut asked: HashMap<&str, bool> = HashMap::new();
        for (name, at) in &c.imported_uses {
            if !c.g.guards.iter().any(|g| g.test.contains_range(*at)) {
                continue;
            }
            let (import, original) = c.imported[name];
            if *asked
                .entry(name)
                .or_insert_with(|| imported_flag(import, original))
            {
                c.g.names.push(*at);
            }
        }
        let validations = &c.validations;
        c.g.negated
            .retain(|n| !validations.iter().any(|v| v.contains_range(*n)));
        c.g
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    /// A function that returns early without CUDA selects the rest of its body for CUDA: a
    /// CUDA-only call there keeps the test CUDA's; without one the test is extended.
    #[test]
    fn early_returns_select_the_rest_of_the_function() {
        let src = "import torch\n\n\ndef test_fused(self):\n    if not torch.cuda.is_available():\n        return\n    x = torch.ones(3, device=\"cuda\")\n    y = fused_cuda_forward(x)\n";
        assert!(
            !migrate(src, false).contains("accelerator"),
            "{}",
            migrate(src, false)
        );
        let skip = src.replace("        return\n", "        self.skipTest(\"no GPU\")\n");
        assert!(!migrate(&skip, false).contains("accelerator"));
        let plain = src.replace("fused_cuda_forward", "torch.relu");
        assert!(
            migrate(&plain, false).contains("device=\"tpu\""),
            "{}",
            migrate(&plain, false)
        );
    }
}
