//! Ports that keep a project's older torch. `torch.accelerator` came in torch 2.6; a project that
//! supports an older torch (its pins, its README: [`super::torch_pin`]) runs a portable form into
//! an AttributeError there (sets L-O: 45 of their wrong fixes). Where a fix replaces code inside
//! one expression and needs nothing newer than 2.6, the fix keeps both:
//!
//! ```python
//! if hasattr(torch, "accelerator"):
//!     n = torch.accelerator.device_count()
//! else:
//!     n = torch.cuda.device_count()
//! ```
//!
//! On a torch without `torch.accelerator` the original statement runs, exactly as written; on
//! a torch that has it (2.6 and later: a CUDA machine, a TPU under TorchTPU) the portable one, as everywhere
//! else. An assignment or a call on its own line is written as that `if` (over several lines
//! too, its continuation lines 4 columns deeper, unless it holds a multi-line string or a
//! backslash);
//! in any other statement the statement's whole expression, where it is short and on one line,
//! or else the smallest expression that holds every edit (a call, not its callee), becomes
//! `(new if hasattr(torch, "accelerator") else old)`. The fixes inside one statement are
//! written together. An edit inside an f-string is written with the whole f-string (or what
//! holds it) in both forms, never with the test inside it (its quotes would break the f-string
//! before Python 3.12); one in an expression longer than a line's worth (but a string over
//! several lines, written twice as it is) is not rewritten this way, and the fix stays unsafe.
//! A form that calls a later addition (`set_device_index`, 2.7; the memory statistics, 2.9;
//! `torch.accelerator.random`, 2.13) tests for it too (`and hasattr(torch.accelerator,
//! "set_device_index")`); one using `check_available` (2.7, an argument no test can find)
//! stays unsafe.
//!
//! Code in the old-torch branch of such a test (written by this fix or by hand: `... if
//! hasattr(torch, "accelerator") else <old>`, `if hasattr(torch, "accelerator"): ... else:
//! <old>`) is the path for torch before 2.6 on purpose: its findings are dropped, so a second run
//! changes nothing.

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal, walk_expr};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::port::diagnostic::Diagnostic;
use crate::port::edit::{Edit, Fix};

/// The test that picks the portable form where torch has `torch.accelerator` (forms that call
/// a later addition, such as `set_device_index` (2.7), test for it too: `... and
/// hasattr(torch.accelerator, "set_device_index")`).
pub(super) const PROBE: &str = "hasattr(torch, \"accelerator\")";

/// The longest expression rewritten with both forms (its text, once).
const LONGEST: usize = 160;

/// One expression of a module.
struct Expression {
    range: TextRange,
    /// It sits in an f-string.
    in_fstring: bool,
    /// It is a statement's own expression (not part of a larger one).
    root: bool,
    /// It is a string or an f-string: one over several lines (a backslash or triple-quoted
    /// literal) can be written twice as it is, its lines inside the literal untouched.
    string: bool,
    /// It is the callee of a call (`torch.cuda.device_count` of `torch.cuda.device_count()`).
    callee: bool,
    /// It is stored to or deleted (an assignment's target), or a decorator: no conditional
    /// expression may stand there (a decorator's only from Python 3.9).
    fixed_place: bool,
    /// The statement it is all of, or the value of (an expression statement such as
    /// `torch.cuda.synchronize()`, an assignment such as `n = torch.cuda.device_count()`).
    statement: Option<TextRange>,
}

/// A module's expressions and its old-torch branches.
pub(super) struct Exprs {
    all: Vec<Expression>,
    /// The branches that run where torch has no `torch.accelerator`.
    old_branches: Vec<TextRange>,
    /// The branches that run only where torch has it: the body of a test that asks for it
    /// first (`elif hasattr(torch, "accelerator") and torch.accelerator.is_available():`, the
    /// branch a chain gains, together/branch.rs), whose fixes need no second form.
    new_branches: Vec<TextRange>,
}

