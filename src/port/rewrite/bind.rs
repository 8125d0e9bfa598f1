//! Binding a call's arguments (and the receiver) to a rule's parameters, with the kind of each
//! value (`None`, an int, a string, ...) that conversions and downgrades look at, and the
//! downgrades that depend on where the finding is (`unsafe_if_uses` unless `unless_uses` is
//! called on every path to it).

use std::collections::HashMap;

use ruff_python_ast::{AnyNodeRef, Expr, ExprCall, Number};
use ruff_text_size::{Ranged, TextRange};

use super::{Checker, Match};
use crate::port::facts;
use crate::port::parse::is_atomic;
use crate::port::rules::{ArgKind, Matcher, Rule, Variant};
use crate::port::semantic::values;
use crate::port::template::{self, Value};

/// The values bound to a rule's parameters, and what stays as it is.
pub(super) struct Bound<'a> {
    pub(super) values: HashMap<String, Value<'a>>,
    pub(super) rest: Vec<TextRange>,
    /// Parameter → (value range, whole keyword range if given by keyword).
    pub(super) sources: HashMap<String, (TextRange, Option<TextRange>)>,
    /// Why the fix is only unsafe here, if it is (an argument kind the rule marks `unsafe`, a
    /// receiver not known to be a tensor).
    pub(super) downgrade: Option<String>,
}

impl<'a> Checker<'a> {
    /// Bind the call's arguments (and receiver) to the rule's parameters.
    pub(super) fn bind(&self, rule: &Rule, m: &Match<'a>) -> Result<Bound<'a>, String> {
        self.bind_with(self.v(rule), rule, m)
    }

    /// [`Checker::bind`] with the parameters of `v` (`match.when` binds the literal fix's).
    pub(super) fn bind_with(
        &self,
        v: &Variant,
        rule: &Rule,
        m: &Match<'a>,
    ) -> Result<Bound<'a>, String> {
        let mut b = Bound {
            values: HashMap::new(),
            rest: vec![],
            sources: HashMap::new(),
            downgrade: None,
        };
        if let Some(r) = m.receiver {
            b.values.insert("receiver".into(), self.value(r));
        }
        // Attribute rules are about tensors and modules (`x.is_cuda`): on another receiver (a
        // config object) the rewrite is not proven.
        if let Some(r) = m.receiver
            && matches!(rule.matcher, Matcher::Attribute(_))
            && !values::is_tensor_or_module(self.sem, &self.parsed.module, r)
        {
            b.downgrade = Some(format!(
                "`{}` is not known to be a tensor or a module: check it is not another object with this attribute (a config)",
                self.text(r.range())
            ));
        }
        let Some(call) = m.call else { return Ok(b) };
        if m.reference.is_some()
            && m.receiver.is_none()
            && !matches!(rule.matcher, Matcher::Call(_))
        {
            // A reference in callee position: arguments are not part of the match.
            if v.params.is_empty() {
                return Ok(b);
            }
        }
        for (i, arg) in call.arguments.args.iter().enumerate() {
            match (arg, v.params.get(i)) {
                (Expr::Starred(_), _) | (_, None) => {
                    if v.pass_rest {
                        b.rest.push(self.arg_range(call, arg));
                    } else {
                        return Err(format!(
                            "unexpected argument `{}`: edit this call by hand",
                            self.text(arg.range())
                        ));
                    }
                }
                (_, Some(p)) => {
                    let range = self.arg_range(call, arg);
                    b.values.insert(p.clone(), self.value_at(arg, range));
                    b.sources.insert(p.clone(), (range, None));
                }
            }
        }
        for kw in &call.arguments.keywords {
            match &kw.arg {
                Some(name) if v.params.iter().any(|p| p == name.as_str()) => {
                    if b.values.contains_key(name.as_str()) {
                        return Err(format!("`{name}` is given twice"));
                    }
                    let range = self.keyword_value_range(kw);
                    b.values
                        .insert(name.to_string(), self.value_at(&kw.value, range));
                    b.sources
                        .insert(name.to_string(), (range, Some(kw.range())));
                }
                _ => {
                    if v.pass_rest {
                        b.rest.push(kw.range());
                    } else {
                        return Err(format!(
                            "unexpected keyword `{}`: edit this call by hand",
                            self.text(kw.range())
                        ));
                    }
                }
            }
        }
        if let Some(why) = self.untraceable(call, &b) {
            return Err(why);
        }
        for (p, conv) in &v.convert {
            let kind = b.values.get(p).map(|v| v.kind).unwrap_or(ArgKind::Missing);
            // A literal with its own template (`torch.bfloat16`) is not covered by its kind.
            let own = template::has_literal(conv, b.values.get(p));
            if kind.listed_in(&conv.unsafe_for) && !own && b.downgrade.is_none() {
                let text = b.values.get(p).map(|v| v.text).unwrap_or("not given");
                b.downgrade = Some(unsafe_kind_note(v, p, text, kind));
            }
            // `device = f"cuda:{rank}"` just before `set_device(device)`: the index it names
            // (flow.rs) is what the call takes.
            if conv.manual_text.is_some()
                && let Some(x) = self.indexed_name(call, b.sources.get(p))
            {
                b.values.insert(p.clone(), self.value(x));
                continue;
            }
            if let (Some(re), Some(v)) = (&conv.manual_text, b.values.get(p))
                && regex::Regex::new(re).is_ok_and(|re| re.is_match(v.text))
            {
                return Err(format!(
                    "`{}` may not be what `{p}` takes here: no mechanical rewrite",
                    v.text
                ));
            }
            // A kind marked manual stops the fix even where no template uses the parameter.
            let explicit = template::has_explicit(conv, kind) || own;
            if kind.listed_in(&conv.manual_for) && !explicit {
                let text = b.values.get(p).map(|v| v.text).unwrap_or(p.as_str());
                if matches!(kind, ArgKind::True | ArgKind::False) {
                    return Err(format!("`{p}={text}`: no mechanical rewrite"));
                }
                return Err(format!(
                    "`{text}` is {}: no mechanical rewrite",
                    template::kind_name(kind)
                ));
            }
        }
        Ok(b)
    }

