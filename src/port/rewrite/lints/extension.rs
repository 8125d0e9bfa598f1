//! KRN005: an import of a compiled CUDA extension that the project itself builds
//! (`from factor_multiply import butterfly_factor_multiply`, where a `setup.py` of the tree
//! builds `CUDAExtension('factor_multiply', [...'.cu'])`). KRN001 reports the build; the modules
//! that call the extension's ops show no CUDA name, so without this a program could move its
//! tensors to the TPU and meet NVIDIA kernels at its first call, with nothing reported. Imports
//! anywhere in the module count (under `try`, in a function); each extension is reported once per
//! module, at its first import.

use ruff_python_ast::AnyNodeRef;
use ruff_text_size::Ranged;

use super::{Found, walk};
use crate::port::program::extensions;
use crate::port::rewrite::Checker;

impl Checker<'_> {
    pub(super) fn cuda_extension_imports(&self) -> Vec<Found> {
        let Some(path) = self.facts.path.as_deref() else {
            return vec![];
        };
        let built = extensions::built_for(path);
        if built.is_empty() {
            return vec![];
        }
        let mut out = vec![];
        let mut seen: Vec<&str> = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let imported: Vec<String> = match node {
                AnyNodeRef::StmtImport(i) => i.names.iter().map(|a| a.name.to_string()).collect(),
                AnyNodeRef::StmtImportFrom(i) if i.level == 0 => {
                    let module = i.module.as_ref().map_or("", |m| m.as_str());
                    std::iter::once(module.to_string())
                        .chain(i.names.iter().map(|a| format!("{module}.{}", a.name)))
                        .collect()
                }
                _ => return,
            };
            // Once per extension and module: its first import.
            if let Some(ext) = built
                .iter()
                .find(|e| imported.contains(&e.name) && !seen.contains(&e.name.as_str()))
            {
                seen.push(&ext.name);
                out.push(Found::with(
                    node.range(),
                    format!("`{}` ({}:{})", ext.name, ext.shown, ext.line),
                ));
            }
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::{findings, write};

    #[test]
    fn imports_of_an_extension_the_project_compiles_with_cuda_are_reported() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "pkg/ext/setup.py",
            "from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('factor_multiply', ['f.cpp', 'f_cuda.cu'])\n",
        );
        write(d.path(), "pkg/__init__.py", "");
        let src = "import torch\n\nuse_extension = True\ntry:\n    from factor_multiply import butterfly_factor_multiply\n    from factor_multiply import butterfly_multiply_inplace\nexcept ImportError:\n    use_extension = False\nimport numpy\n";
        let path = write(d.path(), "pkg/multiply.py", src);
        let found = findings("KRN005", src, Some(&path));
        assert_eq!(
            found,
            [
                "5: imports `factor_multiply` (pkg/ext/setup.py:2), a CUDA extension this project compiles"
            ]
        );
        // A tree that builds no CUDA extension: nothing.
        let e = tempfile::tempdir().unwrap();
        let path = write(e.path(), "multiply.py", src);
        assert!(findings("KRN005", src, Some(&path)).is_empty());
    }
}
