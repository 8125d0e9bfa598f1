//! Matching string literals and f-strings: their static text, the form they are built in
//! (plain, f-string, `.format`, `%`, `+`), and the minimal edit of a string rewrite.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, StringFlags};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::Checker;
use super::roles::Role;
use crate::port::diagnostic::Diagnostic;
use crate::port::edit::{Edit, Fix};
use crate::port::rules::{Action, Matcher, Portable, RemoveKind, StringForm, Target};

/// The portable rewrite of one string.
pub(super) enum Form {
    Fix(Fix),
    /// No fix, with the reason.
    Kept(String),
    /// Already portable (a comparison that names the TPU too): no finding.
    Done,
}

/// A string literal or f-string, with what a rewrite of its static text needs.
pub(super) struct StringSite {
    pub(super) range: TextRange,
    pub(super) form: StringForm,
    pub(super) form_range: TextRange,
    /// How many ancestors on the stack belong to the form expression itself.
    pub(super) depth: usize,
    pub(super) static_text: String,
    /// (static start, static end, source start) of pieces copied verbatim from the source.
    pub(super) segments: Vec<(usize, usize, TextSize)>,
    /// For plain literals with escapes: rewrite the whole literal.
    requote: Option<(TextRange, ast::StringLiteralFlags)>,
}

impl<'a> Checker<'a> {
    pub(super) fn check_string_literal(&mut self, s: &'a ast::ExprStringLiteral) {
        if self.index.strings.is_empty() || s.value.is_implicit_concatenated() {
            return;
        }
        if self.accelerator_fallback(s) {
            return;
        }
        let lit = &s.value.as_slice()[0];
        let value = lit.value.to_string();
        let content = content_range(lit.range, lit.flags);
        let exact = self
            .src
            .get(usize::from(content.start())..usize::from(content.end()))
            == Some(value.as_str());
        // Which form: the literal alone, or the head of a %-format, .format() or + concatenation.
        let parent = self.stack.last().copied();
        let grand = self.stack.len().checked_sub(2).map(|i| self.stack[i]);
        let (form, form_range, depth, static_text) = match (parent, grand) {
            (Some(AnyNodeRef::ExprBinOp(b)), _)
                if b.left.range() == s.range && b.op == ast::Operator::Mod =>
            {
                (StringForm::Percent, b.range, 1, value.clone())
            }
            (Some(AnyNodeRef::ExprBinOp(b)), _)
                if b.left.range() == s.range && b.op == ast::Operator::Add =>
            {
                (StringForm::Concat, b.range, 1, format!("{value}{{}}"))
            }
            (Some(AnyNodeRef::ExprAttribute(a)), Some(AnyNodeRef::ExprCall(c)))
                if a.attr.as_str() == "format" && c.func.range() == a.range =>
            {
                (StringForm::Format, c.range(), 2, value.clone())
            }
            _ => (StringForm::Plain, s.range, 0, value.clone()),
        };
        let segments = if exact {
            vec![(0usize, value.len(), content.start())]
        } else {
            vec![]
        };
        let requote = if exact || form != StringForm::Plain {
            None
        } else {
            Some((lit.range, lit.flags))
        };
        self.check_string(StringSite {
            range: s.range,
            form,
            form_range,
            depth,
            static_text,
            segments,
            requote,
        });
    }

