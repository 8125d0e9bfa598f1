//! Keeping imports right after a rewrite: add `import torch` where a replacement needs it and
//! the file lacks it; remove an import that the rewrite left unused (one that was used before);
//! retire the imports of packages the new runtime does not need (`torch_xla`) once nothing
//! uses them, side-effect imports included (rule XLA001, [`retire_imports`]).

use std::collections::HashSet;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ModModule, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::edit::{Edit, apply_edits, delete_statement, line_end, line_start};
use super::parse::{child_bodies, parse};
use super::semantic::{BindingKind, Semantic};

/// Add `import <root>` for each root not already imported at module level, after the leading
/// block of imports (or after the docstring and `from __future__` imports).
pub fn add_imports(text: &str, roots: &[String]) -> String {
    let parsed = parse(text);
    let sem = Semantic::build(&parsed.module);
    let missing: Vec<&String> = roots
        .iter()
        .filter(|r| {
            let imported = sem
                .module_imports()
                .any(|(name, q)| name == r.as_str() && q == r.as_str());
            // Module-level code reading it above its import (a notebook cell before the one
            // importing torch) needs it at the top too.
            let read_early = || {
                sem.loads.iter().any(|(at, _)| {
                    text.get(usize::from(at.start())..usize::from(at.end())) == Some(r.as_str())
                        && sem.bound_at(r, at.start()).is_none()
                })
            };
            !imported || read_early()
        })
        .collect();
    if missing.is_empty() {
        return text.to_string();
    }
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let body = &parsed.module.body;
    let at = after_imports(body);
    let lines: String = missing.iter().map(|r| format!("import {r}{eol}")).collect();
    match at {
        None => {
            // Before the first statement (after a shebang/encoding/comment header).
            let first = body
                .first()
                .map(|s| line_start(text, s.start()))
                .unwrap_or(TextSize::from(0));
            let e = Edit::insert(first, lines);
            apply_edits(text, vec![&e])
        }
        Some(end) => {
            let le = line_end(text, end);
            if usize::from(le) >= text.len() && !text.ends_with('\n') {
                let e = Edit::insert(le, format!("{eol}{}", lines.trim_end()));
                apply_edits(text, vec![&e])
            } else {
                let e = Edit::insert(le + TextSize::try_from(1usize).unwrap(), lines);
                apply_edits(text, vec![&e])
            }
        }
    }
}

/// The end of the leading block: module docstring, then imports.
pub fn after_imports(body: &[Stmt]) -> Option<TextSize> {
    let mut at = None;
    let mut i = 0;
    if let Some(Stmt::Expr(e)) = body.first()
        && matches!(e.value.as_ref(), Expr::StringLiteral(_))
    {
        at = Some(e.end());
        i = 1;
    }
    while let Some(Stmt::Import(_) | Stmt::ImportFrom(_)) = body.get(i) {
        at = Some(body[i].end());
        i += 1;
    }
    at
}

/// Identity of an import binding that survives edits elsewhere in the file: its scope (by
/// creation order), bound name, qualified name and position among its twins in that scope.
pub type ImportKey = (usize, String, String, usize);

fn import_keys(sem: &Semantic) -> Vec<Option<ImportKey>> {
    let mut seen: std::collections::HashMap<(usize, &str, &str), usize> = Default::default();
    sem.bindings
        .iter()
        .map(|b| match &b.kind {
            BindingKind::Import { qualified } => {
                let n = seen
                    .entry((b.scope, b.name.as_str(), qualified.as_str()))
                    .or_default();
                *n += 1;
                Some((b.scope, b.name.to_string(), qualified.clone(), *n))
            }
            _ => None,
        })
        .collect()
}

/// Remove import aliases that are unused now but were used in the original source.
/// `used_before` holds the keys of imports the original read at least once.
pub fn remove_unused(text: &str, used_before: &HashSet<ImportKey>) -> String {
    let parsed = parse(text);
    if parsed.has_errors() {
        return text.to_string();
    }
    let sem = Semantic::build(&parsed.module);
    let counts = use_counts(&sem, &parsed.module);
    let keys = import_keys(&sem);
    let unused: HashSet<TextRange> = sem
        .bindings
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            counts[*i] == 0 && keys[*i].as_ref().is_some_and(|k| used_before.contains(k))
        })
        .map(|(_, b)| b.range)
        .collect();
    if unused.is_empty() {
        return text.to_string();
    }
    let mut edits = vec![];
    collect_removals(text, &parsed.module.body, &unused, &mut edits);
    apply_edits(text, edits.iter().collect())
}

