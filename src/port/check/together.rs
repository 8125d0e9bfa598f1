//! A CUDA test and the code it selects are ported together or not at all. Each finding is
//! decided where it sits, so a test can be rewritten while the branch it selects keeps naming
//! CUDA (`if torch.cuda.is_available(): accelerator_name = "cuda"`, a `torch.cuda.*` call no
//! rule maps, `self.forward_cuda(x)`, `"CUDAExecutionProvider"`), or a branch's device can be
//! rewritten while the test that selects it stays about CUDA (`"tpu" if device.type == "cuda"
//! and is_rocm_platform()`). Either way a TPU would be sent to CUDA code, or CUDA would be
//! given a TPU device. After the walk, per `if`/`elif`/conditional expression:
//! - a test with fixed CUD/DEV findings keeps no fix when CUDA is left in the test or its
//!   branches (a finding there without fix, or a CUDA name no finding rewrites);
//! - when CUDA is left in the test, the DEV findings in its branches keep no fix.
//!
//! Repeated until nothing changes, since a test that loses its fix leaves CUDA behind for an
//! enclosing one.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::RuleSet;

/// A test and the code it selects.
struct Guard {
    test: TextRange,
    arms: Vec<TextRange>,
}

/// Something in the code that names CUDA (or ROCm, which runs as "cuda") by itself.
struct CudaName {
    range: TextRange,
}

/// Collects the guards and the CUDA names of a module.
#[derive(Default)]
struct Collect {
    guards: Vec<Guard>,
    names: Vec<CudaName>,
}

fn says_cuda(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    s.contains("cuda") || s.contains("rocm")
}

/// A string that names CUDA: a name (`"cuda"`, `"CUDAExecutionProvider"`), or prose that names
/// CUDA-only machinery (`"not supported for AWQ CUDA/XPU kernels"`). Other prose about CUDA (a
/// log line, a skip reason) is a message, not CUDA code.
fn string_says_cuda(s: &str) -> bool {
    if !says_cuda(s) {
        return false;
    }
    !s.contains(char::is_whitespace) || CUDA_MACHINERY.is_match(s)
}

static CUDA_MACHINERY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bcuda\b[^.]{0,12}\bkernels?\b|cuda[- _]?only|cuda ?graph|cpp_extension|\btriton\b").unwrap()
});

fn block(stmts: &[ast::Stmt]) -> Option<TextRange> {
    let first = stmts.first()?;
    let last = stmts.last()?;
    Some(TextRange::new(first.start(), last.end()))
}

impl<'a> SourceOrderVisitor<'a> for Collect {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        match node {
            AnyNodeRef::StmtIf(s) => {
                let mut arms: Vec<TextRange> = block(&s.body).into_iter().collect();
                for (i, c) in s.elif_else_clauses.iter().enumerate() {
                    arms.push(c.range());
                    if let Some(test) = &c.test {
                        // An `elif` selects its own body and the clauses after it.
                        let mut own: Vec<TextRange> = block(&c.body).into_iter().collect();
                        own.extend(s.elif_else_clauses[i + 1..].iter().map(|c| c.range()));
                        self.guards.push(Guard {
                            test: test.range(),
                            arms: own,
                        });
                    }
                }
                self.guards.push(Guard {
                    test: s.test.range(),
                    arms,
                });
            }
            AnyNodeRef::ExprIf(e) => self.guards.push(Guard {
                test: e.test.range(),
                arms: vec![e.body.range(), e.orelse.range()],
            }),
            AnyNodeRef::ExprStringLiteral(s) if string_says_cuda(s.value.to_str()) => {
                self.names.push(CudaName { range: s.range });
            }
            AnyNodeRef::ExprFString(f) => {
                let literal = f.value.elements().any(|e| match e {
                    ast::InterpolatedStringElement::Literal(l) => string_says_cuda(&l.value),
                    _ => false,
                });
                if literal {
                    self.names.push(CudaName { range: f.range });
                }
            }
            // What a script prints about CUDA is not CUDA code ("Using CUDA").
            AnyNodeRef::ExprCall(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "print") => {
                return TraversalSignal::Skip;
            }
            AnyNodeRef::ExprCall(c) => {
                let callee = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => "",
                };
                if says_cuda(callee) {
                    self.names.push(CudaName { range: c.range() });
                }
            }
            AnyNodeRef::ExprAttribute(a)
                if a.attr.as_str() == "is_cuda"
                    || a.attr.as_str() == "hip"
                    || a.attr.to_ascii_lowercase().contains("rocm") =>
            {
                self.names.push(CudaName { range: a.range });
            }
            // `torch.cuda` / `torch.backends.cuda` (the module, whatever is read from it).
            AnyNodeRef::ExprAttribute(a)
                if a.attr.as_str() == "cuda"
                    && match a.value.as_ref() {
                        Expr::Name(n) => n.id.as_str() == "torch",
                        Expr::Attribute(b) => b.attr.as_str() == "backends",
                        _ => false,
                    } =>
            {
                self.names.push(CudaName { range: a.range });
            }
            AnyNodeRef::ExprName(n) if n.id.to_ascii_lowercase().contains("rocm") => {
                self.names.push(CudaName { range: n.range });
            }
            _ => {}
        }
        TraversalSignal::Traverse
    }
}

