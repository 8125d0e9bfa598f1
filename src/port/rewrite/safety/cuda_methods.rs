//! Classes of a program with their own `cuda()`. `x.cuda()` → `x.to(device)` is the same move
//! only where `x` is a tensor or a module whose `cuda()` is PyTorch's. A class of the project
//! may define its own (set AA):
//!
//! - a plain object that keeps tables on the GPU (an alias-method sampler built in another
//!   module: `self.multinomial = AliasMethod(probs)`; `.cuda()` is its only mover and it has no
//!   `.to()`, so the port raises AttributeError on every machine);
//! - a module that overrides `cuda()` to move more than its parameters and buffers (a matching
//!   network's LSTM state `self.c_0`): `.to()` skips the override, and the first forward mixes
//!   devices, on CUDA as on a TPU.
//!
//! So where the file or a project module within two imports defines such a class (one with
//! `def cuda(` and neither `def to(` nor `def _apply(`), a `.cuda()` fix on an object of it is
//! unsafe with the reason: for a plain class, a receiver the file assigns from a call of the
//! class (or such a call itself); for a module, also any model-like receiver (the module rule's
//! `model`, `net`, ...), whose class the file does not show. A receiver known to be a tensor or
//! a PyTorch module stays safe. The same-file case of a plain class is
//! [`Checker::own_cuda_method`]'s.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use regex::Regex;
use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::Ranged;

use crate::port::program::{imports, tree};
use crate::port::rewrite::Checker;
use crate::port::rewrite::lints::walk;
use crate::port::semantic::values;

/// A class line: its indentation, name and bases.
static CLASS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([ \t]*)class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:").unwrap()
});

/// A method definition: its name.
static DEF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[ \t]+(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(").unwrap());

/// A class with its own `cuda()` and no `to()`/`_apply()`.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::port::rewrite) struct CudaClass {
    pub name: String,
    /// A subclass of a module, tensor or parameter: it has PyTorch's `.to()`, which skips the
    /// override.
    pub module_like: bool,
    pub file: PathBuf,
}

/// The classes of `text` (the file at `file`) that define `cuda` and neither `to` nor `_apply`.
fn cuda_classes(text: &str, file: &Path) -> Vec<CudaClass> {
    if !text.contains("def cuda") {
        return vec![];
    }
    let mut out = vec![];
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = CLASS.captures(line) else {
            continue;
        };
        let indent = c[1].len();
        let (mut cuda, mut moves) = (false, false);
        for l in &lines[i + 1..] {
            let depth = l.len() - l.trim_start().len();
            if !l.trim().is_empty() && depth <= indent {
                break;
            }
            if let Some(d) = DEF.captures(l) {
                match &d[1] {
                    "cuda" => cuda = true,
                    "to" | "_apply" => moves = true,
                    _ => {}
                }
            }
        }
        if cuda && !moves {
            let bases = c.get(3).map_or("", |b| b.as_str());
            out.push(CudaClass {
                name: c[2].to_string(),
                module_like: ["Module", "Tensor", "Parameter", "nn."]
                    .iter()
                    .any(|k| bases.contains(k)),
                file: file.to_path_buf(),
            });
        }
    }
    out
}

/// The classes of [`cuda_classes`] in the project modules within two imports of the file at
/// `path` (its text as on disk), found once per file and run.
static PROGRAM: tree::Kept<Arc<Vec<CudaClass>>> = LazyLock::new(Default::default);

fn imported_cuda_classes(path: &Path) -> Arc<Vec<CudaClass>> {
    tree::fact(&PROGRAM, path, |text| {
        let found = imports::modules_within(path, text, 2)
            .into_iter()
            .filter_map(|m| {
                let t = crate::port::texts::text(&m.file)?;
                Some(cuda_classes(&t, &m.file))
            })
            .flatten()
            .collect();
        Arc::new(found)
    })
    .unwrap_or_default()
}

