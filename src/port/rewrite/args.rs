//! The new argument list of a call rewrite: minimal edits where possible (dropping `name=` or
//! one argument), otherwise the text between the parentheses is replaced.

use ruff_python_ast as ast;
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::Checker;
use super::bind::Bound;
use crate::port::edit::Edit;
use crate::port::rules::Rule;
use crate::port::template::{self, Skip};

impl<'a> Checker<'a> {
    /// New argument list: minimal edits where possible (dropping `name=` or one argument),
    /// otherwise the text between the parentheses is replaced.
    pub(super) fn rewrite_arguments(
        &self,
        rule: &Rule,
        call: &'a ast::ExprCall,
        args: &[String],
        b: &Bound<'a>,
    ) -> Result<(Vec<Edit>, Vec<String>, bool), String> {
        let items = self.arg_items(call);
        // Each new item is either an untouched source argument (maybe losing its `name=`) or text.
        enum New {
            Source {
                item: usize,
                strip: Option<TextRange>,
            },
            Text(String),
        }
        let mut new: Vec<New> = vec![];
        let mut imports = vec![];
        let mut dup = false;
        let storage = self.storage_receiver(call);
        for a in args {
            let (mut kw, t) = split_keyword_item(a);
            // A storage's `.to` takes its device by keyword only (`storage.to(device=...)`).
            if storage && kw.is_none() && t == "{device}" {
                kw = Some("device");
            }
            // `{param}` alone, without conversion, refers to the source argument itself.
            if let Some(p) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}'))
                && !self.v(rule).convert.contains_key(p)
                && !p.contains(['{', '}'])
            {
                match b.sources.get(p) {
                    None if p != "receiver" => continue,
                    Some((value, kwrange)) => {
                        let whole = kwrange.unwrap_or(*value);
                        let item = items
                            .iter()
                            .position(|r| *r == whole)
                            .ok_or("argument not found")?;
                        let same_kw = match (kw, kwrange) {
                            (Some(k), Some(_)) => call.arguments.keywords.iter().any(|x| {
                                x.range() == whole
                                    && x.arg.as_ref().is_some_and(|n| n.as_str() == k)
                            }),
                            (None, None) => true,
                            _ => false,
                        };
                        if same_kw {
                            new.push(New::Source { item, strip: None });
                            continue;
                        }
                        if kw.is_none() {
                            new.push(New::Source {
                                item,
                                strip: Some(TextRange::new(whole.start(), value.start())),
                            });
                            continue;
                        }
                    }
                    None => {}
                }
            }
            let r = match template::render(
                t,
                &b.values,
                &self.v(rule).convert,
                &self.ctx(call.start()),
            ) {
                Ok(r) => r,
                Err(Skip::Missing) => continue,
                Err(Skip::Manual(why)) => return Err(why),
            };
            imports.extend(r.imports);
            dup |= r.duplicated;
            new.push(New::Text(match kw {
                Some(k) => format!("{k}={}", r.text),
                None => r.text,
            }));
        }
        for r in &b.rest {
            let item = items
                .iter()
                .position(|x| x == r)
                .ok_or("argument not found")?;
            new.push(New::Source { item, strip: None });
        }
        // Minimal edits: all new items are source items, in order, none added.
        let all_source: Option<Vec<(usize, Option<TextRange>)>> = new
            .iter()
            .map(|n| match n {
                New::Source { item, strip } => Some((*item, *strip)),
                New::Text(_) => None,
            })
            .collect();
        if let Some(kept) = all_source {
            let in_order = kept.windows(2).all(|w| w[0].0 < w[1].0);
            let dropped: Vec<usize> = (0..items.len())
                .filter(|i| !kept.iter().any(|k| k.0 == *i))
                .collect();
            if in_order && dropped.len() <= 1 {
                let mut edits: Vec<Edit> = kept
                    .iter()
                    .filter_map(|(_, s)| s.map(Edit::delete))
                    .collect();
                if let Some(&d) = dropped.first() {
                    edits.push(delete_item(&items, d, call, self.src));
                }
                return Ok((edits, imports, dup));
            }
        }
        let text: Vec<String> = new
            .iter()
            .map(|n| match n {
                New::Source { item, strip } => {
                    let r = items[*item];
                    let start = strip.map(|s| s.end()).unwrap_or(r.start());
                    self.text(TextRange::new(start, r.end())).to_string()
                }
                New::Text(t) => t.clone(),
            })
            .collect();
        let inner = inner_parens(call, self.src);
        let joined = text.join(", ");
        if self.text(inner) == joined {
            return Ok((vec![], imports, dup));
        }
        Ok((vec![Edit::replace(inner, joined)], imports, dup))
    }
}

impl Checker<'_> {
    /// Is the call's receiver a storage: the first parameter of a two-parameter lambda, the
    /// form of a `map_location` (`lambda storage, loc: storage.cuda(0)`)? Its `.to` takes the
    /// device by keyword only: `storage.to(device)` raises TypeError (set Y: a checkpoint
    /// loader whose `except` then ran an untrained model, on CUDA too).
    fn storage_receiver(&self, call: &ast::ExprCall) -> bool {
        let ast::Expr::Attribute(a) = call.func.as_ref() else {
            return false;
        };
        let ast::Expr::Name(n) = a.value.as_ref() else {
            return false;
        };
        self.stack
            .iter()
            .rev()
            .find_map(|node| match node {
                ast::AnyNodeRef::ExprLambda(l) => Some(l),
                _ => None,
            })
            .and_then(|l| l.parameters.as_deref())
            .is_some_and(|p| {
                p.args.len() == 2
                    && p.posonlyargs.is_empty()
                    && p.args[0].parameter.name.as_str() == n.id.as_str()
            })
    }
}