/// The guards and CUDA names of `body`, for [`keep_together`].
pub(super) struct Guards {
    guards: Vec<Guard>,
    names: Vec<CudaName>,
}

impl Guards {
    pub(super) fn of(body: &[ast::Stmt]) -> Guards {
        let mut c = Collect::default();
        for stmt in body {
            source_order::walk_stmt(&mut c, stmt);
        }
        Guards {
            guards: c.guards,
            names: c.names,
        }
    }
}

/// What CUDA is left in `range`: a CUD/DEV-like finding there without a fix that names CUDA,
/// or a CUDA name that no fixed finding covers. Its range.
fn left_cuda(src: &str, diags: &[Diagnostic], names: &[CudaName], range: TextRange) -> Option<TextRange> {
    let unfixed = diags.iter().find(|d| {
        d.fix.is_none() && range.contains_range(d.range) && says_cuda(&src[d.range])
    });
    if let Some(d) = unfixed {
        return Some(d.range);
    }
    names
        .iter()
        .filter(|n| range.contains_range(n.range))
        .find(|n| {
            !diags
                .iter()
                .any(|d| d.fix.is_some() && d.range.contains_range(n.range))
        })
        .map(|n| n.range)
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

/// Apply the module comment's two rules to `diags` (all findings of the module) until nothing
/// changes.
pub(super) fn keep_together(src: &str, rules: &RuleSet, g: &Guards, diags: &mut [Diagnostic]) {
    let ported = |d: &Diagnostic| matches!(rules.rules[d.rule].family.as_str(), "CUD" | "DEV");
    let device = |d: &Diagnostic| rules.rules[d.rule].family == "DEV";
    // Only tests that hold a CUD/DEV finding or a CUDA name can be about CUDA.
    let relevant: Vec<&Guard> = g
        .guards
        .iter()
        .filter(|guard| {
            diags
                .iter()
                .any(|d| ported(d) && guard.test.contains_range(d.range))
                || g.names.iter().any(|n| guard.test.contains_range(n.range))
        })
        .collect();
    loop {
        let mut changed = false;
        for guard in &relevant {
            let fixed_in_test = |d: &Diagnostic| {
                d.fix.is_some() && ported(d) && guard.test.contains_range(d.range)
            };
            let left_in_test = left_cuda(src, diags, &g.names, guard.test);
            if diags.iter().any(fixed_in_test) {
                let left = left_in_test.or_else(|| {
                    guard
                        .arms
                        .iter()
                        .find_map(|a| left_cuda(src, diags, &g.names, *a))
                });
                if let Some(left) = left {
                    let (line, what) = (line_of(src, left.start()), snippet(src, left));
                    let note = if left_in_test.is_some() {
                        format!(
                            "not rewritten: the rest of this test still asks about CUDA (line \
                             {line}: `{what}`), which no fix rewrites; rewriting only this part \
                             would mix the TPU and CUDA in one test, so port it by hand"
                        )
                    } else {
                        format!(
                            "not rewritten: the code this test selects still names CUDA where \
                             no fix rewrites it (line {line}: `{what}`); asking about the TPU \
                             here would send the TPU there, so port that code first, then this \
                             test"
                        )
                    };
                    for d in diags.iter_mut().filter(|d| fixed_in_test(d)) {
                        d.fix = None;
                        d.note = Some(note.clone());
                    }
                    changed = true;
                }
            }
            if let Some(left) = left_in_test {
                let in_arms = |d: &Diagnostic| {
                    d.fix.is_some()
                        && device(d)
                        && guard.arms.iter().any(|a| a.contains_range(d.range))
                };
                if diags.iter().any(in_arms) {
                    let note = format!(
                        "not rewritten: this code runs when `{}` holds, a test that still asks \
                         about CUDA (`{}`); a TPU device here would be chosen on CUDA, so port \
                         the test and this code together by hand",
                        snippet(src, guard.test),
                        snippet(src, left)
                    );
                    for d in diags.iter_mut().filter(|d| in_arms(d)) {
                        d.fix = None;
                        d.note = Some(note.clone());
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}