/// The code a fix keeping the old torch rewrites.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Whole {
    pub range: TextRange,
    /// An expression statement on its own line, with its indentation: written as an `if`.
    statement: Option<String>,
    /// A string literal (over several lines, maybe): both forms written as they are.
    literal: bool,
}

/// `hasattr(torch, "accelerator")`, alone or first of an `and`.
fn is_probe(e: &Expr, names: &[String]) -> bool {
    // `and` of such tests only (`... and hasattr(torch.accelerator, "set_device_index")`): any
    // other operand makes the `else` run on a new torch too.
    if let Expr::BoolOp(b) = e
        && b.op == ast::BoolOp::And
    {
        return b.values.first().is_some_and(|v| is_probe(v, names))
            && b.values[1..].iter().all(is_addition);
    }
    // `torch` or the name the module imports it as (`import torch as th`).
    matches!(hasattr_args(e), Some((Expr::Name(m), "accelerator")) if names.iter().any(|n| n == m.id.as_str()))
}

/// The portable side of a block written in two forms (`if hasattr(torch, "accelerator"):
/// <portable> else: <original>`), read as what the block does on a torch with an accelerator.
pub(super) fn portable_side(body: &[ast::Stmt]) -> Option<&[ast::Stmt]> {
    match body {
        [ast::Stmt::If(i)]
            if matches!(&*i.elif_else_clauses, [c] if c.test.is_none())
                && is_probe(&i.test, &["torch".to_string()]) =>
        {
            Some(&i.body)
        }
        _ => None,
    }
}

/// A test true only where torch has `torch.accelerator`: the probe, alone or first of an `and`
/// (whatever the other operands ask).
fn probes_first(e: &Expr, names: &[String]) -> bool {
    match e {
        Expr::BoolOp(b) if b.op == ast::BoolOp::And => {
            b.values.first().is_some_and(|v| probes_first(v, names))
        }
        _ => is_probe(e, names),
    }
}

/// `hasattr(torch.accelerator, "<name>")`.
fn is_addition(e: &Expr) -> bool {
    matches!(
        hasattr_args(e),
        Some((Expr::Attribute(a), _))
            if a.attr.as_str() == "accelerator" && a.value.is_name_expr()
    )
}

/// `torch`, and the names a module imports it as (`import torch as th`).
pub(super) fn torch_names(src: &str) -> Vec<String> {
    static AS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?m)^[ \t]*import torch as (\w+)[ \t]*(?:#.*)?\r?$").unwrap()
    });
    let mut names = vec!["torch".to_string()];
    if src.contains("import torch as ") {
        names.extend(AS.captures_iter(src).map(|c| c[1].to_string()));
    }
    names
}

/// `hasattr(<object>, "<name>")`: the object and the name.
fn hasattr_args(e: &Expr) -> Option<(&Expr, &str)> {
    let Expr::Call(c) = e else { return None };
    if !matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "hasattr")
        || !c.arguments.keywords.is_empty()
    {
        return None;
    }
    match c.arguments.args.as_ref() {
        [object, Expr::StringLiteral(s)] => Some((object, s.value.to_str())),
        _ => None,
    }
}

struct Collect {
    out: Exprs,
    /// `torch` and the names the module imports it as.
    names: Vec<String>,
    in_fstring: usize,
    depth: usize,
    callees: Vec<TextRange>,
    decorators: Vec<TextRange>,
    /// The statements whose expressions are met next: (the expression, the statement).
    statements: Vec<(TextRange, TextRange)>,
}

