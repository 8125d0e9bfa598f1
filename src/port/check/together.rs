//! A CUDA test and the code it selects are ported together or not at all. Each finding is
//! decided where it sits, so a test can be rewritten while the branch it selects keeps naming
//! CUDA (`if torch.cuda.is_available(): accelerator_name = "cuda"`, a `torch.cuda` call no rule
//! maps, `self.forward_cuda(x)`, `"CUDAExecutionProvider"`, `is_sm_at_least_90()`), or a
//! branch's device can be rewritten while the test that selects it stays about CUDA (`"tpu" if
//! device.type == "cuda" and is_rocm_platform()`). Either way a TPU would be sent to CUDA code,
//! or CUDA would be given a TPU device. After the walk, per `if`/`elif`, conditional expression
//! and skip decorator (`@skipIf(test)` selects the function or class it decorates):
//! - a test with fixed CUD/DEV findings keeps no fix when CUDA is left in the test or its
//!   branches (a finding there without fix, or a CUDA name no fix rewrites); when what is left
//!   has only an unsafe fix, the test's safe fixes become unsafe (they go together);
//! - when CUDA is left in the test, the DEV findings in its branches keep no fix (or become
//!   unsafe, likewise);
//! - a device compared with `!=`/`not in` is a gate for what runs off CUDA: unsafe;
//! - a CUD/DEV finding in the tests of a chain that already has a TPU (or PyTorch/XLA) branch,
//!   or a DEV finding in its other branches, keeps no fix;
//! - a CUDA availability check in a chain that also tests another backend (`elif
//!   torch.xpu.is_available()`, `mps.is_available() and not torch.cuda.is_available()`) keeps no
//!   fix: `torch.accelerator.is_available()` is true on that backend too and would take it over.
//!
//! A module-level flag whose value still asks about CUDA (`_SUPPORTS_FLEX_ATTENTION =
//! torch.cuda.is_available() and torch.cuda.get_device_capability() >= (7, 5)`) counts as CUDA
//! where it is read.
//!
//! Repeated until nothing changes, since a test that loses its fix leaves CUDA behind for an
//! enclosing one.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::cuda_only::CUDA_ONLY_ROOTS;
use crate::port::diagnostic::Diagnostic;
use crate::port::rules::{FixClass, RuleSet};

/// The families whose fixes this pass may take off: CUD/DEV/DST findings in tests, DEV/STM
/// findings in the branches they select. The walk runs the pass where one of them has a fix.
pub(super) const FAMILIES: &[&str] = &["CUD", "DEV", "DST", "STM"];

/// A test and the code it selects.
struct Guard {
    test: TextRange,
    arms: Vec<TextRange>,
    /// The tests of its chain (its own among them), where another backend may be tested.
    chain: Vec<TextRange>,
}

fn says_cuda(s: &str) -> bool {
    CUDA_WORD.is_match(s)
}

static CUDA_WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)cuda|rocm").unwrap());

/// Prose that names CUDA-only machinery (`"not supported for AWQ CUDA/XPU kernels"`).
static CUDA_MACHINERY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bcuda\b[^.]{0,12}\bkernels?\b|cuda[- _]?only|cuda ?graph|cpp_extension|\btriton\b",
    )
    .unwrap()
});

/// Identifiers about NVIDIA/AMD hardware: capability checks and CUDA-only libraries (one
/// case-insensitive pattern, so no lower-cased copy per identifier).
static CUDA_IDENT: LazyLock<Regex> = LazyLock::new(|| {
    let libraries: Vec<String> = CUDA_ONLY_ROOTS
        .iter()
        .filter(|r| !r.contains('.'))
        .map(|r| regex::escape(r))
        .collect();
    Regex::new(&format!(
        r"(?i)rocm|(^|_)(sm\d+|sm_at_least|sm_version|mi\d{{3}}|hopper|blackwell|ampere|fa3|cublas|cudnn|nvml|nccl)(_|$|\d)|{}",
        libraries.join("|")
    ))
    .unwrap()
});

/// Another backend's name inside an identifier or string (`torch.xpu`, `is_torch_npu_available`,
/// `"mps"`), lower-cased.
static OTHER_BACKEND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(^|[^a-z])(xpu|mps|npu|mlu|musa|hpu|neuron|neuroncore|mtia|tpu|xla|habana|gaudi|ascend|ipex)([^a-z]|$)").unwrap()
});

/// A branch for the TPU: TorchTPU's or PyTorch/XLA's (which a port makes TorchTPU's).
static TPU_BRANCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(^|[^a-z])(tpu|xla)([^a-z]|$)").unwrap());