/// The import bindings of a module that are read at least once (string annotations count).
pub fn used_imports(sem: &Semantic, module: &ModModule) -> HashSet<ImportKey> {
    let counts = use_counts(sem, module);
    import_keys(sem)
        .into_iter()
        .enumerate()
        .filter_map(|(i, k)| k.filter(|_| counts[i] > 0))
        .collect()
}

/// Reads per binding, where an import named in a string annotation (`-> "ShardedTensor"`,
/// `x: "Optional[nn.Module]"`, `cast("T", v)`, `TypeVar("T", bound="M")`) counts as read: type
/// checkers and `typing.get_type_hints` resolve those names. By name, whatever the scope.
fn use_counts(sem: &Semantic, module: &ModModule) -> Vec<usize> {
    let mut counts = sem.use_counts();
    let mut names = AnnotationNames::default();
    names.visit_body(&module.body);
    // A name bound in two branches (`if v2: from a import tpu` / `else: from b import tpu`)
    // resolves to one binding, but either may be the one that runs: a use of one is a use of
    // every binding of that name in the scope.
    let used: HashSet<(&str, _)> = sem
        .bindings
        .iter()
        .zip(&counts)
        .filter(|(_, n)| **n > 0)
        .map(|(b, _)| (b.name.as_str(), b.scope))
        .collect();
    for (i, b) in sem.bindings.iter().enumerate() {
        if counts[i] == 0
            && matches!(b.kind, BindingKind::Import { .. })
            && (names.names.contains(b.name.as_str())
                || (used.contains(&(b.name.as_str(), b.scope)) && binds_object(b)))
        {
            counts[i] = 1;
        }
    }
    counts
}

/// `from a import tpu` binds the object it names (`import a.b` binds the package `a`, which
/// twin imports share without using each other).
fn binds_object(b: &crate::port::semantic::Binding) -> bool {
    matches!(&b.kind, BindingKind::Import { qualified }
        if qualified.rsplit('.').next() == Some(b.name.as_str()) && qualified.contains('.'))
}

/// The root names of the expressions written as strings in annotations.
#[derive(Default)]
struct AnnotationNames {
    names: HashSet<String>,
    /// Inside an annotation (or a forward-reference argument), strings are code.
    depth: usize,
}

impl AnnotationNames {
    fn string(&mut self, text: &str) {
        let parsed = parse(text.trim());
        if parsed.has_errors() {
            return;
        }
        let mut inner = AnnotationNames {
            names: std::mem::take(&mut self.names),
            depth: 1,
        };
        inner.visit_body(&parsed.module.body);
        self.names = inner.names;
    }
}

impl<'a> Visitor<'a> for AnnotationNames {
    fn visit_annotation(&mut self, expr: &'a Expr) {
        self.depth += 1;
        visitor::walk_annotation(self, expr);
        self.depth -= 1;
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(n) if self.depth > 0 => {
                self.names.insert(n.id.to_string());
            }
            Expr::StringLiteral(s) if self.depth > 0 => self.string(s.value.to_str()),
            // `Literal["cuda"]` holds values, not names.
            Expr::Subscript(sub) if self.depth > 0 && is_literal(&sub.value) => {
                self.visit_expr(&sub.value);
            }
            // `cast("T", v)`, `TypeVar("T", bound="M")`: forward references outside annotations.
            Expr::Call(c) if self.depth == 0 && is_forward_ref_call(c) => {
                self.visit_expr(&c.func);
                for (i, a) in c.arguments.args.iter().enumerate() {
                    let as_type = i == 0 && !callee_is(c, "TypeVar");
                    self.depth += usize::from(as_type);
                    self.visit_expr(a);
                    self.depth -= usize::from(as_type);
                }
                for k in &c.arguments.keywords {
                    let as_type = k.arg.as_ref().is_some_and(|a| a.as_str() == "bound");
                    self.depth += usize::from(as_type);
                    self.visit_expr(&k.value);
                    self.depth -= usize::from(as_type);
                }
            }
            _ => visitor::walk_expr(self, expr),
        }
    }
}

fn callee_is(c: &ast::ExprCall, name: &str) -> bool {
    match c.func.as_ref() {
        Expr::Name(n) => n.id.as_str() == name,
        Expr::Attribute(a) => a.attr.as_str() == name,
        _ => false,
    }
}

fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Name(n) => n.id.as_str() == "Literal",
        Expr::Attribute(a) => a.attr.as_str() == "Literal",
        _ => false,
    }
}

fn is_forward_ref_call(c: &ast::ExprCall) -> bool {
    callee_is(c, "cast") || callee_is(c, "TypeVar")
}

