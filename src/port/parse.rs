//! The one place that talks to the Python parser (`ruff_python_parser`, pinned exactly).
//!
//! Everything else in `port` sees [`Parsed`]: the module's AST (ruff's node types, which are
//! plain data), the byte ranges of comments, and the syntax errors with the regions around them
//! where no fix may be applied. Swapping the parser means rewriting this file only.

use ruff_python_ast::token::TokenKind;
use ruff_python_ast::{AnyNodeRef, Expr, ModModule, PySourceType, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

/// A syntax error, with the byte range the parser blamed.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    pub range: TextRange,
    pub message: String,
}

/// A parsed module: always an AST (error-tolerant), plus what went wrong.
pub struct Parsed {
    pub module: ModModule,
    /// Ranges of `#` comments, in source order.
    pub comments: Vec<TextRange>,
    pub errors: Vec<SyntaxError>,
    /// Regions touched by syntax errors: the innermost statement around each error. Fixes that
    /// overlap one of these are dropped, so a half-edited file is migrated only where it parses.
    pub broken: Vec<TextRange>,
}

impl Parsed {
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// True if `range` overlaps (or touches the inside of) a broken region.
    pub fn in_broken_region(&self, range: TextRange) -> bool {
        self.broken.iter().any(|b| {
            range.start() < b.end()
                && b.start() < range.end().max(range.start() + TextSize::from(1))
        })
    }

    /// True if any comment lies inside `range`.
    pub fn has_comment_in(&self, range: TextRange) -> bool {
        self.comments.iter().any(|c| range.contains_range(*c))
    }

    /// An expression's `range` widened to the parentheses written around it (`(args)` for the
    /// name `args`, whose node does not include them), looking only inside `within`: the text
    /// between a call's parentheses, or a keyword argument, so that the call's own parentheses
    /// are never taken for the argument's.
    pub fn parenthesized(&self, src: &str, range: TextRange, within: TextRange) -> TextRange {
        let mut r = range;
        loop {
            let open = self.before_trivia(src, r.start());
            let close = self.after_trivia(src, r.end());
            match (open, close) {
                (Some(o), Some(c))
                    if src[o..].starts_with('(')
                        && src[c..].starts_with(')')
                        && o >= within.start().to_usize()
                        && c < within.end().to_usize() =>
                {
                    r = TextRange::new(TextSize::from(o as u32), TextSize::from(c as u32 + 1));
                }
                _ => return r,
            }
        }
    }

    /// The offset of the last character before `at` that is not whitespace, a line continuation
    /// or a comment.
    fn before_trivia(&self, src: &str, at: TextSize) -> Option<usize> {
        let mut i = at.to_usize();
        loop {
            if let Some(c) = self.comments.iter().find(|c| {
                c.end().to_usize() == i || (c.start().to_usize() < i && i < c.end().to_usize())
            }) {
                i = c.start().to_usize();
                continue;
            }
            let ch = src[..i].chars().next_back()?;
            if ch.is_whitespace() || ch == '\\' {
                i -= ch.len_utf8();
                continue;
            }
            return Some(i - ch.len_utf8());
        }
    }

    /// The offset of the first character from `at` on that is not whitespace, a line
    /// continuation or a comment.
    fn after_trivia(&self, src: &str, at: TextSize) -> Option<usize> {
        let mut i = at.to_usize();
        loop {
            if let Some(c) = self.comments.iter().find(|c| c.start().to_usize() == i) {
                i = c.end().to_usize();
                continue;
            }
            let ch = src[i..].chars().next()?;
            if ch.is_whitespace() || ch == '\\' {
                i += ch.len_utf8();
                continue;
            }
            return Some(i);
        }
    }
}

