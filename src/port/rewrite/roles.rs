//! The roles of a string literal: the places it occupies (a keyword, a call slot, an assigned
//! name, the other side of a comparison), which position classes match.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;
use crate::port::rules::PositionPattern;

/// A place a string literal can occupy.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Role {
    Ident(String),
    Slot {
        callee: String,
        key: String,
        nargs: usize,
    },
}

impl<'a> Checker<'a> {
    pub(super) fn class_matches(
        &self,
        class: &str,
        roles: &[Role],
        min_args: Option<usize>,
    ) -> bool {
        let Some(patterns) = self.rules.positions.get(class) else {
            return false;
        };
        roles.iter().any(|role| {
            patterns.iter().any(|p| match (p, role) {
                // A rule that needs a call with at least N arguments only matches call slots.
                (PositionPattern::Ident(re), Role::Ident(name)) => {
                    min_args.is_none() && re.is_match(name)
                }
                (
                    PositionPattern::Slot { callee, key },
                    Role::Slot {
                        callee: c,
                        key: k,
                        nargs,
                    },
                ) => {
                    callee == c && (key == "*" || key == k) && min_args.is_none_or(|m| *nargs >= m)
                }
                _ => false,
            })
        })
    }

    /// The roles of the expression at `range` whose ancestors (outermost first) are these, found
    /// by walking up through transparent parents.
    pub(super) fn roles_in(&self, ancestors: &[AnyNodeRef<'a>], range: TextRange) -> Vec<Role> {
        let mut roles = vec![];
        let mut child = range;
        let mut keyword: Option<&str> = None;
        for (pos, anc) in ancestors.iter().enumerate().rev() {
            match anc {
                AnyNodeRef::ExprIf(e) if e.test.range() != child => child = e.range,
                AnyNodeRef::ExprBoolOp(e) => child = e.range,
                AnyNodeRef::ExprList(e) => child = e.range,
                AnyNodeRef::ExprTuple(e) => child = e.range,
                AnyNodeRef::ExprSet(e) => child = e.range,
                AnyNodeRef::ExprDict(d) => {
                    // A key is a name, not a value of the dict's role: `map_location=
                    // {"cuda:0": ...}` keys are the checkpoint's own tags and must stay.
                    if d.items
                        .iter()
                        .any(|i| i.key.as_ref().is_some_and(|k| k.range() == child))
                    {
                        break;
                    }
                    for item in &d.items {
                        if item.value.range() == child
                            && let Some(Expr::StringLiteral(k)) = &item.key
                        {
                            roles.push(Role::Ident(k.value.to_str().to_string()));
                        }
                    }
                    child = d.range;
                }
                AnyNodeRef::Keyword(k) => {
                    keyword = k.arg.as_ref().map(|a| a.as_str());
                    if let Some(a) = keyword {
                        roles.push(Role::Ident(a.to_string()));
                    }
                    child = k.range;
                }
                AnyNodeRef::Arguments(_) => {}
                AnyNodeRef::ExprCall(c) => {
                    if c.func.range().contains_range(child) {
                        break;
                    }
                    let callee = self.callee_name(c);
                    let nargs = c.arguments.args.len() + c.arguments.keywords.len();
                    match keyword {
                        Some(kw) => {
                            if callee == ".add_argument"
                                && matches!(kw, "default" | "choices" | "const")
                                && let Some(dest) = argparse_dest(c)
                            {
                                roles.push(Role::Ident(dest));
                            }
                            roles.push(Role::Slot {
                                callee,
                                key: kw.to_string(),
                                nargs,
                            });
                        }
                        None => {
                            // `assertEqual(x.device.type, "cuda")`: an equality check
                            // compares like `==` does (`assertIn` like `in`).
                            let equality = matches!(
                                callee.rsplit('.').next(),
                                Some(
                                    "assertEqual"
                                        | "assertNotEqual"
                                        | "assert_equal"
                                        | "assertIn"
                                        | "assertNotIn"
                                )
                            );
                            if equality && c.arguments.args.len() >= 2 {
                                for a in c.arguments.args[..2].iter().filter(|a| a.range() != child)
                                {
                                    roles.extend(ident_of(a).map(Role::Ident));
                                }
                            }
                            if let Some(idx) =
                                c.arguments.args.iter().position(|a| a.range() == child)
                            {
                                roles.push(Role::Slot {
                                    callee,
                                    key: idx.to_string(),
                                    nargs,
                                });
                            }
                        }
                    }
                    break;
                }
                AnyNodeRef::ExprSubscript(s) => {
                    if s.slice.range() == child
                        && let Some(q) = self.qualified(&s.value)
                    {
                        roles.push(Role::Slot {
                            callee: q,
                            key: "[]".into(),
                            nargs: 1,
                        });
                    }
                    break;
                }
                AnyNodeRef::StmtAssign(a) => {
                    for t in &a.targets {
                        roles.extend(ident_of(t).map(Role::Ident));
                    }
                    break;
                }
                AnyNodeRef::StmtAnnAssign(a) => {
                    roles.extend(ident_of(&a.target).map(Role::Ident));
                    break;
                }
                AnyNodeRef::ExprNamed(n) => {
                    roles.extend(ident_of(&n.target).map(Role::Ident));
                    break;
                }
                AnyNodeRef::ExprCompare(c) => {
                    for op in std::iter::once(c.left.as_ref()).chain(c.comparators.iter()) {
                        if op.range() != child {
                            roles.extend(ident_of(op).map(Role::Ident));
                        }
                    }
                    break;
                }
                AnyNodeRef::ParameterWithDefault(p) => {
                    roles.push(Role::Ident(p.parameter.name.to_string()));
                    break;
                }
                AnyNodeRef::StmtReturn(_) => {
                    let func = ancestors[..pos].iter().rev().find_map(|a| match a {
                        AnyNodeRef::StmtFunctionDef(f) => Some(f.name.to_string()),
                        _ => None,
                    });
                    roles.extend(func.map(Role::Ident));
                    break;
                }
                _ => break,
            }
        }
        roles
    }

    /// `torch.device`, `.to` (method on a value) or a plain local name.
    pub(super) fn callee_name(&self, c: &ast::ExprCall) -> String {
        if let Some(q) = self.qualified(&c.func) {
            return q;
        }
        match c.func.as_ref() {
            Expr::Attribute(a) => format!(".{}", a.attr.as_str()),
            Expr::Name(n) => n.id.to_string(),
            _ => "?".to_string(),
        }
    }
}

fn ident_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(n) => Some(n.id.to_string()),
        // `x.device.type` → `device.type`, so `*device*` sees it.
        Expr::Attribute(a) => Some(match a.value.as_ref() {
            Expr::Attribute(p) => format!("{}.{}", p.attr, a.attr),
            Expr::Name(p) => format!("{}.{}", p.id, a.attr),
            _ => a.attr.to_string(),
        }),
        Expr::Subscript(s) => match s.slice.as_ref() {
            Expr::StringLiteral(k) => Some(k.value.to_str().to_string()),
            _ => None,
        },
        Expr::Call(c) => ident_of(&c.func),
        _ => None,
    }
}

/// `parser.add_argument("--device", "-d", ...)` → `device` (or its `dest=`).
pub(super) fn argparse_dest(c: &ast::ExprCall) -> Option<String> {
    if let Some(kw) = c.arguments.find_keyword("dest")
        && let Expr::StringLiteral(s) = &kw.value
    {
        return Some(s.value.to_str().to_string());
    }
    let names: Vec<&str> = c
        .arguments
        .args
        .iter()
        .filter_map(|a| match a {
            Expr::StringLiteral(s) => Some(s.value.to_str()),
            _ => None,
        })
        .collect();
    let long = names
        .iter()
        .find(|n| n.starts_with("--"))
        .or(names.first())?;
    Some(long.trim_start_matches('-').replace('-', "_"))
}
