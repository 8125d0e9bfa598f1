//! Facts about a file as the user gave it: every qualified name it reads. A rule can be unsafe
//! in a multi-process script that does not wrap its model in DDP (`unsafe_if_uses`/
//! `unless_uses`; `xm.optimizer_step(opt)` → `opt.step()` drops the gradient averaging there),
//! or apply only to some files (`only_if_uses`/`not_if_uses`: `xmp.spawn` joins the process
//! group itself only where the script never calls `init_process_group`).
//!
//! `unless_uses` is asked per finding: the names must be *called on every path* to it
//! ([`called_with`]), so `if flags.ddp: model = DDP(model)` does not make the step safe.

use std::collections::HashSet;

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{Expr, ExprCall, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::parse::Parsed;
use super::rules::Rule;
use super::semantic::Semantic;

/// Facts about a file as the user gave it.
#[derive(Debug, Default)]
pub struct FileFacts {
    /// Every qualified name the code reads (`torch.nn.parallel.DistributedDataParallel`,
    /// `torch_xla.distributed.xla_multiprocessing.spawn`).
    pub uses: HashSet<String>,
    /// The file is part of a framework's own sources (PyTorch/XLA, Lightning, DeepSpeed,
    /// Accelerate, torchax: a package directory of that name above it): the framework's name.
    /// It defines the APIs the rules rewrite, or picks devices through its own accelerator
    /// abstraction, so no fix there is proven to keep its meaning.
    pub framework_own: Option<&'static str>,
    /// The file runs as a program: an `if __name__ == "__main__":` block or a call statement at
    /// module level. Only a program that never starts processes is proven single-process; a
    /// library module's step may run under a launcher elsewhere (Lightning's XLA strategy).
    pub program: bool,
    /// The file declares at module level that it runs only on CUDA (`pytest.importorskip(
    /// "triton")`, a module-level skip when CUDA is missing): the statement's range and text.
    pub cuda_only: Option<(TextRange, String)>,
    /// Where the file is, to look at its neighbours ([`crate::port::neighbours`]) when a
    /// check needs to know which imported names are CUDA-only.
    pub path: Option<std::path::PathBuf>,
    /// Rule ids or prefixes a `# tpuport: ignore-file[DEV, AMP003]` comment silences in the
    /// whole file ([`crate::port::noqa`]).
    pub ignored_rules: Vec<String>,
    /// Which machine the fixes write for (`--to`): not a fact of the file, but fixed for the
    /// whole migration of it, as the facts are.
    pub to: crate::port::rules::Target,
    /// The oldest torch the project runs, where its owner declares it (`--min-torch`).
    pub min_torch: Option<(u32, u32)>,
}

impl FileFacts {
    /// What the file uses (the qualified names it reads); the other facts are left default.
    pub fn of(parsed: &Parsed, sem: &Semantic) -> FileFacts {
        struct Names<'s> {
            sem: &'s Semantic,
            imported: rustc_hash::FxHashSet<&'s str>,
            out: HashSet<String>,
        }
        impl<'a> SourceOrderVisitor<'a> for Names<'_> {
            fn visit_expr(&mut self, e: &'a Expr) {
                // Only chains rooted in an imported name can resolve; the longest chain is enough
                // (a name matches everything under it), so its prefixes are not resolved again.
                let mut root = e;
                while let Expr::Attribute(a) = root {
                    root = &a.value;
                }
                let chain = match (e, root) {
                    (Expr::Attribute(a), Expr::Name(n)) => {
                        (a.ctx == ExprContext::Load).then_some(n)
                    }
                    (Expr::Name(n), _) => (n.ctx == ExprContext::Load).then_some(n),
                    _ => None,
                };
                if let Some(n) = chain {
                    if self.imported.contains(n.id.as_str())
                        && let Some(q) = self.sem.qualified_name(e)
                    {
                        // Record the chain and each prefix (`a.b.c` uses `a.b` and `a`).
                        let mut q = q.as_str();
                        loop {
                            self.out.insert(q.to_string());
                            match q.rfind('.') {
                                Some(i) => q = &q[..i],
                                None => break,
                            }
                        }
                    }
                    return;
                }
                source_order::walk_expr(self, e);
            }
        }
        let mut v = Names {
            sem,
            imported: sem.import_names(),
            out: HashSet::new(),
        };
        for s in &parsed.module.body {
            v.visit_stmt(s);
        }
        // The other facts do not depend on the rules: `migrate_source_at` sets them for every file.
        FileFacts {
            uses: v.out,
            ..FileFacts::default()
        }
    }
}

impl FileFacts {
    /// Does the file use one of `names` (a name matches itself and everything under it)?
    pub fn uses_any(&self, names: &[String]) -> bool {
        names.iter().any(|n| {
            self.uses
                .iter()
                .any(|u| u == n || (u.starts_with(n.as_str()) && u[n.len()..].starts_with('.')))
        })
    }
}