fn collect_removals(text: &str, body: &[Stmt], unused: &HashSet<TextRange>, out: &mut Vec<Edit>) {
    let only = body.len() == 1;
    for stmt in body {
        let aliases: Option<Vec<TextRange>> = match stmt {
            Stmt::Import(i) => Some(i.names.iter().map(|a| a.range).collect()),
            Stmt::ImportFrom(i) => Some(i.names.iter().map(|a| a.range).collect()),
            _ => None,
        };
        if let Some(aliases) = aliases {
            let dead: Vec<usize> = (0..aliases.len())
                .filter(|i| unused.contains(&aliases[*i]))
                .collect();
            if dead.is_empty() {
                continue;
            }
            if dead.len() == aliases.len() {
                out.push(delete_statement(text, stmt.range(), only));
            } else {
                // Delete each dead alias with its separator (never two adjacent ones at once).
                let mut taken: Vec<TextRange> = vec![];
                for &d in &dead {
                    let r = if d + 1 < aliases.len() {
                        TextRange::new(aliases[d].start(), aliases[d + 1].start())
                    } else {
                        TextRange::new(aliases[d - 1].end(), aliases[d].end())
                    };
                    if taken
                        .iter()
                        .all(|t| t.end() <= r.start() || r.end() <= t.start())
                    {
                        taken.push(r);
                        out.push(Edit::delete(r));
                    }
                }
            }
            continue;
        }
        for child in child_bodies(stmt) {
            collect_removals(text, child, unused, out);
        }
    }
}

/// Packages whose imports go once nothing uses them (their import has side effects only for
/// the old runtime).
const RETIRED: &[&str] = &["torch_xla"];

/// Remove every import of a retired package that no code reads; returns the new text and how
/// many import statements were removed or shortened.
pub fn retire_imports(text: &str) -> (String, usize) {
    let parsed = parse(text);
    if parsed.has_errors() {
        return (text.to_string(), 0);
    }
    let sem = Semantic::build(&parsed.module);
    let counts = use_counts(&sem, &parsed.module);
    let retired = |q: &str| {
        RETIRED
            .iter()
            .any(|r| q == *r || (q.starts_with(r) && q[r.len()..].starts_with('.')))
    };
    let unused: HashSet<TextRange> = sem
        .bindings
        .iter()
        .enumerate()
        .filter(|(i, b)| {
            counts[*i] == 0
                && matches!(&b.kind, BindingKind::Import { qualified } if retired(qualified))
        })
        .map(|(_, b)| b.range)
        .collect();
    // `import torch_xla.x.y` binds `torch_xla`: the statement's module name decides.
    let mut edits = vec![];
    let mut n = 0;
    collect(
        text,
        &parsed.module.body,
        &unused,
        &retired,
        &mut edits,
        &mut n,
    );
    (apply_edits(text, edits.iter().collect()), n)
}