/// Parse a Python module (never fails: syntax errors are collected in [`Parsed::errors`]).
pub fn parse(source: &str) -> Parsed {
    let parsed = ruff_python_parser::parse_unchecked_source(source, PySourceType::Python);
    let comments = parsed
        .tokens()
        .iter()
        .filter(|t| t.kind() == TokenKind::Comment)
        .map(|t| t.range())
        .collect();
    let errors: Vec<SyntaxError> = parsed
        .errors()
        .iter()
        .map(|e| SyntaxError {
            range: e.location,
            message: e.error.to_string(),
        })
        .collect();
    let module = parsed.into_syntax();
    let broken = errors
        .iter()
        .map(|e| broken_region(&module.body, e.range, source))
        .collect();
    Parsed {
        module,
        comments,
        errors,
        broken,
    }
}

/// True if `source` parses without any syntax error.
pub fn is_valid(source: &str) -> bool {
    ruff_python_parser::parse_unchecked_source(source, PySourceType::Python)
        .errors()
        .is_empty()
}

/// True if `text` is one expression that can take `.x`, `[i]` or `(...)` without parentheses.
pub fn expr_is_atomic(text: &str) -> bool {
    ruff_python_parser::parse_expression(text).is_ok_and(|p| is_atomic(p.expr()))
}

/// True if the expression can take `.x`, `[i]` or `(...)` without parentheses.
pub fn is_atomic(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Name(_)
            | Expr::Attribute(_)
            | Expr::Call(_)
            | Expr::Subscript(_)
            | Expr::StringLiteral(_)
            | Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::List(_)
            | Expr::Dict(_)
            | Expr::Set(_)
            | Expr::ListComp(_)
            | Expr::SetComp(_)
            | Expr::DictComp(_)
            | Expr::FString(_)
    ) || matches!(e, Expr::Tuple(t) if t.parenthesized)
}

/// The innermost simple or compound statement containing `error`, widened to whole lines; if no
/// statement contains it, the lines of the error itself.
fn broken_region(body: &[Stmt], error: TextRange, source: &str) -> TextRange {
    let mut best: Option<TextRange> = None;
    let mut stmts: &[Stmt] = body;
    'outer: loop {
        for stmt in stmts {
            let r = stmt.range();
            let touches = r.start() <= error.start() && error.start() <= r.end();
            if touches {
                best = Some(r);
                if let Some(children) = child_bodies(stmt).into_iter().find(|b| {
                    b.iter().any(|s| {
                        s.range().start() <= error.start() && error.start() <= s.range().end()
                    })
                }) {
                    stmts = children;
                    continue 'outer;
                }
                break 'outer;
            }
        }
        break;
    }
    let r = best.unwrap_or(error).cover(error);
    whole_lines(r, source)
}

/// The decorators that are calls, each with the last name of what it calls (`skipIf` for
/// `@unittest.skipIf(...)`, `parametrize` for `@pytest.mark.parametrize(...)`).
pub fn decorator_calls(
    decorators: &[ruff_python_ast::Decorator],
) -> impl Iterator<Item = (&str, &ruff_python_ast::ExprCall)> {
    decorators.iter().filter_map(|d| {
        let Expr::Call(c) = &d.expression else {
            return None;
        };
        let name = match c.func.as_ref() {
            Expr::Attribute(a) => a.attr.as_str(),
            Expr::Name(n) => n.id.as_str(),
            _ => return None,
        };
        Some((name, c))
    })
}

