//! Comparisons extended to the TPU (`--to portable`): `x == "cuda"` → `x in ("cuda", "tpu")`,
//! `self.assertEqual(t.device.type, "cuda")` → `self.assertIn(..., ("cuda", "tpu"))`, and the
//! code such a test selects: an extension is kept off (with a note) where that code is not right
//! on a TPU: a float16 GradScaler or autocast that no safe fix moves to the accelerator, CUDA
//! side streams, CUDA-only libraries and machinery.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{self as ast, AnyNodeRef, CmpOp, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;
use super::portable::quote_of;
use super::safety::cuda_only::cuda_only_name;
use super::strings::StringSite;
use crate::port::diagnostic::Diagnostic;
use crate::port::edit::Edit;
use crate::port::rules::{Action, FixClass, Matcher, Rule, StringForm};

/// A fix that extends a CUDA test to the TPU, and the code the test selects.
pub(super) struct Extension {
    /// The finding's range.
    pub(super) finding: TextRange,
    pub(super) selects: Vec<TextRange>,
    /// The test is a mixed-precision flag handed to another function (`amp_enable=amp_enable`):
    /// it turns on autocasts it cannot see, so it selects the module's autocast calls too.
    pub(super) selects_autocasts: bool,
}

impl<'a> Checker<'a> {
    /// `x == "cuda"` → `x in ("cuda", "tpu")`.
    pub(super) fn extend_equal(
        &self,
        rule: &Rule,
        site: &StringSite,
        c: &ast::ExprCompare,
    ) -> Result<Vec<Edit>, String> {
        let twin = self.twin(rule, site).ok_or(
            "the TPU's name for this string cannot be built mechanically: extend the comparison by hand",
        )?;
        let other = if c.left.range() == site.form_range {
            &c.comparators[0]
        } else {
            &c.left
        };
        let op = match c.ops[0] {
            CmpOp::Eq => "in",
            _ => "not in",
        };
        Ok(vec![Edit::replace(
            c.range(),
            format!(
                "{} {op} ({}, {twin})",
                self.text(other.range()),
                self.text(site.form_range)
            ),
        )])
    }

