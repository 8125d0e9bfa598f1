//! Matching by name: calls, references (names and attribute chains that resolve to a qualified
//! name, with `prefix.*` fallbacks), method calls and value attributes, and keyword arguments.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::Ranged;

use super::{Checker, Match};
use crate::port::rules::Matcher;
use crate::port::semantic::BindingKind;
use crate::port::semantic::values::{self, Origin};

/// A `match.when` exclusion (`"!<cuda test>"`): not where the argument is false on a TPU.
const CUDA_TEST: &str = "<cuda test>";

/// A test true only on some devices, none of them the TPU: an equality or membership test of a
/// device against string literals (`device.type == "cuda"`, `device.type in ("cuda", "mps")`),
/// or `torch.cuda.is_available()`, and-ed with anything, never or-ed or negated.
static DEVICE_TEST: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r#"(==|\bin)\s*[(\[]?\s*["'](cuda|mps|xpu|npu|cpu)["']|["'](cuda|mps|xpu|npu|cpu)["']\s*(==|in\b)|cuda\.is_available\(\)"#,
    )
    .expect("valid regex")
});

impl<'a> Checker<'a> {
    pub(super) fn check_call(&mut self, call: &'a ast::ExprCall) {
        let q = self.qualified(&call.func);
        if let Some(q) = &q
            && let Some(ids) = self.index.calls.get(q)
            && let Some(&i) = ids
                .iter()
                .find(|i| self.is_active(**i) && self.when_holds(**i, call))
        {
            self.emit(Match {
                rule: i,
                range: call.range(),
                qualified: Some(q.clone()),
                call: Some(call),
                receiver: None,
                reference: None,
                keyword: None,
            });
        }
        if let Expr::Attribute(a) = call.func.as_ref()
            && !self.sem.root_is_import(&a.value)
            && let Some(ids) = self.index.methods.get(a.attr.as_str())
            && let Some(i) = self.first_for_receiver(ids, &a.value)
        {
            self.emit(Match {
                rule: i,
                range: call.range(),
                qualified: None,
                call: Some(call),
                receiver: Some(&a.value),
                reference: None,
                keyword: None,
            });
        }
        for kw in &call.arguments.keywords {
            let Some(name) = &kw.arg else { continue };
            let Some(ids) = self.index.keywords.get(name.as_str()) else {
                continue;
            };
            let hit = ids.iter().copied().find(|i| {
                self.is_active(*i)
                    && match &self.rule(*i).matcher {
                        Matcher::Keyword { calls, .. } => {
                            (calls.is_empty() || q.as_ref().is_some_and(|q| calls.contains(q)))
                                && self.keyword_when_holds(*i, kw)
                        }
                        _ => false,
                    }
            });
            if let Some(i) = hit {
                self.emit(Match {
                    rule: i,
                    range: kw.range(),
                    qualified: q.clone(),
                    call: Some(call),
                    receiver: None,
                    reference: None,
                    keyword: Some(kw),
                });
            }
        }
    }