/// Could the rule's fix be unsafe in this file (it uses one of `unsafe_if_uses`)? Whether
/// `unless_uses` lifts that is decided per finding, by [`dominated_by_call`].
/// `if __name__ == "__main__":` or a call made at module level. Not the settings calls that
/// fixes write as statements (`torch.set_float32_matmul_precision(..)` for a TF32 assignment,
/// `torch.__future__.*`, `torch.accelerator.*`): a module the port gave one is what it was, and
/// a second run must judge it as the first did (found by the fuzz harness).
pub fn runs_as_program(stmt: &Stmt) -> bool {
    match stmt {
        Stmt::Expr(e) => match &*e.value {
            Expr::Call(c) => !written_by_fixes(&c.func),
            _ => false,
        },
        Stmt::If(i) => match &*i.test {
            Expr::Compare(c) => [&*c.left]
                .into_iter()
                .chain(c.comparators.iter())
                .any(|x| matches!(x, Expr::Name(n) if n.id.as_str() == "__name__")),
            _ => false,
        },
        _ => false,
    }
}

/// Could a file with this text hold a statement [`runs_as_program`] accepts? A text test the
/// prefilter makes before parsing ([`crate::port::RuleIndex::active`]), so it must never say no
/// to a program: a top-level `if` naming `__name__` before its colon (not `__name__` anywhere:
/// every module of a library that calls `logging.getLogger(__name__)` would be parsed for the
/// program-only lints), or a line that opens with a call (a name, a parenthesis,
/// a subscript or a string, then `(`, as `main()`, `fire.Fire(f)`, `print ("x")`, `"a".join(b)`
/// do), or a call after a `;`. It says yes to much that is no program (calls in docstrings,
/// `x()[0] = 1`): those files are parsed, as before.
pub fn could_run_as_program(text: &str) -> bool {
    // One pass over the lines (a regex over the text and a search of each line for `;` were 3 %
    // of a large tree's run): each line is asked whether it opens with a call, or with the
    // `if` naming `__name__`, or holds a call after a `;`, where the text holds those at all.
    let b = text.as_bytes();
    let name = memchr::memmem::find(b, b"__name__").is_some();
    let semicolon = memchr::memchr(b';', b).is_some();
    let mut start = 0;
    loop {
        let end = memchr::memchr(b'\n', &b[start..]).map_or(b.len(), |n| start + n);
        let line = &text[start..end];
        if opens_with_call(line)
            || (name && name_test_at(text, start))
            || (semicolon
                && memchr::memchr_iter(b';', line.as_bytes())
                    .any(|i| opens_with_call(line[i + 1..].trim_start_matches([' ', '\t']))))
        {
            return true;
        }
        if end == b.len() {
            return false;
        }
        start = end + 1;
    }
}

/// Does the line at `start` open a test naming `__name__`: `if`, then, before any `:`,
/// `__name__` as a word (what the regex `(?m)^if\b[^:]*\b__name__\b` finds there, ASCII word
/// bytes)?
fn name_test_at(text: &str, start: usize) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = text.as_bytes();
    if !b[start..].starts_with(b"if") || b.get(start + 2).is_none_or(|c| word(*c)) {
        return false;
    }
    let from = start + 2;
    let to = memchr::memchr(b':', &b[from..]).map_or(b.len(), |n| from + n);
    memchr::memmem::find_iter(&b[from..to], b"__name__").any(|i| {
        let at = from + i;
        !word(b[at - 1]) && b.get(at + 8).is_none_or(|c| !word(*c))
    })
}

/// Does this piece of a line open with a call: a name (then anything but blanks, `#`, `=` and
/// `(`), blanks, `(`; or a parenthesis, bracket or quote with a `(` later on the line? (A hand
/// scan: the regex it replaces was 5 % of a large tree's prefilter.)
fn opens_with_call(piece: &str) -> bool {
    let b = piece.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
            let end = b
                .iter()
                .position(|c| c.is_ascii_whitespace() || matches!(c, b'#' | b'=' | b'('))
                .unwrap_or(b.len());
            let rest = b[end..].iter().skip_while(|c| matches!(c, b' ' | b'\t'));
            rest.take(1).any(|c| *c == b'(')
        }
        Some(b'(' | b'[' | b'"' | b'\'') => b[1..].contains(&b'('),
        _ => false,
    }
}