    /// `"cuda" in device` → `("cuda" in device or "tpu" in device)` (`not in`: `and`), without the
    /// parentheses where the test stands alone (an `if`'s, a conditional expression's, an
    /// assignment's value, an argument).
    pub(super) fn extend_substring(
        &self,
        rule: &Rule,
        site: &StringSite,
        c: &ast::ExprCompare,
        at: &[AnyNodeRef<'a>],
    ) -> Result<Vec<Edit>, String> {
        let twin = self.twin(rule, site).ok_or(
            "the TPU's name for this string cannot be built mechanically: extend the test by hand",
        )?;
        let name = self.text(c.comparators[0].range());
        let (op, join) = match c.ops[0] {
            CmpOp::In => ("in", "or"),
            _ => ("not in", "and"),
        };
        let text = format!(
            "{} {op} {name} {join} {twin} {op} {name}",
            self.text(site.form_range)
        );
        let alone = match at.iter().rev().find(|n| n.range() != c.range()) {
            Some(AnyNodeRef::StmtIf(i)) => i.test.range() == c.range(),
            Some(AnyNodeRef::StmtWhile(w)) => w.test.range() == c.range(),
            Some(AnyNodeRef::ExprIf(e)) => e.test.range() == c.range(),
            Some(
                AnyNodeRef::StmtAssign(_) | AnyNodeRef::Keyword(_) | AnyNodeRef::StmtReturn(_),
            ) => true,
            _ => false,
        };
        let text = if alone { text } else { format!("({text})") };
        Ok(vec![Edit::replace(c.range(), text)])
    }

    /// `self.assertEqual(x, "cuda")` → `self.assertIn(x, ("cuda", "tpu"))`.
    pub(super) fn extend_assert(
        &self,
        rule: &Rule,
        site: &StringSite,
        c: &ast::ExprCall,
    ) -> Result<Vec<Edit>, String> {
        let twin = self.twin(rule, site).ok_or(
            "the TPU's name for this string cannot be built mechanically: extend the assertion by hand",
        )?;
        let Expr::Attribute(a) = c.func.as_ref() else {
            return Err("not a method call".into());
        };
        let [first, second] = &c.arguments.args[..] else {
            return Err("not two values".into());
        };
        let other = if first.range() == site.form_range {
            second
        } else {
            first
        };
        let method = match a.attr.as_str() {
            "assertEqual" => "assertIn",
            _ => "assertNotIn",
        };
        Ok(vec![
            Edit::replace(a.attr.range(), method),
            Edit::replace(
                TextRange::new(first.start(), second.end()),
                format!(
                    "{}, ({}, {twin})",
                    self.text(other.range()),
                    self.text(site.form_range)
                ),
            ),
        ])
    }

    /// The TPU's twin of the string, quoted as it is (`"tpu"` for `"cuda"`, `'tpu_dist'` for
    /// `'nccl'`): the literal fix's rewrite of its text.
    pub(super) fn twin(&self, rule: &Rule, site: &StringSite) -> Option<String> {
        let (Some(Action::String(replacement)), Matcher::String { regex, .. }) =
            (&rule.literal.action, &rule.matcher)
        else {
            return None;
        };
        if site.form != StringForm::Plain {
            return None;
        }
        let new = regex.replace(&site.static_text, replacement.as_str());
        let quote = quote_of(self.text(site.range));
        (!new.contains(['\\', quote, '\n'])).then(|| format!("{quote}{new}{quote}"))
    }

    /// Note the code a test selects, for [`Checker::keep_unported_extensions`].
    pub(super) fn remember_extension(
        &mut self,
        at: &[AnyNodeRef<'a>],
        test: TextRange,
        finding: TextRange,
    ) {
        let (selects, selects_autocasts) = self.selected_by(at, test);
        self.extensions.push(Extension {
            finding,
            selects,
            selects_autocasts,
        });
    }

    /// The code the test at `test` (ancestors `at`) selects: the `if`/`while` it is the test of
    /// (both branches), a conditional expression's branches, the statements that read the name
    /// it is assigned to, or the statement it sits in; and whether it is a mixed-precision flag
    /// handed on to another function ([`Extension::selects_autocasts`]).
    fn selected_by(&self, at: &[AnyNodeRef<'a>], test: TextRange) -> (Vec<TextRange>, bool) {
        let mut child = test;
        for (i, anc) in at.iter().enumerate().rev() {
            if anc.range() == test {
                continue;
            }
            match anc {
                AnyNodeRef::ExprBoolOp(_)
                | AnyNodeRef::ExprUnaryOp(_)
                | AnyNodeRef::ExprCompare(_) => child = anc.range(),
                AnyNodeRef::ExprIf(e) if e.test.range().contains_range(child) => {
                    return (vec![e.body.range(), e.orelse.range()], false);
                }
                AnyNodeRef::StmtAssign(a) => {
                    let uses = self.uses_of_assigned(&at[..=i], child, true);
                    let handed_on = matches!(a.targets.as_slice(), [Expr::Name(n)] if says_amp(&n.id))
                        && uses.iter().any(|(anc, _)| {
                            anc.last().is_some_and(|p| {
                                matches!(p, AnyNodeRef::Keyword(_) | AnyNodeRef::Arguments(_))
                            })
                        });
                    let mut out: Vec<TextRange> = uses
                        .iter()
                        .filter_map(|(anc, _)| {
                            anc.iter()
                                .rev()
                                .find(|n| n.as_stmt_ref().is_some())
                                .map(|n| n.range())
                        })
                        .collect();
                    out.push(anc.range());
                    return (out, handed_on);
                }
                n if n.as_stmt_ref().is_some() => return (vec![n.range()], false),
                _ => child = anc.range(),
            }
        }
        (vec![test], false)
    }

    /// Take the fix off an extension (or make it unsafe) where the code its test selects is not
    /// right on a TPU: a GradScaler or float16 autocast that no safe fix moves to the
    /// accelerator, or CUDA-only code (streams, graphs, Triton, `nn.DataParallel`).
    pub(super) fn keep_unported_extensions(&self, diags: &mut [Diagnostic]) {
        if self.extensions.is_empty() {
            return;
        }
        let mut scan = Blockers {
            checker: self,
            found: vec![],
            autocasts: vec![],
        };
        for stmt in &self.parsed.module.body {
            scan.visit_stmt(stmt);
        }
        let amp: Vec<(TextRange, FixClass)> = diags
            .iter()
            .filter(|d| self.rule(d.rule).family == "AMP")
            .filter_map(|d| d.fix.as_ref().map(|f| (d.range, f.applicability)))
            .collect();
        for ext in &self.extensions {
            let Some(d) = diags.iter_mut().find(|d| d.range == ext.finding) else {
                continue;
            };
            if d.fix.is_none() {
                continue;
            }
            let selected = ext
                .selects
                .iter()
                .chain(scan.autocasts.iter().filter(|_| ext.selects_autocasts));
            let inside = scan
                .found
                .iter()
                .filter(|(r, _)| selected.clone().any(|s| s.contains_range(*r)));
            for (r, what) in inside {
                let moved = amp
                    .iter()
                    .find(|(a, _)| a.contains_range(*r) || r.contains_range(*a));
                let line = self.src[..r.start().to_usize()].matches('\n').count() + 1;
                match moved {
                    Some((_, FixClass::Safe)) => continue,
                    Some(_) => {
                        d.make_unsafe(&format!(
                            "unsafe: the code this test selects has {what} (line {line}), whose fix is unsafe: they go together"
                        ));
                    }
                    None => d.keep(format!(
                        "not extended to the TPU: the code this test selects has {what} (line {line}), which is not right on a TPU; the comparison stays CUDA's"
                    )),
                }
                break;
            }
        }
    }
}

/// The code that is not right on a TPU, where an extension would send it there.
struct Blockers<'c, 'a> {
    checker: &'c Checker<'a>,
    found: Vec<(TextRange, String)>,
    /// Every autocast call of the module.
    autocasts: Vec<TextRange>,
}

impl<'a> SourceOrderVisitor<'a> for Blockers<'_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(c) => {
                let last = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => "",
                };
                let dtype = c
                    .arguments
                    .find_keyword("dtype")
                    .map(|k| self.checker.text(k.value.range()));
                // `torch.bfloat16` ends with "float16" too.
                let half = dtype.is_some_and(|t| {
                    t.ends_with("float16") && !t.ends_with("bfloat16") || t.ends_with(".half")
                });
                if last == "autocast" {
                    self.autocasts.push(c.range());
                }
                if last == "GradScaler" {
                    self.found.push((
                        c.range(),
                        "a float16 GradScaler (no TorchTPU kernels)".into(),
                    ));
                } else if last == "autocast" && (half || dtype.is_none() && !on_cpu(c)) {
                    let what = if half {
                        "a float16 autocast (a TPU computes mixed precision in bfloat16)"
                    } else {
                        "an autocast without a dtype (float16 on a TPU as on CUDA; a TPU \
                         computes mixed precision in bfloat16)"
                    };
                    self.found.push((c.range(), what.into()));
                }
            }
            Expr::Attribute(_) | Expr::Name(_) => {
                // A kernel of this module (`@helion.kernel`, `@triton.jit`), a function or
                // method that runs one, or a name imported from a project module of kernels.
                let local = match expr {
                    Expr::Name(n) => Some(n.id.to_string()),
                    Expr::Attribute(a) => match a.value.as_ref() {
                        Expr::Name(n) if n.id.as_str() == "self" => {
                            Some(format!("self.{}", a.attr))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(what) = local.and_then(|l| self.checker.cuda_defs().get(&l)) {
                    self.found.push((expr.range(), what.clone()));
                    return;
                }
                if let Some(what) = self.checker.sem.qualified_name(expr).and_then(|q| {
                    cuda_only_name(&q)
                        .or_else(|| cuda_stream(&q))
                        .or_else(|| data_parallel(&q))
                }) {
                    self.found.push((expr.range(), what));
                    return;
                }
            }
            _ => {}
        }
        source_order::walk_expr(self, expr);
    }
}

/// An autocast for the CPU (`torch.autocast("cpu")`, `device_type="cpu"`): bfloat16 by
/// default, whatever else the code selects.
fn on_cpu(c: &ast::ExprCall) -> bool {
    c.arguments
        .find_argument_value("device_type", 0)
        .is_some_and(|v| matches!(v, Expr::StringLiteral(s) if s.value.to_str() == "cpu"))
}

/// A flag named for mixed precision (`amp_enable`, `use_amp`, `fp16`, `autocast`).
fn says_amp(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.split('_')
        .any(|w| matches!(w, "amp" | "autocast" | "fp16" | "half" | "mixed"))
}

/// `nn.DataParallel`: its forward scatters the inputs with CUDA's own collectives
/// (`torch._C._scatter`), so a TPU module wrapped in it fails at the first batch (set G).
fn data_parallel(q: &str) -> Option<String> {
    matches!(
        q,
        "torch.nn.DataParallel"
            | "torch.nn.parallel.DataParallel"
            | "torch.nn.parallel.data_parallel.DataParallel"
            | "torch.nn.parallel.data_parallel"
            | "torch.nn.parallel.data_parallel.data_parallel"
    )
    .then(|| format!("`{q}` (it scatters with CUDA's collectives; one process per TPU device)"))
}

/// CUDA side streams: one implicit stream on a TPU.
fn cuda_stream(q: &str) -> Option<String> {
    matches!(q, "torch.cuda.Stream" | "torch.cuda.stream")
        .then(|| format!("`{q}` (CUDA side streams; a TPU has one implicit stream)"))
}

#[cfg(test)]
mod tests {
    /// A comparison that selects `nn.DataParallel` stays CUDA's: its forward scatters with
    /// CUDA's collectives (set G's 3D-ResNets).
    #[test]
    fn a_test_selecting_data_parallel_is_not_extended() {
        let src = "import torch\nfrom torch import nn\n\n\ndef wrap(model, device):\n    if device.type == 'cuda':\n        model = nn.DataParallel(model, device_ids=None)\n    return model\n\n\ndef pin(x, device):\n    if device.type == 'cuda':\n        x = x.pin_memory()\n    return x\n";
        let text = crate::port::test_support::ported(src);
        assert!(
            text.contains("    if device.type == 'cuda':\n        model = nn.DataParallel"),
            "{text}"
        );
        assert!(
            text.contains("    if device.type in ('cuda', 'tpu'):\n        x = x.pin_memory()"),
            "{text}"
        );
    }