    /// Does the call fit the rule's `match.when` (each parameter one of the listed strings)?
    fn when_holds(&self, i: usize, call: &'a ast::ExprCall) -> bool {
        let rule = self.rule(i);
        if rule.when.is_empty() {
            return true;
        }
        let m = Match {
            rule: i,
            range: call.range(),
            qualified: None,
            call: Some(call),
            receiver: None,
            reference: None,
            keyword: None,
        };
        let Ok(b) = self.bind_with(&rule.literal, rule, &m) else {
            return false;
        };
        rule.when.iter().all(|(param, allowed)| {
            // `"!text"`: not where the call's source holds the text (a scaler whose `enabled`
            // already tests for the TPU, as the portable GradScaler fixes write it).
            let source = self.text(call.range());
            if allowed
                .iter()
                .filter_map(|a| a.strip_prefix('!'))
                .filter(|x| *x != CUDA_TEST)
                .any(|x| source.contains(x))
            {
                return false;
            }
            // `"!<cuda test>"`: not where the argument (or the value of the name it is) is true
            // only on CUDA (`enabled=use_amp`, `use_amp = device.type == "cuda"`).
            let arg_of = |param: &str| {
                let (at, _) = b.sources.get(param)?;
                call.arguments.iter_source_order().find_map(|a| match a {
                    ast::ArgOrKeyword::Arg(e) if e.range() == *at => Some(e),
                    ast::ArgOrKeyword::Keyword(k) if k.value.range() == *at => Some(&k.value),
                    _ => None,
                })
            };
            if allowed
                .iter()
                .any(|a| a.strip_prefix('!') == Some(CUDA_TEST))
                && arg_of(param).is_some_and(|e| self.false_on_tpu(e))
            {
                return false;
            }
            // A list of exclusions only: any other value, or none.
            if allowed.iter().all(|a| a.starts_with('!')) {
                return true;
            }
            if !b.values.contains_key(param) {
                return allowed.iter().any(|a| a == "<missing>");
            }
            let fits = |l: &str| {
                allowed.iter().any(|a| match a.strip_suffix('*') {
                    Some(prefix) => l.starts_with(prefix),
                    None => l == a,
                })
            };
            // A string by its text, anything else by its source (`False`).
            let literal = b.values.get(param).map(|v| {
                if v.kind == crate::port::rules::ArgKind::String {
                    v.literal.as_deref().unwrap_or("")
                } else {
                    v.text
                }
            });
            // For a finding without a fix, a conditional's strings, each a value it may take
            // (`accelerator="cpu" if devices == "cpu" else "gpu"`: set Q's robotics Trainer),
            // and `<unknown>` for a value not written here (`accelerator=args.accelerator`); a
            // fix would rewrite the other branches too.
            let reported = rule.literal.fix == crate::port::rules::FixClass::Manual;
            let arg = arg_of(param).filter(|_| reported);
            let branches = arg.map_or(vec![], branch_strings);
            if arg.is_some_and(|e| !written(e)) && allowed.iter().any(|a| a == "<unknown>") {
                return true;
            }
            literal.is_some_and(fits) || branches.into_iter().any(fits)
        })
    }

    /// Whether a reference rule applies to this reference: a replacement for a bare name
    /// (`@custom_fwd` → `custom_fwd(device_type=...)`) not where the name is called (a call rule
    /// handles that form); advice about a third-party GPU library (LIB, ATN, KRN) not where code
    /// only names its types (annotations, isinstance checks, lists of supported classes).
    fn reference_fits(&self, i: usize, called: bool, range: ruff_text_size::TextRange) -> bool {
        let rule = self.rule(i);
        if called {
            return !matches!(
                rule.literal.action,
                Some(crate::port::rules::Action::Replace(_))
            );
        }
        let advice_only =
            rule.literal.action.is_none() && matches!(rule.family.as_str(), "LIB" | "ATN" | "KRN");
        !(advice_only
            && (matches!(
                self.stack.last(),
                Some(AnyNodeRef::ExprTuple(_) | AnyNodeRef::ExprList(_) | AnyNodeRef::ExprSet(_))
            ) || self.in_type_position(range)))
    }

    /// Is the range inside an annotation or an argument of `isinstance`/`issubclass`/`hasattr`?
    fn in_type_position(&self, range: ruff_text_size::TextRange) -> bool {
        self.stack.iter().rev().any(|a| match a {
            AnyNodeRef::ExprCall(c) => {
                matches!(c.func.as_ref(), Expr::Name(n) if matches!(n.id.as_str(), "isinstance" | "issubclass" | "hasattr"))
                    && c.arguments.range().contains_range(range)
            }
            AnyNodeRef::StmtFunctionDef(f) => f.returns.as_ref().is_some_and(|r| r.range().contains_range(range)),
            AnyNodeRef::Parameter(p) => p.annotation.as_ref().is_some_and(|r| r.range().contains_range(range)),
            AnyNodeRef::StmtAnnAssign(a) => a.annotation.range().contains_range(range),
            _ => false,
        })
    }

    /// Does a keyword argument fit its rule's `match.when` (the keyword's value one of the
    /// listed literals: a string by its text, anything else by its source)?
    fn keyword_when_holds(&self, i: usize, kw: &'a ast::Keyword) -> bool {
        let Some(allowed) = kw
            .arg
            .as_ref()
            .and_then(|n| self.rule(i).when.get(n.as_str()))
        else {
            return true;
        };
        let text = match &kw.value {
            Expr::StringLiteral(s) => s.value.to_str(),
            v => self.text(v.range()),
        };
        allowed.iter().any(|a| match a.strip_suffix('*') {
            Some(prefix) => text.starts_with(prefix),
            None => text == a,
        })
    }

    /// The first active rule among `ids` whose `receiver` pattern (if any) fits the object.
    pub(super) fn first_for_receiver(&self, ids: &[usize], receiver: &Expr) -> Option<usize> {
        let recv = self.text(receiver.range());
        ids.iter().copied().find(|i| {
            self.is_active(*i)
                && self
                    .rule(*i)
                    .receiver
                    .as_ref()
                    .is_none_or(|re| re.is_match(recv))
        })
    }

