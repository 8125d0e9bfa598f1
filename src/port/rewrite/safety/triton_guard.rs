//! A CUDA check that goes with a Triton check guards Triton kernels. Code that skips itself
//! without CUDA and without Triton (`if not torch.cuda.is_available(): return` then `if not
//! TRITON_AVAILABLE: return`; `@skipif(not torch.cuda.is_available())` beside
//! `@skipif(not HAS_TRITON)`; `if torch.cuda.is_available() and _triton_ok:`) runs Triton
//! kernels, which need CUDA tensors. On a TPU VM the triton package may well be installed (it
//! comes with PyTorch's Linux wheels), so only the CUDA check keeps the TPU out: asking
//! `torch.accelerator.is_available()` instead would send TPU tensors into the kernels (set E's
//! review: a demo and two tests calling `lns_matmul`, which raises "LNS kernel requires CUDA and
//! Triton"). The check keeps no fix; the devices it guards then keep theirs only where they
//! can no longer be reached on a TPU.

use ruff_python_ast::{AnyNodeRef, Decorator, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::port::rewrite::Checker;

pub(in crate::port::rewrite) const NOTE: &str = "not rewritten: this check goes with a Triton \
    check: the code they guard runs Triton kernels, which need CUDA tensors (a TPU VM may have \
    the triton package, so this check is what keeps the TPU out); port the kernels first";

fn says_triton(s: &str) -> bool {
    s.to_ascii_lowercase().contains("triton")
}

/// Does an `if` statement exit when its test holds: a statement that leaves
/// ([`super::guard::exits`]) or any call named for skipping (`skip(...)`, `self.skip_if(...)`)?
fn exits(body: &[Stmt]) -> bool {
    body.iter().any(|s| {
        super::guard::exits(s)
            || matches!(s, Stmt::Expr(e) if matches!(e.value.as_ref(), Expr::Call(c)
                if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.as_str().starts_with("skip"))
                    || matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str().starts_with("skip"))))
    })
}

impl Checker<'_> {
    /// Is the CUDA check at `range` paired with a Triton check (see the module doc)?
    pub(in crate::port::rewrite) fn triton_paired(&self, range: TextRange) -> bool {
        for n in self.stack.iter().rev() {
            match n {
                AnyNodeRef::StmtIf(i)
                    if i.test.range().contains_range(range)
                        && says_triton(self.text(i.test.range())) =>
                {
                    return true;
                }
                AnyNodeRef::Decorator(d)
                    if d.range().contains_range(range) && says_triton(self.text(d.range())) =>
                {
                    return true;
                }
                AnyNodeRef::StmtFunctionDef(f) => {
                    if let Some(paired) = self.paired_decorators(&f.decorator_list, range) {
                        return paired;
                    }
                    // Early exits among the function's own statements.
                    let guard = f.body.iter().find(|s| s.range().contains_range(range));
                    return matches!(guard, Some(Stmt::If(g)) if exits(&g.body))
                        && f.body.iter().any(|s| {
                            matches!(s, Stmt::If(t) if exits(&t.body) && says_triton(self.text(t.test.range())))
                        });
                }
                AnyNodeRef::StmtClassDef(c) => {
                    return self
                        .paired_decorators(&c.decorator_list, range)
                        .unwrap_or(false);
                }
                _ => {}
            }
        }
        false
    }

    /// Where the check at `range` is in one of these decorators: whether one of them asks
    /// about Triton; None where it is not.
    fn paired_decorators(&self, decorators: &[Decorator], range: TextRange) -> Option<bool> {
        decorators
            .iter()
            .any(|d| d.range().contains_range(range))
            .then(|| decorators.iter().any(|d| says_triton(self.text(d.range()))))
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::ported;

    #[test]
    fn cuda_checks_that_go_with_a_triton_check_keep_cuda() {
        let src = "import pytest\nimport torch\nfrom kernels import lns_matmul, TRITON_AVAILABLE\n\n\ndef demo():\n    if not torch.cuda.is_available():\n        print(\"skip\")\n        return\n    if not TRITON_AVAILABLE:\n        return\n    lns_matmul(torch.randn(4, 4, device=\"cuda\"))\n\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason=\"CUDA\")\n@pytest.mark.skipif(not TRITON_AVAILABLE, reason=\"Triton\")\ndef test_kernel():\n    lns_matmul(torch.randn(4, 4, device=\"cuda\"))\n\n\ndef plain():\n    if torch.cuda.is_available():\n        return torch.randn(4, device=\"cuda\")\n";
        // Every rule: the device the rest of `plain` selects is ported with its check.
        let out = ported(src);
        assert_eq!(out.matches("torch.cuda.is_available()").count(), 2, "{out}");
        assert!(
            out.contains("def plain():\n    if torch.accelerator.is_available():"),
            "{out}"
        );
    }
}