impl<'a> SourceOrderVisitor<'a> for Collect {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        match node {
            AnyNodeRef::StmtFunctionDef(f) => {
                self.decorators
                    .extend(f.decorator_list.iter().map(|d| d.expression.range()));
            }
            AnyNodeRef::StmtClassDef(c) => {
                self.decorators
                    .extend(c.decorator_list.iter().map(|d| d.expression.range()));
            }
            AnyNodeRef::StmtExpr(s) => self.statements.push((s.value.range(), s.range())),
            AnyNodeRef::StmtAssign(s) => self.statements.push((s.value.range(), s.range())),
            AnyNodeRef::StmtAnnAssign(s) => {
                if let Some(v) = &s.value {
                    self.statements.push((v.range(), s.range()));
                }
            }
            _ => {}
        }
        if let AnyNodeRef::StmtIf(s) = node {
            if is_probe(&s.test, &self.names)
                && let Some(first) = s.elif_else_clauses.first()
            {
                self.out
                    .old_branches
                    .push(TextRange::new(first.start(), s.end()));
            }
            let tests = std::iter::once((Some(&*s.test), &s.body)).chain(
                s.elif_else_clauses
                    .iter()
                    .map(|c| (c.test.as_ref(), &c.body)),
            );
            for (test, body) in tests {
                if test.is_some_and(|t| probes_first(t, &self.names))
                    && let (Some(first), Some(last)) = (body.first(), body.last())
                {
                    self.out
                        .new_branches
                        .push(TextRange::new(first.start(), last.end()));
                }
            }
        }
        TraversalSignal::Traverse
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.out.all.push(Expression {
            range: expr.range(),
            in_fstring: self.in_fstring > 0,
            root: self.depth == 0,
            string: matches!(expr, Expr::FString(_) | Expr::StringLiteral(_)),
            callee: self.callees.last() == Some(&expr.range()),
            fixed_place: matches!(
                expr,
                Expr::Name(ast::ExprName { ctx, .. })
                    | Expr::Attribute(ast::ExprAttribute { ctx, .. })
                    | Expr::Subscript(ast::ExprSubscript { ctx, .. })
                    | Expr::Tuple(ast::ExprTuple { ctx, .. })
                    | Expr::List(ast::ExprList { ctx, .. })
                    | Expr::Starred(ast::ExprStarred { ctx, .. })
                    if *ctx != ast::ExprContext::Load
            ) || self.decorators.contains(&expr.range()),
            statement: self
                .statements
                .last()
                .filter(|(e, _)| self.depth == 0 && *e == expr.range())
                .map(|(_, s)| *s),
        });
        if let Expr::If(i) = expr {
            if is_probe(&i.test, &self.names) {
                self.out.old_branches.push(i.orelse.range());
            }
            if probes_first(&i.test, &self.names) {
                self.out.new_branches.push(i.body.range());
            }
        }
        if let Expr::Call(c) = expr {
            self.callees.push(c.func.range());
        }
        let fstring = matches!(expr, Expr::FString(_));
        self.in_fstring += usize::from(fstring);
        self.depth += 1;
        walk_expr(self, expr);
        self.depth -= 1;
        self.in_fstring -= usize::from(fstring);
    }
}

impl Exprs {
    pub(super) fn of(body: &[Stmt], src: &str) -> Exprs {
        let mut c = Collect {
            names: torch_names(src),
            out: Exprs {
                all: vec![],
                old_branches: vec![],
                new_branches: vec![],
            },
            in_fstring: 0,
            depth: 0,
            callees: vec![],
            decorators: vec![],
            statements: vec![],
        };
        c.visit_body(body);
        c.out
    }