    /// A device-count guard in front of a project's own DataParallel (a subclass, or a copy of
    /// its scatter-gather) stays CUDA's, as in front of `nn.DataParallel` (set O's Music
    /// Transformer `DataParallelModel`).
    #[test]
    fn a_count_guard_selecting_a_data_parallel_variant_stays() {
        let src = "import torch\nfrom custom.parallel import DataParallelModel\n\nmt = torch.nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n    mt = DataParallelModel(mt)\nn = torch.cuda.device_count()\n";
        let text = crate::port::test_support::ported(src);
        assert!(
            text.contains("if torch.cuda.device_count() > 1:\n    mt = DataParallelModel"),
            "{text}"
        );
        assert!(
            text.contains("n = torch.accelerator.device_count()"),
            "{text}"
        );
    }

    /// A test that turns on an autocast without a dtype stays CUDA's: that autocast would be
    /// float16 on a TPU, whose scaler the port turns off (set M's Raman classifier), also where
    /// the flag is handed to another function.
    #[test]
    fn a_test_turning_on_an_untyped_autocast_is_not_extended() {
        let src = "import torch\n\n\ndef step(model, x, device, use_amp):\n    amp_enable = use_amp and device.type == \"cuda\"\n    with torch.autocast(device_type=device.type, enabled=amp_enable):\n        return model(x)\n\n\ndef run(model, x, device):\n    amp_enable = device.type == \"cuda\"\n    return evaluate(model, x, amp_enable=amp_enable)\n\n\ndef evaluate(model, x, amp_enable=False):\n    with torch.autocast(device_type=x.device.type, enabled=amp_enable):\n        return model(x)\n";
        let text = crate::port::test_support::ported(src);
        assert_eq!(text.matches("device.type == \"cuda\"").count(), 2, "{text}");
        let bf16 = src.replace(
            "enabled=amp_enable)",
            "dtype=torch.bfloat16, enabled=amp_enable)",
        );
        let text = crate::port::test_support::ported(&bf16);
        assert_eq!(text.matches("in (\"cuda\", \"tpu\")").count(), 2, "{text}");
    }

