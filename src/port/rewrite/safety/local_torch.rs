//! A fix that writes `torch.` into a function that imports torch itself, further down
//! (`def main(): parser.add_argument("--device", default="cuda") ... import torch`): Python
//! takes `torch` as a local name of the whole function, so the rewritten line raises
//! UnboundLocalError before that import runs, on every machine (set J's mask generator). An
//! `import torch` added at the top of the file does not help. Such fixes become unsafe.
//!
//! A module that imports torch only inside functions or under `try`/`if` keeps torch optional
//! (set J: a tagger whose default mode runs without torch), and one that does not import it at
//! all may be shared with torch-free tools (set K: data-preparation configs a CPU pipeline
//! imports without torch installed): a fix that needs `import torch` at its top would make
//! torch required there, so it becomes unsafe too.

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{self as ast, AnyNodeRef, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::port::diagnostic::Diagnostic;

/// Functions of the module (by their range) and where in each, not in a nested function or
/// class, `torch` is bound by an import.
struct Scan {
    found: Vec<(TextRange, Vec<TextSize>)>,
}

/// Where `body` (not nested functions or classes) imports `torch` as `torch`.
fn local_imports(body: &[Stmt], out: &mut Vec<TextSize>) {
    for s in body {
        match s {
            Stmt::Import(i) => {
                if i.names.iter().any(|a| {
                    a.asname.is_none()
                        && (a.name.as_str() == "torch" || a.name.starts_with("torch."))
                        || a.asname.as_ref().is_some_and(|n| n.as_str() == "torch")
                }) {
                    out.push(s.start());
                }
            }
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            _ => {
                for b in crate::port::parse::child_bodies(s) {
                    local_imports(b, out);
                }
            }
        }
    }
}

impl<'a> SourceOrderVisitor<'a> for Scan {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        if let AnyNodeRef::StmtFunctionDef(f) = node {
            let mut at = vec![];
            local_imports(&f.body, &mut at);
            // The body only: defaults and decorators run in the enclosing scope.
            if let (false, Some(first)) = (at.is_empty(), f.body.first()) {
                self.found
                    .push((TextRange::new(first.start(), f.end()), at));
            }
        }
        TraversalSignal::Traverse
    }
}

/// Make unsafe the fixes that write `torch.` before a function's own `import torch`.
pub(in crate::port::rewrite) fn keep_before_local_torch(
    module: &ast::ModModule,
    diags: &mut [Diagnostic],
) {
    if !diags.iter().any(|d| d.fix.is_some()) {
        return;
    }
    let mut scan = Scan { found: vec![] };
    for s in &module.body {
        source_order::walk_stmt(&mut scan, s);
    }
    if scan.found.is_empty() {
        return;
    }
    for d in diags.iter_mut() {
        let Some(fix) = &d.fix else { continue };
        if !fix.edits.iter().any(|e| e.content.contains("torch.")) {
            continue;
        }
        // The innermost function around the finding that imports torch, only after it (an
        // import above it, in its branch or not, is taken as binding it first).
        let late = scan
            .found
            .iter()
            .filter(|(f, _)| f.contains_range(d.range))
            .min_by_key(|(f, _)| f.len())
            .is_some_and(|(_, at)| at.iter().all(|p| *p > d.range.start()));
        if late {
            d.keep(
                "not rewritten: this function imports torch further down, so Python takes \
                 `torch` as its local name and the rewritten line would raise UnboundLocalError \
                 before that import runs: move the import to the top of the function, then migrate",
            );
        }
    }
}

/// Does the statement import torch or a module of it (`import torch.nn as nn`, `from torch
/// import nn`)?
fn imports_torch(s: &Stmt) -> bool {
    match s {
        Stmt::Import(i) => i
            .names
            .iter()
            .any(|a| a.name.as_str() == "torch" || a.name.starts_with("torch.")),
        Stmt::ImportFrom(f) => {
            f.level == 0
                && f.module
                    .as_ref()
                    .is_some_and(|m| m.as_str() == "torch" || m.starts_with("torch."))
        }
        _ => false,
    }
}

/// Does `body`, or any block inside it, functions included, import torch?
fn torch_imported_within(body: &[Stmt]) -> bool {
    body.iter().any(|s| {
        imports_torch(s)
            || match s {
                Stmt::FunctionDef(f) => torch_imported_within(&f.body),
                Stmt::ClassDef(c) => torch_imported_within(&c.body),
                _ => crate::port::parse::child_bodies(s)
                    .into_iter()
                    .any(torch_imported_within),
            }
    })
}