/// The statement lists directly inside a node: a module, a compound statement (every branch of
/// an `if`, `try` or `match`), or one clause of it (`elif`/`else`, `except`, `case`).
pub fn child_bodies<'a>(node: impl Into<AnyNodeRef<'a>>) -> Vec<&'a [Stmt]> {
    match node.into() {
        AnyNodeRef::ModModule(m) => vec![&m.body],
        AnyNodeRef::StmtFunctionDef(f) => vec![&f.body],
        AnyNodeRef::StmtClassDef(c) => vec![&c.body],
        AnyNodeRef::StmtFor(f) => vec![&f.body, &f.orelse],
        AnyNodeRef::StmtWhile(w) => vec![&w.body, &w.orelse],
        AnyNodeRef::StmtIf(i) => {
            let mut v: Vec<&[Stmt]> = vec![&i.body];
            v.extend(i.elif_else_clauses.iter().map(|c| c.body.as_slice()));
            v
        }
        AnyNodeRef::ElifElseClause(c) => vec![&c.body],
        AnyNodeRef::StmtWith(w) => vec![&w.body],
        AnyNodeRef::StmtTry(t) => {
            let mut v: Vec<&[Stmt]> = vec![&t.body, &t.orelse, &t.finalbody];
            for h in &t.handlers {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                v.push(&h.body);
            }
            v
        }
        AnyNodeRef::ExceptHandlerExceptHandler(h) => vec![&h.body],
        AnyNodeRef::StmtMatch(m) => m.cases.iter().map(|c| c.body.as_slice()).collect(),
        AnyNodeRef::MatchCase(c) => vec![&c.body],
        _ => vec![],
    }
}

fn whole_lines(r: TextRange, source: &str) -> TextRange {
    let bytes = source.as_bytes();
    let mut start = usize::from(r.start()).min(bytes.len());
    while start > 0 && bytes[start - 1] != b'\n' {
        start -= 1;
    }
    let mut end = usize::from(r.end()).min(bytes.len());
    while end < bytes.len() && bytes[end] != b'\n' {
        end += 1;
    }
    TextRange::new(
        TextSize::try_from(start).unwrap(),
        TextSize::try_from(end).unwrap(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_source_has_no_errors() {
        let p = parse("import torch\nx = torch.cuda.is_available()  # hi\n");
        assert!(!p.has_errors());
        assert_eq!(p.comments.len(), 1);
        assert_eq!(p.module.body.len(), 2);
    }

    #[test]
    fn broken_region_is_the_statement_around_the_error() {
        let src = "import torch\n\ndef f(:\n    pass\n\ntorch.cuda.synchronize()\n";
        let p = parse(src);
        assert!(p.has_errors());
        // The last statement still parses and is outside every broken region.
        let last = p.module.body.last().unwrap().range();
        assert!(!p.in_broken_region(last), "{:?} vs {:?}", p.broken, last);
        let def_line = TextRange::new(TextSize::from(14), TextSize::from(20));
        assert!(p.in_broken_region(def_line));
    }

    #[test]
    fn arguments_keep_their_parentheses() {
        // The argument of each call, widened within the text between the call's parentheses.
        let widened = |src: &str| {
            let p = parse(src);
            let Stmt::Expr(e) = &p.module.body[0] else {
                panic!()
            };
            let Expr::Call(c) = e.value.as_ref() else {
                panic!()
            };
            let r = c.arguments.range;
            let inner = TextRange::new(r.start() + TextSize::from(1), r.end() - TextSize::from(1));
            let arg = c.arguments.args.first().map(|a| a.range());
            let arg = arg.unwrap_or_else(|| c.arguments.keywords[0].value.range());
            src[p.parenthesized(src, arg, inner)].to_string()
        };
        assert_eq!(widened("f(args)\n"), "args");
        assert_eq!(widened("f((args))\n"), "(args)");
        assert_eq!(widened("f(((args)), 1)\n"), "((args))");
        assert_eq!(widened("f(x=(args))\n"), "(args)");
        assert_eq!(widened("f( ( # c\n  args ) )\n"), "( # c\n  args )");
        assert_eq!(widened("f((a) + b)\n"), "(a) + b");
        assert_eq!(widened("f((a, b))\n"), "(a, b)");
    }

    #[test]
    fn atomic_expressions() {
        for text in [
            "x", "a.b", "f(x)", "a[0]", "'s'", "1", "[1]", "{1}", "(a, b)", "f'{x}'",
        ] {
            assert!(expr_is_atomic(text), "{text}");
        }
        for text in [
            "a + b",
            "a, b",
            "-a",
            "not a",
            "a if b else c",
            "lambda: 1",
            "x =",
        ] {
            assert!(!expr_is_atomic(text), "{text}");
        }
    }
}
