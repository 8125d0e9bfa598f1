//! Code named or worded for CUDA. Inside a function or class named for CUDA
//! (`class CUDA_Accelerator`, `def cuda(self)`, `def _check_device_cuda`,
//! `def get_torch_cuda_device_capability`) the code implements or asks about CUDA itself: a
//! library's CUDA backend, a module's own `.cuda()` method, a capability probe. A test whose
//! failure says CUDA is required (`assert x.is_cuda, "Input tensor must be CUDA"`,
//! `if d.type != "cuda": raise RuntimeError("only on CUDA")`) guards code that needs CUDA.
//! Rewriting their device strings, `.cuda()` calls or `is_cuda` tests to the TPU would make the
//! CUDA code claim the TPU. A device finding (DEV) there keeps no fix; its note says why.

use ruff_python_ast::{AnyNodeRef, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;

impl<'a> Checker<'a> {
    /// Take the fixes off the device findings made since `diags` that sit in code named or
    /// worded for CUDA, with a note saying why.
    pub(super) fn keep_cuda_scopes(&mut self, diags: usize) {
        for i in diags..self.diags.len() {
            if self.diags[i].fix.is_none() || !self.rule(self.diags[i].rule).id.starts_with("DEV") {
                continue;
            }
            let note = match self.cuda_scope() {
                Some(scope) => format!(
                    "not rewritten: inside `{scope}`, which is named for CUDA: code that \
                     implements or asks about CUDA itself (a CUDA backend, a `.cuda()` method, a \
                     CUDA capability check) must keep naming CUDA; give the TPU its own code path \
                     by hand if it needs one"
                ),
                None => match self.cuda_requirement(self.diags[i].range) {
                    Some(()) => "not rewritten: the test's failure says CUDA is required (an \
                                 assertion or raise that names CUDA): it guards code that needs \
                                 CUDA; check that code runs on a TPU before changing the test"
                        .to_string(),
                    None => continue,
                },
            };
            self.diags[i].fix = None;
            self.diags[i].note = Some(note);
        }
    }

    /// The innermost enclosing function or class whose name mentions CUDA.
    fn cuda_scope(&self) -> Option<&'a str> {
        self.stack.iter().rev().find_map(|n| {
            let name = match n {
                AnyNodeRef::StmtFunctionDef(f) => f.name.as_str(),
                AnyNodeRef::StmtClassDef(c) => c.name.as_str(),
                _ => return None,
            };
            name.to_ascii_lowercase().contains("cuda").then_some(name)
        })
    }

    /// Is the finding at `range` in the test of an `assert` whose message names CUDA, or of an
    /// `if` whose body starts by raising an error that names CUDA (not an availability check)?
    fn cuda_requirement(&self, range: TextRange) -> Option<()> {
        let names_cuda = |r: TextRange| self.text(r).to_ascii_lowercase().contains("cuda");
        let stmt = self.stack.iter().rev().find_map(|n| n.as_stmt_ref())?;
        // `if args.device == "cuda" and not torch.cuda.is_available(): raise ...`: an
        // availability check, whose test migrates as a whole (CUD001), not a requirement.
        let availability = |r: TextRange| self.text(r).contains("is_available");
        let hit = match stmt {
            ruff_python_ast::StmtRef::Assert(a) => {
                a.test.range().contains_range(range)
                    && !availability(a.test.range())
                    && a.msg.as_ref().is_some_and(|m| names_cuda(m.range()))
            }
            ruff_python_ast::StmtRef::If(i) => {
                i.test.range().contains_range(range)
                    && !availability(i.test.range())
                    && matches!(i.body.first(), Some(Stmt::Raise(r)) if names_cuda(r.range))
            }
            _ => false,
        };
        hit.then_some(())
    }
}

#[cfg(test)]
mod tests {
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source};

    fn migrate(src: &str, unsafe_fixes: bool) -> String {
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        let out = migrate_source(src, &rules, &index, Settings { unsafe_fixes });
        out.output.unwrap_or_else(|| src.to_string())
    }

    /// The DEV rules' `unsafe_if_uses`: in a file that uses a CUDA-only library, a device string
    /// may be what sends tensors into it, so its fix is unsafe.
    #[test]
    fn device_fixes_are_unsafe_in_files_using_cuda_only_libraries() {
        let src = "import bitsandbytes as bnb\nimport torch\n\nx = torch.zeros(3).to(\"cuda\")\ny = bnb.functional.quantize_4bit(x)\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains(".to(\"tpu\")"));
        let plain = "import torch\n\nx = torch.zeros(3).to(\"cuda\")\n";
        assert!(migrate(plain, false).contains(".to(\"tpu\")"));
    }

    #[test]
    fn code_named_for_cuda_keeps_its_device() {
        let src = "import torch\n\n\nclass CUDABackend:\n    def device(self, i):\n        return torch.device(\"cuda\", i)\n";
        assert_eq!(migrate(src, true), src);
    }
}