    /// A device default of a class whose methods run CUDA-only code is that code's device.
    #[test]
    fn device_defaults_of_classes_with_cuda_only_methods_stay() {
        let src = "import torch\n\n\nclass Q:\n    def __init__(self, device=torch.device(\"cuda\")):\n        self.device = device\n\n    def pack(self, w):\n        return torch.ops.aten._convert_weight_to_int4pack(w, 8)\n";
        assert_eq!(crate::port::rewrite::migrated(src, true), src);
        let portable = src.replace("torch.ops.aten._convert_weight_to_int4pack(w, 8)", "w.t()");
        assert!(crate::port::rewrite::migrated(&portable, false).contains("torch.device(\"tpu\")"));
    }

    /// A device-count guard that sets a flag, which later turns on `nn.DataParallel`, stays
    /// CUDA's (set P's translation Transformer); a flag that selects nothing of the kind is
    /// ported.
    #[test]
    fn a_count_guard_setting_a_data_parallel_flag_stays() {
        let src = "import torch\nfrom torch import nn\n\nmodel = nn.Linear(2, 2)\nif DEVICE == 'cuda' and torch.cuda.device_count() > 1:\n    data_parallel = True\nelse:\n    data_parallel = False\nif data_parallel:\n    model = nn.DataParallel(model)\n";
        let text = crate::port::test_support::ported(src);
        assert!(
            text.contains("if DEVICE == 'cuda' and torch.cuda.device_count() > 1:"),
            "{text}"
        );
        // A count asking for several devices differs on a TPU whatever it selects
        // (`safety::device_index`); a count for any device is ported.
        let plain = src
            .replace("model = nn.DataParallel(model)", "print('many')")
            .replace("device_count() > 1", "device_count() > 0");
        let text = crate::port::test_support::ported(&plain);
        assert!(
            text.contains("torch.accelerator.device_count() > 0:"),
            "{text}"
        );
    }

    /// A test that only rejects devices it does not know (`if 'cpu' not in device and 'cuda'
    /// not in device: raise ValueError`) is a validation: extended, the TPU passes it (set AB: a
    /// face detector raised on "tpu"); a `!=` gate of other code stays CUDA's.
    #[test]
    fn a_device_validation_lets_the_tpu_through() {
        let src = "import logging\n\n\nclass D:\n    def __init__(self, device):\n        if 'cpu' not in device and 'cuda' not in device:\n            logging.error('bad %s', device)\n            raise ValueError\n        self.device = device\n\n\ndef stats(device):\n    if device.type != 'cuda':\n        return None\n    return 1\n";
        let text = crate::port::test_support::ported(src);
        assert!(
            text.contains(
                "if 'cpu' not in device and ('cuda' not in device and 'tpu' not in device):"
            ),
            "{text}"
        );
        assert!(text.contains("if device.type != 'cuda':"), "{text}");
    }
}
