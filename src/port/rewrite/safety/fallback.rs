//! The CPU fallback for a requested CUDA device: `if not torch.cuda.is_available() and device
//! == "cuda": device = "cpu"`. The test asks two things about CUDA only: whether CUDA was asked
//! for, and whether it is missing. It is right on every machine as written: on a TPU VM a device
//! that says "tpu" passes through, and one that still says "cuda" (read from a config file the
//! port cannot edit) falls back to the CPU as before. Ported, it would read
//! `not torch.accelerator.is_available() and device in ("cuda", "tpu")`: on a TPU VM the
//! fallback no longer fires for a "cuda" from the config, and the program crashes at its first
//! `.to("cuda")` (set H's segmentation trainer). So the CUDA and device findings inside such a
//! test are dropped: there is nothing to port.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{self as ast, BoolOp, CmpOp, Expr, UnaryOp};
use ruff_text_size::TextRange;

use crate::port::rewrite::Checker;

impl<'a> Checker<'a> {
    /// The `and` tests in this module that fall back from a requested CUDA device.
    pub(in crate::port::rewrite) fn cuda_request_fallbacks(&self) -> Vec<TextRange> {
        if !self.src.contains("is_available") {
            return vec![];
        }
        let mut scan = Scan {
            checker: self,
            found: vec![],
        };
        for stmt in &self.parsed.module.body {
            scan.visit_stmt(stmt);
        }
        scan.found
    }

    /// `not torch.cuda.is_available()`.
    fn cuda_missing(&self, e: &Expr) -> bool {
        let Expr::UnaryOp(u) = e else { return false };
        if u.op != UnaryOp::Not {
            return false;
        }
        let Expr::Call(c) = u.operand.as_ref() else {
            return false;
        };
        self.sem
            .qualified_name(&c.func)
            .is_some_and(|q| q == "torch.cuda.is_available")
    }
}

/// A string literal naming a CUDA device: `"cuda"`, `"cuda:0"`.
fn cuda_literal(e: &Expr) -> bool {
    matches!(e, Expr::StringLiteral(s) if {
        let v = s.value.to_str();
        v == "cuda" || v.starts_with("cuda:")
    })
}

/// A test that asks whether a device value is CUDA: `device == "cuda"`, `args.device ==
/// "cuda"`, `device.type == "cuda"`, `"cuda" in device`, `device.startswith("cuda")`.
fn asks_for_cuda(e: &Expr) -> bool {
    match e {
        Expr::Compare(c) if c.ops.len() == 1 => {
            let right = &c.comparators[0];
            match c.ops[0] {
                CmpOp::Eq => {
                    (cuda_literal(right) && !cuda_literal(&c.left))
                        || (cuda_literal(&c.left) && !cuda_literal(right))
                }
                CmpOp::In => cuda_literal(&c.left) && !cuda_literal(right),
                _ => false,
            }
        }
        Expr::Call(call) => {
            matches!(call.func.as_ref(), Expr::Attribute(a) if a.attr.as_str() == "startswith")
                && call.arguments.args.first().is_some_and(cuda_literal)
        }
        _ => false,
    }
}

struct Scan<'c, 'a> {
    checker: &'c Checker<'a>,
    found: Vec<TextRange>,
}

impl<'a> SourceOrderVisitor<'a> for Scan<'_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::BoolOp(ast::ExprBoolOp {
            op: BoolOp::And,
            values,
            range,
            ..
        }) = expr
            && values.iter().any(|v| self.checker.cuda_missing(v))
            && values.iter().any(asks_for_cuda)
        {
            self.found.push(*range);
            return;
        }
        source_order::walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::ported;

    /// The fallback for a requested CUDA device stays as written; the rest of the file is
    /// ported.
    #[test]
    fn a_fallback_from_a_requested_cuda_device_stays() {
        let src = "import torch\n\n\ndef pick(cfg):\n    device = cfg[\"device\"]\n    if not torch.cuda.is_available() and device == \"cuda\":\n        device = \"cpu\"\n    return device\n\n\nx = torch.zeros(2, device=\"cuda\")\n";
        let out = ported(src);
        assert!(
            out.contains("    if not torch.cuda.is_available() and device == \"cuda\":\n"),
            "{out}"
        );
        assert!(!out.contains("torch.zeros(2, device=\"cuda\")"), "{out}");
        for test in [
            "device.type == \"cuda\" and not torch.cuda.is_available()",
            "args.device.startswith(\"cuda\") and not torch.cuda.is_available()",
            "\"cuda\" in device and not torch.cuda.is_available()",
        ] {
            let src = format!("import torch\n\nif {test}:\n    raise SystemExit(\"no CUDA\")\n");
            assert_eq!(ported(&src), src);
        }
        // Not a fallback: a device chosen by availability is ported.
        let alone = "import torch\n\ndevice = \"cuda\" if torch.cuda.is_available() else \"cpu\"\nx = torch.zeros(2).to(device)\n";
        assert!(ported(alone).contains("torch.accelerator.is_available()"));
    }
}