/// A string that names CUDA: a name (`"cuda"`, `"CUDAExecutionProvider"`), or prose that names
/// CUDA-only machinery. Other prose about CUDA (a log line, a skip reason) is a message, not
/// CUDA code.
fn string_says_cuda(s: &str) -> bool {
    says_cuda(s) && (!s.contains(char::is_whitespace) || CUDA_MACHINERY.is_match(s))
}

/// An identifier that names CUDA-only code: `forward_cuda`, `is_sm_at_least_90`, `has_gemlite`.
fn ident_says_cuda(id: &str) -> bool {
    CUDA_IDENT.is_match(id)
}

fn block(stmts: &[ast::Stmt]) -> Option<TextRange> {
    let first = stmts.first()?;
    let last = stmts.last()?;
    Some(TextRange::new(first.start(), last.end()))
}

/// Collects the guards and the CUDA names of a module.
struct Collect<'d> {
    /// The module's CUDA-only functions (`guard.rs`): calling one is CUDA code.
    cuda_defs: &'d HashMap<String, String>,
    g: Guards,
}

/// One clause of an `if`/`elif`/`else` chain: its test (none for `else`) and its body.
struct Clause {
    test: Option<TextRange>,
    body: TextRange,
}

/// The first of `tests` that names another backend once the findings in it are blanked out
/// (a CUD finding on `torch.tpu.is_available()` names no other backend).
fn other_backend(src: &str, tests: &[TextRange], findings: &[TextRange]) -> Option<TextRange> {
    naming(&OTHER_BACKEND, src, tests, findings)
}

/// The first of `tests` whose text, with the findings in it blanked out, matches `re`.
fn naming(re: &Regex, src: &str, tests: &[TextRange], findings: &[TextRange]) -> Option<TextRange> {
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
        let clauses = std::iter::once((Some(s.test.range()), block(&s.body)))
            .chain(
                s.elif_else_clauses
                    .iter()
                    .map(|c| (c.test.as_ref().map(|t| t.range()), block(&c.body))),
            )
            .filter_map(|(test, body)| Some(Clause { test, body: body? }))
            .collect();
        self.g.chains.push(clauses);
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

    /// `@skipIf(test, ...)`, `@pytest.mark.skipif(test, ...)`: the test selects the body.
    fn skip_decorators(&mut self, decorators: &[ast::Decorator], body: &[ast::Stmt]) {
        for d in decorators {
            let Expr::Call(c) = &d.expression else {
                continue;
            };
            let name = match c.func.as_ref() {
                Expr::Attribute(a) => a.attr.as_str(),
                Expr::Name(n) => n.id.as_str(),
                _ => continue,
            };
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

impl<'a> SourceOrderVisitor<'a> for Collect<'_> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        match node {
            AnyNodeRef::StmtIf(s) => self.stmt_if(s),
            AnyNodeRef::StmtFunctionDef(f) => self.skip_decorators(&f.decorator_list, &f.body),
            AnyNodeRef::StmtClassDef(c) => self.skip_decorators(&c.decorator_list, &c.body),
            // `mps.is_available() and not torch.cuda.is_available()` outside an `if`.
            AnyNodeRef::ExprBoolOp(b) if b.op == ast::BoolOp::And => self.g.guards.push(Guard {
                test: b.range,
                arms: vec![],
                chain: vec![b.range],
            }),
            AnyNodeRef::ExprIf(e) => {
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
                } else if n.ctx == ast::ExprContext::Load
                    && self.g.flags.contains_key(n.id.as_str())
                {
                    self.g.flag_uses.push((n.id.to_string(), n.range));
                }
            }
            _ => {}
        }
        TraversalSignal::Traverse
    }
}

/// The guards and CUDA names of a module, for [`keep_together`].
pub(super) struct Guards {
    guards: Vec<Guard>,
    names: Vec<TextRange>,
    /// Comparisons by `!=`, `not in`, `is not`.
    negated: Vec<TextRange>,
    /// `if`/`elif`/`else` chains.
    chains: Vec<Vec<Clause>>,
    /// Module-level flags (`_SUPPORTS_FLEX = torch.cuda.is_available() and ...`): name → value.
    flags: HashMap<String, TextRange>,
    /// Where the flags are read.
    flag_uses: Vec<(String, TextRange)>,
}

impl Guards {
    pub(super) fn of(body: &[ast::Stmt], cuda_defs: &HashMap<String, String>) -> Guards {
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
            g: Guards {
                guards: vec![],
                names: vec![],
                negated: vec![],
                chains: vec![],
                flags,
                flag_uses: vec![],
            },
        };
        for stmt in body {
            source_order::walk_stmt(&mut c, stmt);
        }
        c.g
    }
}