/// `torch.set_float32_matmul_precision`, `torch.__future__.X`, `torch.accelerator.X`.
fn written_by_fixes(func: &Expr) -> bool {
    let mut parts = vec![];
    let mut e = func;
    while let Expr::Attribute(a) = e {
        parts.push(a.attr.as_str());
        e = &a.value;
    }
    let Expr::Name(root) = e else {
        return false;
    };
    parts.reverse();
    root.id.as_str() == "torch"
        && matches!(
            parts.as_slice(),
            ["set_float32_matmul_precision"] | ["__future__" | "accelerator", ..]
        )
}

/// The first module-level statement (in the top-level body or a top-level `if`) saying the
/// file runs only on CUDA: `pytest.importorskip("triton")`, `pytestmark = pytest.mark.skipif(..)`
/// naming CUDA, or an `if` naming CUDA that skips the module (`pytest.skip(..,
/// allow_module_level=True)`, `raise unittest.SkipTest(..)`).
pub fn cuda_only_module(body: &[Stmt], src: &str) -> Option<(TextRange, String)> {
    let cuda = |r: TextRange| {
        let t = src[r].to_ascii_lowercase();
        ["cuda", "gpu", "triton", "is_sm_"]
            .iter()
            .any(|w| t.contains(w))
    };
    let found = |s: &Stmt| {
        let first = src[s.range()]
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        Some((s.range(), first))
    };
    for s in body {
        match s {
            Stmt::Expr(_) | Stmt::Assign(_) => {
                let (value, pytestmark) = match s {
                    Stmt::Expr(e) => (&*e.value, false),
                    Stmt::Assign(a) => (
                        &*a.value,
                        a.targets
                            .iter()
                            .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == "pytestmark")),
                    ),
                    _ => unreachable!(),
                };
                let text = &src[value.range()];
                let triton = text.starts_with("pytest.importorskip(")
                    && matches!(value, Expr::Call(c) if c.arguments.args.first().is_some_and(
                        |a| matches!(a, Expr::StringLiteral(l) if l.value.to_str() == "triton")));
                if triton || (pytestmark && text.contains("skipif") && cuda(value.range())) {
                    return found(s);
                }
            }
            Stmt::If(i) => {
                let skips = i.body.iter().any(|b| match b {
                    Stmt::Expr(e) => {
                        let t = &src[e.range()];
                        t.starts_with("pytest.skip(") && t.contains("allow_module_level=True")
                    }
                    Stmt::Raise(r) => src[r.range()].contains("SkipTest"),
                    _ => false,
                });
                if skips && (cuda(i.test.range()) || cuda(i.body[0].range())) {
                    return found(s);
                }
                let inner = std::iter::once(&i.body[..])
                    .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]));
                for b in inner {
                    if let Some(f) = cuda_only_module(b, src) {
                        return Some(f);
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// Frameworks whose own sources are not ported: the package directory and what it is.
const FRAMEWORKS: &[(&str, &str)] = &[
    ("torch_xla", "PyTorch/XLA"),
    ("torchax", "torchax"),
    ("lightning", "Lightning"),
    ("pytorch_lightning", "Lightning"),
    ("lightning_fabric", "Lightning"),
    ("deepspeed", "DeepSpeed"),
    ("accelerate", "Accelerate"),
];

/// Is `path` inside a framework's own package (a `torch_xla`, `lightning`, `deepspeed`, ...
/// directory above the file)? Rewriting torch_xla's implementation of itself (`device='xla'` in
/// the code that registers that device) changes what torch_xla does; Lightning and DeepSpeed
/// choose devices through their own accelerator classes (Lightning's "tpu" means torch_xla,
/// DeepSpeed has no TorchTPU accelerator), so their hard-coded "cuda" is a CUDA path, and giving
/// TorchTPU to them is the framework's port, not the user's.
pub fn framework_source(path: &std::path::Path) -> Option<&'static str> {
    let dir = path.parent()?;
    dir.components().find_map(|c| {
        FRAMEWORKS
            .iter()
            .find(|(pkg, _)| c.as_os_str() == *pkg)
            .map(|(_, name)| *name)
    })
}

/// In a framework's own sources every fix is at most unsafe, and says why.
pub fn demote_in_framework(diags: &mut [super::diagnostic::Diagnostic], name: &str) {
    let note = if name == "PyTorch/XLA" {
        "this file is part of PyTorch/XLA's own sources (under a `torch_xla` package): it \
         defines the API being rewritten, so the fix is unsafe; port the code that uses \
         torch_xla instead"
            .to_string()
    } else {
        format!(
            "this file is part of {name}'s own sources: {name} chooses devices and backends \
             through its own accelerator classes, so giving it TorchTPU is {name}'s port, and \
             the fix is unsafe; port the code that uses {name} instead"
        )
    };
    for d in diags {
        d.make_unsafe(&note);
    }
}

pub fn unsafe_here(rule: &Rule, facts: &FileFacts) -> bool {
    !rule.unsafe_if_uses.is_empty() && facts.uses_any(&rule.unsafe_if_uses)
}

/// Does every run of the code at `site` go with a call for which `is_wrap` holds? A sound
/// approximation: a statement of `body` (or of a block around the site) that always makes the
/// call, before or after the site: not under an `if` without an `else` that makes it too, a
/// loop, a `try`, a conditional expression, a lambda or a comprehension.
pub fn called_with(body: &[Stmt], site: TextSize, is_wrap: &dyn Fn(&ExprCall) -> bool) -> bool {
    let mut around = None;
    for stmt in body {
        if stmt.range().contains(site) {
            around = Some(stmt);
        } else if always_calls(stmt, is_wrap) {
            return true;
        }
    }
    around.is_some_and(|stmt| {
        blocks(stmt)
            .into_iter()
            .find(|b| {
                b.first().is_some_and(|f| f.start() <= site)
                    && b.last().is_some_and(|l| site < l.end())
            })
            .is_some_and(|b| called_with(b, site, is_wrap))
    })
}

/// Does every run of the code at `site` make a call for which `is_call` holds *before* it? A
/// statement of `body` ahead of the one holding the site (or of a block around the site, ahead
/// of it there) that always makes the call, as [`always_calls`] judges.
pub fn called_before(body: &[Stmt], site: TextSize, is_call: &dyn Fn(&ExprCall) -> bool) -> bool {
    for stmt in body {
        if stmt.range().contains(site) {
            return blocks(stmt)
                .into_iter()
                .find(|b| {
                    b.first().is_some_and(|f| f.start() <= site)
                        && b.last().is_some_and(|l| site < l.end())
                })
                .is_some_and(|b| called_before(b, site, is_call));
        }
        if stmt.start() > site {
            return false;
        }
        if always_calls(stmt, is_call) {
            return true;
        }
    }
    false
}

/// Does this statement make such a call whenever it runs?
pub fn always_calls(stmt: &Stmt, is_wrap: &dyn Fn(&ExprCall) -> bool) -> bool {
    let block = |b: &[Stmt]| b.iter().any(|s| always_calls(s, is_wrap));
    match stmt {
        Stmt::Expr(_)
        | Stmt::Assign(_)
        | Stmt::AnnAssign(_)
        | Stmt::AugAssign(_)
        | Stmt::Return(_) => {
            let mut v = Unconditional {
                is_wrap,
                found: false,
            };
            v.visit_stmt(stmt);
            v.found
        }
        Stmt::With(w) => block(&w.body),
        Stmt::If(i) => {
            block(&i.body)
                && i.elif_else_clauses.last().is_some_and(|c| c.test.is_none())
                && i.elif_else_clauses.iter().all(|c| block(&c.body))
        }
        Stmt::Try(t) => block(&t.finalbody),
        _ => false,
    }
}

/// The blocks of statements directly inside a compound statement of the same function (not
/// the bodies of nested `def`s and classes: [`crate::port::parse::child_bodies`] has those).
pub(crate) fn blocks(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::If(i) => std::iter::once(&i.body[..])
            .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]))
            .collect(),
        Stmt::For(f) => vec![&f.body, &f.orelse],
        Stmt::While(w) => vec![&w.body, &w.orelse],
        Stmt::With(w) => vec![&w.body],
        Stmt::Try(t) => {
            let mut v: Vec<&[Stmt]> = vec![&t.body, &t.orelse, &t.finalbody];
            for h in &t.handlers {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                v.push(&h.body);
            }
            v
        }
        Stmt::Match(m) => m.cases.iter().map(|c| &c.body[..]).collect(),
        _ => vec![],
    }
}

/// Finds a call that runs whenever its statement does (not inside a branch of an expression).
struct Unconditional<'f> {
    is_wrap: &'f dyn Fn(&ExprCall) -> bool,
    found: bool,
}

impl<'a> SourceOrderVisitor<'a> for Unconditional<'_> {
    fn visit_expr(&mut self, e: &'a Expr) {
        match e {
            Expr::If(_)
            | Expr::BoolOp(_)
            | Expr::Lambda(_)
            | Expr::ListComp(_)
            | Expr::SetComp(_)
            | Expr::DictComp(_)
            | Expr::Generator(_) => {}
            Expr::Call(c) if (self.is_wrap)(c) => self.found = true,
            _ => source_order::walk_expr(self, e),
        }
    }
}

/// Does the rule apply to this file at all (`only_if_uses`, `not_if_uses`)?
pub fn applies_here(rule: &Rule, facts: &FileFacts) -> bool {
    (rule.only_if_uses.is_empty() || facts.uses_any(&rule.only_if_uses))
        && !facts.uses_any(&rule.not_if_uses)
}

#[cfg(test)]
#[path = "facts_tests.rs"]
mod tests;