    pub(super) fn check_value_attribute(&mut self, attr: &'a ast::ExprAttribute) {
        // `x.is_cuda` (not called, not a module attribute).
        let Some(ids) = self.index.attributes.get(attr.attr.as_str()) else {
            return;
        };
        if let Some(AnyNodeRef::ExprCall(c)) = self.stack.last()
            && c.func.range() == attr.range
        {
            return;
        }
        if self.sem.root_is_import(&attr.value) {
            return;
        }
        // `self.is_cuda` of a class that sets it itself is the program's, not PyTorch's.
        if self.own_attribute(attr.attr.as_str(), &attr.value) {
            return;
        }
        if let Some(i) = self.first_for_receiver(ids, &attr.value) {
            self.emit(Match {
                rule: i,
                range: attr.range,
                qualified: None,
                call: None,
                receiver: Some(&attr.value),
                reference: Some(attr.range),
                keyword: None,
            });
        }
    }

    pub(super) fn check_reference(&mut self, node: AnyNodeRef<'a>) {
        let range = node.range();
        let maximal = !matches!(self.stack.last(), Some(AnyNodeRef::ExprAttribute(p)) if p.value.range() == range);
        if self.index.refs.is_empty()
            && self.index.prefixes.is_empty()
            && self.index.calls.is_empty()
        {
            return;
        }
        let q = match node {
            AnyNodeRef::ExprAttribute(a) => self.qualified(&a.value).map(|mut q| {
                q.push('.');
                q.push_str(a.attr.as_str());
                q
            }),
            AnyNodeRef::ExprName(n) => match &self
                .sem
                .resolve(n.id.as_str(), n.range.start())
                .map(|b| &b.kind)
            {
                Some(BindingKind::Import { qualified }) => Some(qualified.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(q) = q else { return };
        let call = match self.stack.last() {
            Some(AnyNodeRef::ExprCall(c)) if c.func.range() == range => Some(*c),
            _ => None,
        };
        if let Some(ids) = self.index.refs.get(&q)
            && let Some(&i) = ids
                .iter()
                .find(|i| self.is_active(**i) && self.reference_fits(**i, call.is_some(), range))
        {
            self.emit(Match {
                rule: i,
                range,
                qualified: Some(q),
                call,
                receiver: None,
                reference: Some(range),
                keyword: None,
            });
            return;
        }
        if self.reference_to_called(node, &q) {
            return;
        }
        if !maximal {
            return;
        }
        let hit = self.index.prefixes.iter().find(|(p, i)| {
            self.is_active(*i)
                && self.reference_fits(*i, false, range)
                && (q == *p
                    || (q.starts_with(p.as_str()) && q.as_bytes().get(p.len()) == Some(&b'.')))
        });
        if let Some((_, i)) = hit {
            let m = Match {
                rule: *i,
                range,
                qualified: Some(q),
                call: None,
                receiver: None,
                reference: Some(range),
                keyword: None,
            };
            if let Some(d) = self.diagnostic(&m) {
                self.fallbacks.push(d);
            }
        }
    }
}

impl Checker<'_> {
    /// Is `e` false on a TPU ([`DEVICE_TEST`]), written here or as the value a name was given?
    fn false_on_tpu(&self, e: &Expr) -> bool {
        let mut e = e;
        for _ in 0..3 {
            let Expr::Name(n) = e else { break };
            match values::origin(self.sem, &self.parsed.module, n) {
                Origin::Value(v) => e = v,
                _ => return false,
            }
        }
        let text = self.text(e.range());
        !text.to_ascii_lowercase().contains("tpu")
            && !text.contains(" or ")
            && !text.contains("not ")
            && !text.contains("!=")
            && DEVICE_TEST.is_match(text)
    }
}

/// The strings a conditional expression may take, through nested conditionals.
fn branch_strings(e: &Expr) -> Vec<&str> {
    match e {
        Expr::If(i) => {
            let mut out = branch_strings(&i.body);
            out.extend(branch_strings(&i.orelse));
            out
        }
        Expr::StringLiteral(s) => vec![s.value.to_str()],
        _ => vec![],
    }
}

/// A value written in the call: a literal, or a conditional choosing between literals.
fn written(e: &Expr) -> bool {
    match e {
        Expr::If(i) => written(&i.body) && written(&i.orelse),
        _ => e.is_literal_expr() || e.is_none_literal_expr(),
    }
}