fn collect(
    text: &str,
    body: &[Stmt],
    unused: &HashSet<TextRange>,
    retired: &dyn Fn(&str) -> bool,
    out: &mut Vec<Edit>,
    n: &mut usize,
) {
    let only = body.len() == 1;
    for stmt in body {
        let aliases: Vec<(TextRange, bool)> = match stmt {
            Stmt::Import(i) => i
                .names
                .iter()
                .map(|a| (a.range(), retired(a.name.as_str())))
                .collect(),
            Stmt::ImportFrom(f) => {
                let module = f.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                f.names
                    .iter()
                    .map(|a| (a.range(), f.level == 0 && retired(module)))
                    .collect()
            }
            other => {
                for b in child_bodies(other) {
                    collect(text, b, unused, retired, out, n);
                }
                continue;
            }
        };
        let gone: Vec<bool> = aliases
            .iter()
            .map(|(r, ret)| *ret && unused.iter().any(|u| r.contains_range(*u)))
            .collect();
        if !gone.iter().any(|g| *g) {
            continue;
        }
        *n += 1;
        if gone.iter().all(|g| *g) {
            out.push(delete_statement(text, stmt.range(), only));
            continue;
        }
        // Some names stay: rewrite the name list.
        let keep: Vec<&str> = aliases
            .iter()
            .zip(&gone)
            .filter(|(_, g)| !**g)
            .map(|((r, _), _)| &text[*r])
            .collect();
        let (first, last) = (aliases[0].0, aliases[aliases.len() - 1].0);
        out.push(Edit::replace(
            TextRange::new(first.start(), last.end()),
            keep.join(", "),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_after_leading_imports() {
        let src = "\"\"\"Doc.\"\"\"\nimport os\nfrom torch import cuda\n\nx = 1\n";
        assert_eq!(
            add_imports(src, &["torch".into()]),
            "\"\"\"Doc.\"\"\"\nimport os\nfrom torch import cuda\nimport torch\n\nx = 1\n"
        );
        let src = "#!/usr/bin/env python\nx = 1\n";
        assert_eq!(
            add_imports(src, &["torch".into()]),
            "#!/usr/bin/env python\nimport torch\nx = 1\n"
        );
        let src = "import torch as T\nx = 1\n";
        assert_eq!(
            add_imports(src, &["torch".into()]),
            "import torch as T\nimport torch\nx = 1\n"
        );
        assert_eq!(
            add_imports("import torch\n", &["torch".into()]),
            "import torch\n"
        );
        assert_eq!(
            add_imports("import os\r\nx=1\r\n", &["torch".into()]),
            "import os\r\nimport torch\r\nx=1\r\n"
        );
    }

    #[test]
    fn removes_only_what_was_used_before() {
        let used = |src: &str| {
            let module = parse(src).module;
            used_imports(&Semantic::build(&module), &module)
        };
        let before =
            used("import os\nfrom torch import cuda, nn\nimport torch\nx = nn\ncuda.init()\n");
        let src = "import os\nfrom torch import cuda, nn\nimport torch\nx = nn\n";
        assert_eq!(
            remove_unused(src, &before),
            "import os\nfrom torch import nn\nimport torch\nx = nn\n"
        );
        let before = used("def f():\n    from torch import cuda\n    cuda.init()\n");
        let src = "def f():\n    from torch import cuda\n";
        assert_eq!(remove_unused(src, &before), "def f():\n    pass\n");
        // Twins: only the one that was used (the second) goes; the never-used first stays.
        let before = used("import importlib.abc\nimport importlib.util\nimportlib.util.x\n");
        let src = "import importlib.abc\nimport importlib.util\n";
        assert_eq!(remove_unused(src, &before), "import importlib.abc\n");
    }

    #[test]
    fn names_in_string_annotations_are_uses() {
        let used = |src: &str| {
            let module = parse(src).module;
            used_imports(&Semantic::build(&module), &module)
        };
        let src = "from typing import TYPE_CHECKING, cast, TypeVar\nif TYPE_CHECKING:\n    from a import A\n    from b import B\n    import c\n    import d\n    import e\nimport f\ndef g(x: \"A\") -> \"list['B']\":\n    y: \"c.C\" = cast(\"d.D\", x)\n    return y\nT = TypeVar(\"T\", bound=\"e.E\")\nprint(\"f\")\ndef h(m: \"Literal['f']\"): ...\n";
        let names: HashSet<String> = used(src).into_iter().map(|k| k.1).collect();
        for n in ["A", "B", "c", "d", "e"] {
            assert!(names.contains(n), "{n}");
        }
        assert!(!names.contains("f"));
        // Used before in code and still in an annotation string: kept.
        let before = used("from a import A\nx = A()\ndef g() -> \"A\": ...\n");
        let src = "from a import A\ndef g() -> \"A\": ...\n";
        assert_eq!(remove_unused(src, &before), src);
        let src = "import torch_xla.core.xla_model as xm\ndef g(d: \"xm.Device\"): ...\n";
        assert_eq!(retire_imports(src).1, 0);
    }

    #[test]
    fn unused_torch_xla_imports_go_used_ones_stay() {
        let src = "import torch\nimport torch_xla\nimport torch_xla.distributed.xla_backend\nimport torch_xla.core.xla_model as xm, os\nfrom torch_xla.amp import autocast, syncfree\nx = syncfree\n";
        let (out, n) = retire_imports(src);
        assert_eq!(
            out,
            "import torch\nimport os\nfrom torch_xla.amp import syncfree\nx = syncfree\n"
        );
        assert_eq!(n, 4);
        // Nothing left to do.
        assert_eq!(retire_imports(&out), (out.clone(), 0));
    }

    #[test]
    fn a_name_imported_in_two_branches_is_used_in_both() {
        let src = "if new:
    from torch_xla._internal import tpu
else:
    from torch_xla.experimental import tpu
env = tpu.get_tpu_env()
";
        assert_eq!(retire_imports(src), (src.to_string(), 0));
    }

    /// Module-level code reading torch above its import (a notebook's earlier cell) gets it at
    /// the top too (set AB: `DEVICE = 'cuda'` ported in the cell before `import torch`).
    #[test]
    fn a_name_read_above_its_import_is_imported_at_the_top() {
        let text = "import os\nDEVICE = torch.device('cuda')\nimport torch\n";
        let out = add_imports(text, &["torch".to_string()]);
        assert!(out.starts_with("import os\nimport torch\nDEVICE"), "{out}");
        let later = "import os\nimport torch\nDEVICE = torch.device('cuda')\n";
        assert_eq!(add_imports(later, &["torch".to_string()]), later);
        let deferred = "def f():\n    return torch.ones(1)\nimport torch\n";
        assert_eq!(add_imports(deferred, &["torch".to_string()]), deferred);
    }
}