    /// The expression to write both forms of, for edits spanning `r`: the statement's whole
    /// expression where it is short and on one line (both forms read in full), else the
    /// smallest expression holding `r` (a call rather than its callee); none inside an
    /// f-string (an f-string holding the edit is written whole).
    /// `displayed`: a notebook, whose cells show their last expression's value (set S: an `if`
    /// hid `torch.cuda.is_available()`'s True): expression statements stay expressions there.
    pub(super) fn whole_for(&self, r: TextRange, src: &str, displayed: bool) -> Option<Whole> {
        // Not one inside an f-string: the test's quotes would break it before Python 3.12. An
        // edit inside one is written with the f-string, or what holds it, in both forms.
        let holding: Vec<&Expression> = self
            .all
            .iter()
            .filter(|e| e.range.contains_range(r) && !e.in_fstring)
            .collect();
        let fits = |e: &&&Expression| {
            let text = &src[e.range];
            (text.len() <= LONGEST && !text.contains('\n'))
                || (e.string && text.len() <= 4 * LONGEST)
        };
        if let Some(root) = holding.iter().find(|e| e.root && !e.fixed_place) {
            // A statement on a line of its own is written as an `if` statement.
            let shown = displayed
                && root.statement == Some(root.range)
                && !src[root.range].starts_with("print("); // shows nothing either way
            if let Some(stmt) = root.statement
                && !shown
            {
                let line = &src[..usize::from(stmt.start())];
                let indent = &line[line.rfind('\n').map_or(0, |i| i + 1)..];
                let text = &src[stmt];
                // A statement over several lines moves 4 columns right inside the `if`: not one
                // holding a multi-line string, whose text would change.
                let rest = &src[usize::from(stmt.end())..];
                let rest = rest[..rest.find('\n').unwrap_or(rest.len())].trim_start();
                let continued = line[..line.len() - indent.len()]
                    .trim_end_matches(['\n', '\r'])
                    .ends_with('\\');
                if indent.chars().all(|c| c == ' ' || c == '\t')
                    && !continued
                    && (rest.is_empty() || rest.starts_with('#'))
                    && !text.contains("\"\"\"")
                    && !text.contains("\'\'\'")
                    && !text.contains('\\')
                    && text.len() <= 4 * LONGEST
                {
                    return Some(Whole {
                        range: stmt,
                        statement: Some(indent.to_string()),
                        literal: false,
                    });
                }
            }
            if fits(&root) {
                return Some(Whole {
                    range: root.range,
                    statement: None,
                    literal: root.string,
                });
            }
        }
        holding
            .iter()
            .filter(|e| !e.callee && !e.fixed_place)
            .min_by_key(|e| e.range.len())
            .filter(fits)
            .map(|e| Whole {
                range: e.range,
                statement: None,
                literal: e.string,
            })
    }

    fn in_old_branch(&self, r: TextRange) -> bool {
        self.old_branches.iter().any(|b| b.contains_range(r))
    }

    /// Does `r` lie in code that runs only where torch has `torch.accelerator`?
    pub(super) fn in_new_branch(&self, r: TextRange) -> bool {
        self.new_branches.iter().any(|b| b.contains_range(r))
    }
}

/// Drop the findings in old-torch branches (see the module doc).
pub(super) fn drop_old_branch_findings(
    src: &str,
    body: &[Stmt],
    exprs: &std::cell::OnceCell<Exprs>,
    diags: &mut Vec<Diagnostic>,
) {
    // Nothing to drop, or no test to drop it by: no walk of the module (this runs for every
    // file of a portable port).
    if diags.is_empty() || !src.contains("hasattr(") {
        return;
    }
    let exprs = exprs.get_or_init(|| Exprs::of(body, src));
    diags.retain(|d| !exprs.in_old_branch(d.range));
}

/// `text` as an operand of a conditional expression: parenthesized where it binds looser.
fn operand(text: &str) -> Option<String> {
    let parsed = ruff_python_parser::parse_expression(text).ok()?;
    let loose = match parsed.expr() {
        Expr::If(_) | Expr::Lambda(_) | Expr::Named(_) | Expr::Yield(_) | Expr::YieldFrom(_) => {
            true
        }
        Expr::Starred(_) => return None,
        Expr::Tuple(t) => !t.parenthesized,
        _ => false,
    };
    Some(if loose {
        format!("({text})")
    } else {
        text.to_string()
    })
}