fn split_keyword_item(item: &str) -> (Option<&str>, &str) {
    if let Some((k, v)) = item.split_once('=') {
        let k = k.trim();
        if !k.is_empty()
            && k.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !v.starts_with('=')
        {
            return (Some(k), v.trim());
        }
    }
    (None, item)
}

impl Checker<'_> {
    /// Ranges of a call's arguments and keywords in source order, each with the parentheses
    /// written around it (`(args)`: the node of the name leaves them out).
    pub(super) fn arg_items(&self, call: &ast::ExprCall) -> Vec<TextRange> {
        let mut v: Vec<TextRange> = call
            .arguments
            .args
            .iter()
            .map(|a| self.arg_range(call, a))
            .chain(call.arguments.keywords.iter().map(|k| k.range()))
            .collect();
        v.sort_by_key(|r| r.start());
        v
    }

    /// A positional argument's range with the parentheses written around it.
    pub(super) fn arg_range(&self, call: &ast::ExprCall, arg: &ast::Expr) -> TextRange {
        self.parsed
            .parenthesized(self.src, arg.range(), inner_parens(call, self.src))
    }

    /// A keyword argument's value with the parentheses written around it (`(args)` in
    /// `args=(args)`).
    pub(super) fn keyword_value_range(&self, kw: &ast::Keyword) -> TextRange {
        let within = match &kw.arg {
            Some(name) => TextRange::new(name.range.end(), kw.range().end()),
            None => kw.range(),
        };
        self.parsed
            .parenthesized(self.src, kw.value.range(), within)
    }
}

/// The text between a call's parentheses. A call a syntax error left open (`f(x` at the end of
/// the file, `f(while`) has no `)`: its arguments then run to the end of their range.
pub(super) fn inner_parens(call: &ast::ExprCall, source: &str) -> TextRange {
    let r = call.arguments.range;
    let start = (r.start() + TextSize::from(1)).min(r.end());
    let closed = source
        .get(std::ops::Range::<usize>::from(r))
        .is_some_and(|t| t.len() >= 2 && t.ends_with(')'));
    let end = if closed {
        r.end() - TextSize::from(1)
    } else {
        r.end()
    };
    TextRange::new(start, end.max(start))
}

/// Delete one argument together with its separator.
pub(super) fn delete_item(
    items: &[TextRange],
    idx: usize,
    call: &ast::ExprCall,
    source: &str,
) -> Edit {
    if items.len() == 1 {
        return Edit::delete(inner_parens(call, source));
    }
    if idx + 1 < items.len() {
        Edit::delete(TextRange::new(items[idx].start(), items[idx + 1].start()))
    } else {
        Edit::delete(TextRange::new(items[idx - 1].end(), items[idx].end()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_items() {
        assert_eq!(
            split_keyword_item("non_blocking={nb}"),
            (Some("non_blocking"), "{nb}")
        );
        assert_eq!(split_keyword_item("a == b"), (None, "a == b"));
        assert_eq!(split_keyword_item("{x}"), (None, "{x}"));
    }

    fn first_call(src: &str) -> ast::ExprCall {
        let parsed = crate::port::parse::parse(src);
        let ast::Stmt::Expr(e) = &parsed.module.body[0] else {
            panic!("not an expression statement: {src}")
        };
        let ast::Expr::Call(call) = e.value.as_ref() else {
            panic!("not a call: {src}")
        };
        call.clone()
    }

    /// Found by the fuzz harness (fuzz/, target migrate): a call that a syntax error leaves open
    /// (`torch.cuda(while True:`) has an argument range of one character, `(`, and taking the
    /// inside of its parentheses panicked (`start.raw <= end.raw`) before the fix was dropped as
    /// lying in a broken region.
    #[test]
    fn a_call_left_open_has_an_inside() {
        for (src, inside) in [
            ("f(a, b)", "a, b"),
            ("f()", ""),
            ("f(a, b", "a, b"),
            ("f(", ""),
        ] {
            let call = first_call(src);
            let r = inner_parens(&call, src);
            assert_eq!(&src[std::ops::Range::<usize>::from(r)], inside, "{src}");
        }
        let rules = crate::port::RuleSet::builtin();
        let index = crate::port::RuleIndex::new(&rules);
        let src = "m = torch.com.cuda(while True:\n)pile(model, dynamic=True)\n";
        let out = crate::port::migrate_source(src, &rules, &index, Default::default());
        assert!(!out.syntax_errors.is_empty());
    }

    /// A `map_location` lambda's storage takes its device by keyword (torch 2.15's
    /// `_StorageBase.to()` takes one positional argument); a tensor keeps the positional form.
    #[test]
    fn a_storage_is_moved_by_keyword() {
        let src = "import torch\n\nckpt = torch.load(\"m.pt\", map_location=lambda storage, loc: storage.cuda(0))\nkw = {\"map_location\": lambda s, loc: s.cuda()}\nx = torch.ones(2).cuda(0)\nf = lambda t: t.cuda()\n";
        let out = crate::port::rewrite::migrated(src, false);
        assert!(
            out.contains("lambda storage, loc: storage.to(device=\"tpu:0\"))"),
            "{out}"
        );
        assert!(
            out.contains("lambda s, loc: s.to(device=\"tpu\")}"),
            "{out}"
        );
        assert!(out.contains("x = torch.ones(2).to(\"tpu:0\")"), "{out}");
        assert!(out.contains("f = lambda t: t.to(\"tpu\")"), "{out}");
    }
}