impl<'a> Checker<'a> {
    /// Why `receiver.cuda()` (rule `rule`) may be a class's own `cuda()` that `.to()` does not
    /// run (see the module doc), or None.
    pub(in crate::port::rewrite) fn program_cuda_method(
        &self,
        rule: &str,
        receiver: &'a Expr,
    ) -> Option<String> {
        let path = self.facts.path.as_deref()?;
        let classes = self.cuda_classes.get_or_init(|| {
            let mut found = cuda_classes(self.src, path);
            found.extend(imported_cuda_classes(path).iter().cloned());
            found
        });
        if classes.is_empty()
            || values::is_tensor_or_module(self.sem, &self.parsed.module, receiver)
        {
            return None;
        }
        let built = self.built_from(receiver);
        let class = classes.iter().find(|c| {
            built.as_deref() == Some(c.name.as_str()) || (c.module_like && rule == "module-cuda")
        })?;
        let project = tree::project_of(path);
        let at = tree::shown(&class.file, &project);
        Some(if class.module_like {
            format!(
                "not proven safe: the program's `{}` ({at}) overrides cuda() to move more than \
                 its parameters and buffers, and `.to(...)` does not run that override: if this \
                 is one of its objects, port the override (move its tensors in `_apply`, or \
                 register them as buffers) first",
                class.name
            )
        } else {
            format!(
                "not proven safe: this is an object of `{}` ({at}), which defines its own cuda() \
                 and no to(): `.to(...)` would raise AttributeError",
                class.name
            )
        })
    }

    /// The class whose call the receiver is (`AliasMethod(p)`) or the file assigns it from
    /// (`self.multinomial = AliasMethod(p)`).
    fn built_from(&self, receiver: &Expr) -> Option<String> {
        let callee = |e: &Expr| match e {
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Name(n) => Some(n.id.to_string()),
                Expr::Attribute(a) => Some(a.attr.to_string()),
                _ => None,
            },
            _ => None,
        };
        if let Some(c) = callee(receiver) {
            return Some(c);
        }
        let wanted = self.text(receiver.range());
        let mut found = None;
        walk(&self.parsed.module.body, true, &mut |node, _| {
            if let AnyNodeRef::StmtAssign(a) = node
                && a.targets.iter().any(|t| self.text(t.range()) == wanted)
                && let Some(c) = callee(&a.value)
            {
                found = Some(c);
            }
        });
        found
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::cuda_classes;
    use crate::port::test_support::{migrate_all_at, write};

    #[test]
    fn classes_with_their_own_cuda_and_no_to_are_found() {
        let text = "import torch\n\n\nclass AliasMethod(object):\n    def __init__(self, p):\n        self.p = p\n\n    def cuda(self):\n        self.p = self.p.cuda()\n\n\nclass Net(nn.Module):\n    def cuda(self):\n        super().cuda()\n        self.c_0 = self.c_0.cuda()\n        return self\n\n\nclass Both(nn.Module):\n    def cuda(self):\n        return self\n\n    def to(self, *a):\n        return self\n";
        let found = cuda_classes(text, Path::new("m.py"));
        let names: Vec<(&str, bool)> = found
            .iter()
            .map(|c| (c.name.as_str(), c.module_like))
            .collect();
        assert_eq!(names, [("AliasMethod", false), ("Net", true)]);
    }

    #[test]
    fn a_cuda_call_on_an_imported_class_with_its_own_cuda_stays() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "alias.py",
            "class AliasMethod(object):\n    def cuda(self):\n        self.q = self.q.cuda()\n",
        );
        write(
            d.path(),
            "nets.py",
            "import torch.nn as nn\n\n\nclass MatchingNet(nn.Module):\n    def cuda(self):\n        super().cuda()\n        self.c_0 = self.c_0.cuda()\n        return self\n",
        );
        let src = "import torch\nfrom alias import AliasMethod\nfrom nets import MatchingNet\n\n\nclass NCE:\n    def __init__(self, p):\n        self.multinomial = AliasMethod(p)\n        self.multinomial.cuda()\n        self.memory = torch.zeros(3).cuda()\n\n\ndef train(model, x):\n    model = model.cuda()\n    x = x.cuda()\n    return model(x)\n\n\nif __name__ == \"__main__\":\n    train(MatchingNet(), torch.ones(1))\n";
        let path = write(d.path(), "train.py", src);
        let out = migrate_all_at(src, &path);
        assert!(out.contains("        self.multinomial.cuda()\n"), "{out}");
        assert!(out.contains("    model = model.cuda()\n"), "{out}");
        assert!(out.contains("self.memory = torch.zeros(3).to("), "{out}");
        assert!(out.contains("x = x.to("), "{out}");
    }
}