    /// `torch_xla.compile(step, full_graph=True)` (a rule with `f` and `full_graph` parameters)
    /// where `step`, a def of this file, runs the optimizer: `torch.compile(..., fullgraph=True)`
    /// would fail in Dynamo, so no fix is made.
    fn untraceable(&self, call: &ExprCall, b: &Bound<'a>) -> Option<String> {
        let full = b.values.get("full_graph")?;
        if matches!(full.kind, ArgKind::False | ArgKind::None) {
            return None;
        }
        let (range, _) = b.sources.get("f")?;
        let Expr::Name(n) = argument_at(call, *range)? else {
            return None;
        };
        let values::Origin::Def(def) = values::origin(self.sem, &self.parsed.module, n) else {
            return None;
        };
        let step = values::runs_optimizer(&def.body)?;
        Some(format!(
            "`{}` runs `{}`, which Dynamo cannot trace with fullgraph=True: compile the forward and loss only and keep the optimizer step outside, or drop `full_graph`",
            n.id,
            self.text(step)
        ))
    }

    /// Why the rule's fix is unsafe here, if it is: the file uses one of `unsafe_if_uses`, and
    /// not every path to this finding calls one of `unless_uses` (in the innermost function, or
    /// at module level).
    pub(super) fn unsafe_by_context(&self, rule: &Rule) -> Option<String> {
        let used: Vec<&str> = rule
            .unsafe_if_uses
            .iter()
            .filter(|n| self.facts.uses_any(std::slice::from_ref(*n)))
            .map(|n| n.as_str())
            .collect();
        let unless = rule.unless_uses.join(", ");
        if !facts::unsafe_here(rule, self.facts) {
            // No process launch in sight: single-process only if this file is the program.
            return (!rule.unless_uses.is_empty() && !self.facts.program).then(|| {
                format!(
                    "this module is not a program and does not call {unless}: whether it runs in one process or several is decided elsewhere"
                )
            });
        }
        let why = format!("this file uses {}", used.join(", "));
        if rule.unless_uses.is_empty() {
            return Some(format!(
                "{why}, whose code may take these values: check it is this program's"
            ));
        }
        let Some(site) = self.stack.iter().rev().find_map(|n| n.as_stmt_ref()) else {
            return Some(format!(
                "{why}, and not every run of this code calls {unless}"
            ));
        };
        let site = site.start();
        let is_wrap = |c: &ExprCall| {
            self.sem.qualified_name(&c.func).is_some_and(|q| {
                rule.unless_uses.iter().any(|n| {
                    q == *n || (q.starts_with(n.as_str()) && q[n.len()..].starts_with('.'))
                })
            })
        };
        let module = &self.parsed.module.body;
        let function = self.stack.iter().rev().find_map(|n| match n {
            AnyNodeRef::StmtFunctionDef(f) => Some(*f),
            _ => None,
        });
        let covered = match function {
            Some(f) => {
                facts::called_with(&f.body, site, &is_wrap)
                    || module.iter().any(|s| facts::always_calls(s, &is_wrap))
            }
            None => facts::called_with(module, site, &is_wrap),
        };
        (!covered).then(|| format!("{why}, and not every run of this code calls {unless}"))
    }