    /// The CUDA name a portable form falls back to where torch has no accelerator (a CPU-only
    /// build): `getattr(<current_accelerator()>, "type", "cuda")`,
    /// `<current_accelerator()> or "cuda"`. Already ported: no finding.
    fn accelerator_fallback(&self, s: &ast::ExprStringLiteral) -> bool {
        let is_accelerator = |e: &Expr| matches!(e, Expr::Call(c) if self.callee_name(c) == "torch.accelerator.current_accelerator");
        let parent = self
            .stack
            .iter()
            .rev()
            .find(|n| !matches!(n, AnyNodeRef::Arguments(_)));
        match parent {
            Some(AnyNodeRef::ExprCall(c)) => {
                let args = &c.arguments.args;
                matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "getattr")
                    && args.len() == 3
                    && args[2].range() == s.range
                    && is_accelerator(&args[0])
            }
            Some(AnyNodeRef::ExprBoolOp(b)) => {
                b.op == ast::BoolOp::Or
                    && b.values.len() == 2
                    && b.values[1].range() == s.range
                    && is_accelerator(&b.values[0])
            }
            _ => false,
        }
    }

    pub(super) fn check_fstring(&mut self, f: &'a ast::ExprFString) {
        if self.index.strings.is_empty() || f.value.is_implicit_concatenated() {
            return;
        }
        let Some(ast::FStringPart::FString(fs)) = f.value.iter().next() else {
            return;
        };
        let mut static_text = String::new();
        let mut segments = vec![];
        for el in fs.elements.iter() {
            match el {
                ast::InterpolatedStringElement::Literal(l) => {
                    let exact = self
                        .src
                        .get(usize::from(l.range.start())..usize::from(l.range.end()))
                        == Some(&*l.value);
                    if exact {
                        segments.push((
                            static_text.len(),
                            static_text.len() + l.value.len(),
                            l.range.start(),
                        ));
                    }
                    static_text.push_str(&l.value);
                }
                ast::InterpolatedStringElement::Interpolation(_) => static_text.push_str("{}"),
            }
        }
        self.check_string(StringSite {
            range: f.range,
            form: StringForm::Fstring,
            form_range: f.range,
            depth: 0,
            static_text,
            segments,
            requote: None,
        });
    }

    pub(super) fn check_string(&mut self, site: StringSite) {
        let mut roles: Option<(Vec<Role>, Option<String>)> = None;
        let mut fallback_hit = None;
        for &i in &self.index.strings {
            if !self.is_active(i) {
                continue;
            }
            let rule = self.rule(i);
            let Matcher::String {
                regex,
                positions,
                forms,
            } = &rule.matcher
            else {
                continue;
            };
            if !forms.contains(&site.form) || !regex.is_match(&site.static_text) {
                continue;
            }
            match positions {
                None => {
                    if fallback_hit.is_none() {
                        fallback_hit = Some(i);
                    }
                }
                Some(classes) => {
                    let (roles, flow_veto) = roles
                        .get_or_insert_with(|| self.roles_with_flow(site.form_range, site.depth));
                    let in_position = classes
                        .iter()
                        .any(|c| self.class_matches(c, roles, rule.min_args));
                    if in_position {
                        let flow_veto = flow_veto.clone();
                        let Some(mut d) = self.string_diagnostic(i, &site) else {
                            return;
                        };
                        let device = classes
                            .iter()
                            .any(|c| c.contains("device") || c == "map-location");
                        if device && d.fix.is_some() {
                            let at = &self.stack[..self.stack.len() - site.depth];
                            if let Some(note) = self.not_a_device(at, site.form_range).or(flow_veto)
                            {
                                d.fix = None;
                                d.note = Some(note);
                            }
                        }
                        if d.fix.is_some() {
                            let at = &self.stack[..self.stack.len() - site.depth];
                            let note = self.device_table_entry(at, site.form_range);
                            if let Some(note) = note.or_else(|| self.cuda_implementation(at)) {
                                d.fix = None;
                                d.note = Some(note);
                            }
                        }
                        self.diags.push(d);
                        return;
                    }
                }
            }
        }
        if let Some(i) = fallback_hit
            && let Some(d) = self.string_diagnostic(i, &site)
        {
            self.fallbacks.push(d);
        }
    }

    /// The finding on a string, with its fix; None where the string is already portable (a
    /// comparison that names the TPU too).
    pub(super) fn string_diagnostic(
        &mut self,
        rule_idx: usize,
        site: &StringSite,
    ) -> Option<Diagnostic> {
        let rule = self.rule(rule_idx);
        let mut d = Diagnostic {
            rule: rule_idx,
            range: site.range,
            message: self.message(rule, None, site.range),
            fix: None,
            note: None,
        };
        let portable = matches!(rule.portable, Portable::Device | Portable::Backend);
        if self.target == Target::Portable && portable {
            match self.portable_string(rule, site) {
                Form::Fix(fix) => d.fix = Some(fix),
                Form::Kept(note) => d.note = Some(note),
                Form::Done => return None,
            }
            return Some(self.finalize(d));
        }
        match &self.v(rule).action {
            Some(Action::String(replacement)) => {
                let Matcher::String { regex, .. } = &rule.matcher else {
                    unreachable!()
                };
                let new = regex
                    .replace(&site.static_text, replacement.as_str())
                    .into_owned();
                match string_edit(&site.static_text, &new, &site.segments) {
                    Some(edit) => d.fix = Some(self.make_fix(rule, vec![edit], vec![], None)),
                    None => match site.requote {
                        Some((range, flags)) => {
                            let quote = flags.quote_str();
                            let prefix = &self.src[usize::from(range.start())..usize::from(range.start() + flags.opener_len() - flags.quote_len())];
                            let escaped = new.replace('\\', "\\\\").replace(quote, &format!("\\{quote}"));
                            let text = format!("{prefix}{quote}{escaped}{quote}");
                            d.fix = Some(self.make_fix(rule, vec![Edit::replace(range, text)], vec![], None));
                        }
                        None => d.note = Some("the string is built from parts that cannot be edited separately: edit it by hand".into()),
                    },
                }
            }
            Some(Action::Remove(RemoveKind::Statement)) => {
                match self.removal_fix(rule, site.form_range, site.depth, true) {
                    Ok(fix) => d.fix = Some(fix),
                    Err(note) => d.note = Some(note),
                }
            }
            Some(_) => d.note = Some("this action does not apply to strings".into()),
            None => {}
        }
        Some(self.finalize(d))
    }
}