/// Does this finding's fix go through in the mode asked about (any fix, or safe ones only)?
fn fixed(d: &Diagnostic, safe_only: bool) -> bool {
    d.fix
        .as_ref()
        .is_some_and(|f| !safe_only || f.applicability == FixClass::Safe)
}

/// What CUDA is left in `range` when only the fixes allowed by `safe_only` apply: a finding
/// there that is not fixed and names CUDA, or a CUDA name that no fixed finding covers.
fn left_cuda(
    src: &str,
    diags: &[Diagnostic],
    names: &[TextRange],
    range: TextRange,
    safe_only: bool,
) -> Option<TextRange> {
    let unfixed = diags.iter().find(|d| {
        !fixed(d, safe_only) && range.contains_range(d.range) && says_cuda(&src[d.range])
    });
    if let Some(d) = unfixed {
        return Some(d.range);
    }
    names
        .iter()
        .filter(|n| range.contains_range(**n))
        .find(|n| {
            !diags
                .iter()
                .any(|d| fixed(d, safe_only) && d.range.contains_range(**n))
        })
        .copied()
}

fn line_of(src: &str, at: TextSize) -> usize {
    src[..at.to_usize()].bytes().filter(|b| *b == b'\n').count() + 1
}

fn snippet(src: &str, r: TextRange) -> String {
    let text = src[r].split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Take the fixes off (or, with `to_unsafe`, make unsafe the safe fixes of) the findings `pick`
/// selects; whether anything changed.
fn demote(
    diags: &mut [Diagnostic],
    pick: &dyn Fn(&Diagnostic) -> bool,
    to_unsafe: bool,
    note: &str,
) -> bool {
    let mut changed = false;
    let (unsafe_note, kept_note) = (format!("unsafe: {note}"), format!("not rewritten: {note}"));
    for d in diags.iter_mut().filter(|d| pick(d)) {
        if to_unsafe {
            changed |= d.make_unsafe(&unsafe_note);
        } else {
            d.keep(kept_note.clone());
            changed = true;
        }
    }
    changed
}

/// Apply the module comment's rules to `diags` (all findings of the module) until nothing
/// changes.
pub(super) fn keep_together(src: &str, rules: &RuleSet, g: &Guards, diags: &mut [Diagnostic]) {
    let family = |d: &Diagnostic| rules.rules[d.rule].family.as_str();
    let ported = |d: &Diagnostic| matches!(family(d), "CUD" | "DEV" | "DST");
    // Where the CUD/DEV/DST findings are (blanked out when a test is searched for another
    // backend); taking fixes off changes no range.
    let findings: Vec<TextRange> = diags
        .iter()
        .filter(|d| ported(d))
        .map(|d| d.range)
        .collect();
    // A flag whose value still asks about CUDA is CUDA wherever it is read.
    let mut names = g.names.clone();
    for (flag, at) in &g.flag_uses {
        if let Some(value) = g.flags.get(flag)
            && left_cuda(src, diags, &g.names, *value, false).is_some()
        {
            names.push(*at);
        }
    }
    // Only tests that hold a CUD/DEV finding or a CUDA name can be about CUDA.
    let relevant: Vec<&Guard> = g
        .guards
        .iter()
        .filter(|guard| {
            findings.iter().any(|f| guard.test.contains_range(*f))
                || names.iter().any(|n| guard.test.contains_range(*n))
        })
        .collect();
    // `device.type != "cuda"`: a gate that switches something off where CUDA is missing
    // (peak-memory stats, a CUDA-only path); asking about the TPU instead switches it on there.
    let negated = |d: &Diagnostic| {
        fixed(d, true)
            && matches!(family(d), "DEV" | "STM")
            && g.negated.iter().any(|n| n.contains_range(d.range))
    };
    demote(
        diags,
        &negated,
        true,
        "a device compared with `!=`/`not in` gates what runs off CUDA (stats, a CUDA-only \
         path); asking about the TPU instead switches that on for the TPU: check that it works \
         there",
    );
    // A chain with a TPU (or PyTorch/XLA) branch: its other branches are for other devices.
    for chain in &g.chains {
        let tests: Vec<TextRange> = chain.iter().filter_map(|c| c.test).collect();
        let Some(tpu) = naming(&TPU_BRANCH, src, &tests, &findings) else {
            continue;
        };
        let note = format!(
            "this chain already has a TPU (or PyTorch/XLA) branch (line {}: `{}`), which is \
             where a TPU goes; this branch serves another device and keeps its own",
            line_of(src, tpu.start()),
            snippet(src, tpu)
        );
        for clause in chain.iter().filter(|c| c.test != Some(tpu)) {
            let in_body = |d: &Diagnostic| {
                d.fix.is_some()
                    && matches!(family(d), "DEV" | "STM")
                    && clause.body.contains_range(d.range)
            };
            demote(diags, &in_body, false, &note);
        }
    }
    let left =
        |diags: &[Diagnostic], r: TextRange, safe_only| left_cuda(src, diags, &names, r, safe_only);
    for _ in 0..8 {
        let mut changed = false;
        for guard in &relevant {
            let in_test =
                |d: &Diagnostic| d.fix.is_some() && ported(d) && guard.test.contains_range(d.range);
            // A CUDA availability check in a chain with another backend.
            let other = other_backend(src, &guard.chain, &findings);
            let tpu_branch = naming(&TPU_BRANCH, src, &guard.chain, &findings);
            if let Some(other) = tpu_branch
                && diags.iter().any(in_test)
            {
                let note = format!(
                    "this chain already has a TPU (or PyTorch/XLA) branch (line {}: `{}`), which \
                     is where a TPU goes; the CUDA branch stays CUDA's",
                    line_of(src, other.start()),
                    snippet(src, other)
                );
                changed |= demote(diags, &in_test, false, &note);
            }
            if let Some(other) = other {
                let check = |d: &Diagnostic| {
                    in_test(d) && family(d) == "CUD" && {
                        let t = &src[d.range];
                        t.contains("is_available") || t.contains("device_count")
                    }
                };
                if diags.iter().any(check) {
                    let note = format!(
                        "this chain also tests for another backend (line {}: `{}`), and \
                         torch.accelerator.is_available() is true there too, so the CUDA branch \
                         would take that backend over; add a TPU branch by hand",
                        line_of(src, other.start()),
                        snippet(src, other)
                    );
                    changed |= demote(diags, &check, false, &note);
                }
            }
            let test_left = left(diags, guard.test, false);
            if diags.iter().any(in_test) {
                for safe_only in [false, true] {
                    let found = left(diags, guard.test, safe_only)
                        .map(|l| (l, true))
                        .or_else(|| {
                            guard
                                .arms
                                .iter()
                                .find_map(|a| left(diags, *a, safe_only))
                                .map(|l| (l, false))
                        });
                    let Some((l, in_own_test)) = found else {
                        continue;
                    };
                    let (line, what) = (line_of(src, l.start()), snippet(src, l));
                    let how = if safe_only {
                        "only an unsafe fix rewrites"
                    } else {
                        "no fix rewrites"
                    };
                    let note = if in_own_test {
                        format!(
                            "the rest of this test still asks about CUDA (line {line}: \
                             `{what}`), which {how}; rewriting only this part would mix the \
                             TPU and CUDA in one test"
                        )
                    } else {
                        format!(
                            "the code this test selects still names CUDA (line {line}: \
                             `{what}`), which {how}; asking about the TPU here would send the \
                             TPU there, so the test goes with that code"
                        )
                    };
                    changed |= demote(diags, &in_test, safe_only, &note);
                    break;
                }
            }
            for (l, safe_only) in [(test_left, false), (left(diags, guard.test, true), true)] {
                let Some(l) = l else { continue };
                let in_arms = |d: &Diagnostic| {
                    d.fix.is_some()
                        && matches!(family(d), "DEV" | "STM")
                        && guard.arms.iter().any(|a| a.contains_range(d.range))
                };
                if diags.iter().any(in_arms) {
                    let how = if safe_only {
                        "only an unsafe fix rewrites"
                    } else {
                        "no fix rewrites"
                    };
                    let note = format!(
                        "this code runs when `{}` holds, a test that still asks about CUDA \
                         (`{}`, which {how}); a TPU device here would be chosen on CUDA, so \
                         the test and this code go together",
                        snippet(src, guard.test),
                        snippet(src, l)
                    );
                    changed |= demote(diags, &in_arms, safe_only, &note);
                }
                break;
            }
        }
        if !changed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::migrated as migrate;

    /// A stream or event in a branch whose test still asks about CUDA stays, even where the
    /// file has no other CUDA finding to rewrite.
    #[test]
    fn events_in_branches_of_cuda_tests_stay_cuda() {
        let src = "import torch\n\n\ndef timer(provider):\n    if provider == \"CUDAExecutionProvider\":\n        return torch.cuda.Event(enable_timing=True)\n    return None\n";
        assert_eq!(migrate(src, true), src);
        let plain = src.replace(
            "provider == \"CUDAExecutionProvider\"",
            "provider is not None",
        );
        assert!(migrate(&plain, false).contains("torch.Event(device=\"tpu\""));
    }
}