    /// The argument at `source` is a name that holds a CUDA device with an index: that index.
    fn indexed_name(
        &self,
        call: &'a ExprCall,
        source: Option<&(TextRange, Option<TextRange>)>,
    ) -> Option<&'a Expr> {
        let (range, _) = source?;
        let Expr::Name(n) = argument_at(call, *range)? else {
            return None;
        };
        self.device_index_of(n)
    }

    /// [`Checker::value`] of an argument written as the text at `range` (the expression with
    /// the parentheses around it, which a rewrite keeps: `*(x := y)` parses, `*x := y` not).
    pub(super) fn value_at(&self, e: &'a Expr, range: TextRange) -> Value<'a> {
        let mut v = self.value(e);
        if range != e.range() {
            v.text = self.text(range);
            v.atomic = true;
        }
        v
    }

    pub(super) fn value(&self, e: &'a Expr) -> Value<'a> {
        let (kind, literal) = match e {
            Expr::NoneLiteral(_) => (ArgKind::None, None),
            Expr::BooleanLiteral(b) if b.value => (ArgKind::True, None),
            Expr::BooleanLiteral(_) => (ArgKind::False, None),
            Expr::NumberLiteral(n) => match &n.value {
                Number::Int(i) => (ArgKind::Int, Some(i.to_string())),
                _ => (ArgKind::Other, None),
            },
            Expr::StringLiteral(s) => (ArgKind::String, Some(s.value.to_str().to_string())),
            // A PyTorch constant (`torch.float16`, `torch.half`) by its qualified name, so
            // `literal = { "torch.bfloat16" = ... }` can tell dtypes apart.
            Expr::Attribute(_) => (
                ArgKind::Other,
                self.qualified(e).filter(|q| q.starts_with("torch.")),
            ),
            _ => (ArgKind::Other, None),
        };
        Value {
            text: self.text(e.range()),
            kind,
            literal,
            atomic: is_atomic(e),
        }
    }
}

/// Why an argument of kind `kind` makes the fix unsafe: the rule's `fix_safety` where it has
/// one, else what is not known about the argument.
fn unsafe_kind_note(v: &Variant, param: &str, text: &str, kind: ArgKind) -> String {
    let what = match kind {
        ArgKind::Missing => format!("`{param}` is not given"),
        _ => format!("`{param}` is `{text}`, {}", template::kind_name(kind)),
    };
    match &v.fix_safety {
        Some(s) => format!("{what}: {s}"),
        None => format!("{what}: the rewrite is proven only for the other kinds of argument"),
    }
}

/// The argument of `call` (positional or a keyword's value) written inside `range`: the text a
/// bound parameter came from.
fn argument_at(call: &ExprCall, range: TextRange) -> Option<&Expr> {
    call.arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
        .find(|e| range.contains_range(e.range()))
}