fn content_range(range: TextRange, flags: ast::StringLiteralFlags) -> TextRange {
    TextRange::new(
        range.start() + flags.opener_len(),
        range.end() - flags.closer_len(),
    )
}

/// The smallest edit turning `old` into `new`, placed inside a verbatim source segment.
fn string_edit(old: &str, new: &str, segments: &[(usize, usize, TextSize)]) -> Option<Edit> {
    if old == new {
        return None;
    }
    let prefix = old
        .char_indices()
        .zip(new.chars())
        .take_while(|((_, a), b)| a == b)
        .last()
        .map(|((i, c), _)| i + c.len_utf8())
        .unwrap_or(0);
    let mut suffix = 0;
    let (ob, nb) = (old.as_bytes(), new.as_bytes());
    while suffix < ob.len() - prefix
        && suffix < nb.len() - prefix
        && ob[ob.len() - 1 - suffix] == nb[nb.len() - 1 - suffix]
    {
        suffix += 1;
    }
    // Keep the cut on character boundaries.
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    let (start, end) = (prefix, old.len() - suffix);
    let replacement = &new[prefix..new.len() - suffix];
    let (s0, _, src) = segments.iter().find(|(s, e, _)| *s <= start && end <= *e)?;
    let at = *src + TextSize::try_from(start - s0).ok()?;
    Some(Edit::replace(
        TextRange::new(at, at + TextSize::try_from(end - start).ok()?),
        replacement,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_edit_is_minimal() {
        let seg = [(0usize, 6usize, TextSize::from(10))];
        let e = string_edit("cuda:0", "tpu:0", &seg).unwrap();
        assert_eq!(
            e.range,
            TextRange::new(TextSize::from(10), TextSize::from(14))
        );
        assert_eq!(e.content, "tpu");
        // A change outside every verbatim segment cannot be placed.
        assert!(string_edit("cuda:{}", "tpu:{}", &[(4, 7, TextSize::from(0))]).is_none());
    }
}