/// The fix for every edit of `fixes` (which lie in `whole`), written to keep torch before 2.6
/// (see the module doc), or None where it cannot be (edits overlap, or a form will not parse).
pub(super) fn keeping_old_torch(
    fixes: &[&Fix],
    whole: &Whole,
    src: &str,
    probe_for: &dyn Fn(&str) -> Option<String>,
) -> Option<Fix> {
    let old = &src[whole.range];
    let mut edits: Vec<&Edit> = fixes.iter().flat_map(|f| f.edits.iter()).collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.range.start()));
    if edits
        .windows(2)
        .any(|w| w[1].range.end() > w[0].range.start())
    {
        return None;
    }
    // The new text of that expression: its edits applied, last first.
    let mut new = old.to_string();
    for e in edits {
        let at = |o: TextSize| usize::from(o - whole.range.start());
        new.replace_range(at(e.range.start())..at(e.range.end()), &e.content);
    }
    // Lines inside a string literal are its text: written twice as they are.
    if new.contains('\n') && whole.statement.is_none() && !whole.literal {
        return None;
    }
    let probe = probe_for(&new)?;
    // A statement's continuation lines move with it; new lines end as the file's do.
    let nl = if src.contains("\r\n") { "\r\n" } else { "\n" };
    let deeper = |text: &str| text.replace('\n', "\n    ");
    let (new_in, old_in) = (deeper(&new), deeper(old));
    let statement = |indent: &str| {
        format!("if {probe}:{nl}{indent}    {new_in}{nl}{indent}else:{nl}{indent}    {old_in}")
    };
    let content = match &whole.statement {
        // Both statements must parse (checked at the top level).
        Some(indent) if crate::port::parse::is_valid(&statement("").replace('\r', "")) => {
            statement(indent)
        }
        Some(_) => return None,
        None => format!("({} if {probe} else {})", operand(&new)?, operand(old)?),
    };
    let mut imports: Vec<String> = fixes.iter().flat_map(|f| f.imports.clone()).collect();
    imports.sort();
    imports.dedup();
    Some(Fix {
        edits: vec![Edit::replace(whole.range, content)],
        applicability: fixes.first()?.applicability,
        imports,
        exclusive: None,
        why_unsafe: None,
    })
}

/// A fix that only inserts whole statements (DEV018's parameter-swap switch after the
/// imports), written to run where torch has what it calls: `if hasattr(torch,
/// "accelerator"):` above it, the statements 4 columns deeper. Where torch has none, nothing
/// runs, as before the port.
pub(super) fn inserting_for_new_torch(
    fix: &Fix,
    src: &str,
    probe_for: &dyn Fn(&str) -> Option<String>,
) -> Option<Fix> {
    let [edit] = fix.edits.as_slice() else {
        return None;
    };
    let at = usize::from(edit.range.start());
    let line_start = at == 0 || src[..at].ends_with('\n') || edit.content.starts_with('\n');
    if !edit.range.is_empty() || !line_start || !crate::port::parse::is_valid(&edit.content) {
        return None;
    }
    let text = edit.content.as_str();
    let body = text.trim_matches('\n');
    let base: String = body
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    if body.contains("\"\"\"") || body.contains("\'\'\'") || body.contains('\\') {
        return None;
    }
    let mut lines = vec![format!("{base}if {}:", probe_for(body)?)];
    for line in body.lines() {
        if line.trim().is_empty() {
            lines.push(String::new());
            continue;
        }
        let rest = line.strip_prefix(base.as_str())?;
        lines.push(format!("{base}    {rest}"));
    }
    // The newlines around the statements stay as the fix wrote them.
    let out = format!(
        "{}{}{}",
        &text[..text.len() - text.trim_start_matches('\n').len()],
        lines.join("\n"),
        &text[text.trim_end_matches('\n').len()..]
    );
    Some(Fix {
        edits: vec![Edit::insert(edit.range.start(), out)],
        applicability: fix.applicability,
        imports: fix.imports.clone(),
        exclusive: fix.exclusive,
        why_unsafe: None,
    })
}

#[cfg(test)]
#[path = "old_torch_tests.rs"]
mod tests;