/// Libraries that cannot be imported without torch: a module importing one needs torch already.
const TORCH_LIBRARIES: &[&str] = &[
    "transformers",
    "diffusers",
    "peft",
    "trl",
    "accelerate",
    "lightning",
    "pytorch_lightning",
    "timm",
    "deepspeed",
    "opacus",
    "ignite",
    "spikingjelly",
    "norse",
    "apex",
    "xformers",
    "flash_attn",
    "bitsandbytes",
];

/// Does the module, though it does not import torch itself, need it already: at top level it
/// imports a torch library (`torch_xla`, `torchvision`, `transformers`, ...) or a project module
/// that imports torch at top level?
fn needs_torch_already(module: &ast::ModModule, path: Option<&std::path::Path>, src: &str) -> bool {
    let torch_library = |name: &str| {
        let root = name.split('.').next().unwrap_or("");
        root.starts_with("torch") || TORCH_LIBRARIES.contains(&root)
    };
    let library = module.body.iter().any(|s| match s {
        Stmt::Import(i) => i.names.iter().any(|a| torch_library(&a.name)),
        Stmt::ImportFrom(f) => f.level == 0 && f.module.as_ref().is_some_and(|m| torch_library(m)),
        _ => false,
    });
    library
        || path.is_some_and(|p| {
            crate::port::program::imports::project_imports(p, src)
                .iter()
                .any(|i| {
                    crate::port::texts::text(&i.file).is_some_and(|t| {
                        crate::port::parse::parse(&t)
                            .module
                            .body
                            .iter()
                            .any(imports_torch)
                    })
                })
        })
}

/// Make unsafe the fixes that need `import torch` at the top of a module that keeps torch
/// optional (imports it only in functions or under `try`/`if`).
pub(in crate::port::rewrite) fn keep_optional_torch(
    module: &ast::ModModule,
    path: Option<&std::path::Path>,
    src: &str,
    diags: &mut [Diagnostic],
) {
    let needs_torch = |d: &Diagnostic| {
        d.fix
            .as_ref()
            .is_some_and(|f| f.imports.iter().any(|i| i == "torch"))
    };
    if !diags.iter().any(needs_torch) || module.body.iter().any(imports_torch) {
        return;
    }
    let optional = torch_imported_within(&module.body);
    if !optional && needs_torch_already(module, path, src) {
        return;
    }
    let note = if optional {
        "unsafe: this module imports torch only inside functions or under try/if (torch is \
         optional here), and the fix needs `import torch` at its top, which would make torch \
         required to import it: write the portable form where torch is imported"
    } else {
        "unsafe: this module does not import torch, and the fix needs `import torch` at its \
         top: a new dependency of everything that imports it (a config module shared with \
         torch-free tools); apply it where torch is always installed, or write the portable form \
         where torch is imported"
    };
    for d in diags.iter_mut().filter(|d| needs_torch(d)) {
        d.make_unsafe(note);
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::ported;

    #[test]
    fn no_torch_before_a_local_import_of_torch() {
        let src = "import argparse\n\n\ndef main():\n    p = argparse.ArgumentParser()\n    p.add_argument(\"--device\", default=\"cuda\")\n    args = p.parse_args()\n    import torch\n    return torch.zeros(1, device=args.device)\n\n\nif __name__ == \"__main__\":\n    main()\n";
        assert!(ported(src).contains("default=\"cuda\""), "{}", ported(src));
        let early = src
            .replace("    import torch\n", "")
            .replace("def main():\n", "def main():\n    import torch\n");
        assert!(
            !ported(&early).contains("default=\"cuda\""),
            "{}",
            ported(&early)
        );
    }

    #[test]
    fn no_import_of_torch_added_to_a_module_that_keeps_it_optional() {
        let src = "DEVICE = \"cuda\"\n\n\ndef run(x):\n    import torch\n    return torch.as_tensor(x).to(DEVICE)\n";
        assert_eq!(ported(src), src);
        let plain = format!("import torch\n{src}");
        assert_ne!(ported(&plain), plain);
        // Nor to one that does not import torch at all.
        let config = "from dataclasses import dataclass\n\n\n@dataclass\nclass Config:\n    device: str = \"cuda\"\n";
        assert_eq!(ported(config), config);
    }
}
