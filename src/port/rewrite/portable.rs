//! The portable forms of device strings and backend names (`--to portable`, the default): a
//! fix that keeps what the program does on the machine it was written for and makes it right on
//! a TPU. Where the string sits decides the form:
//!
//! - the device a torch API is given (`.to("cuda")`, `device="cuda"` of a factory,
//!   `map_location`, `torch.device("cuda")` itself): the current accelerator,
//!   `torch.accelerator.current_accelerator()` (`cuda` on a CUDA build, `tpu` under TorchTPU);
//! - anywhere a string may be needed (assigned, a default, an argparse choice, a dict value,
//!   `torch.device("cuda", i)`, `f"cuda:{rank}"`): its `.type`, in an f-string where the text
//!   goes on (`f"{torch.accelerator.current_accelerator().type}:{rank}"`);
//! - NCCL (`init_process_group("nccl")`, `--backend` defaults): the accelerator's default
//!   backend, `torch.distributed.get_default_backend_for_device(...)` (`nccl` on CUDA,
//!   `tpu_dist` under TorchTPU);
//! - a comparison (`== "cuda"`, `in ("cuda",)`, `dist.get_backend() == "nccl"`): extended to the
//!   TPU (`in ("cuda", "tpu")`), never replaced, and only where the code it selects is right on
//!   a TPU: a float16 GradScaler or autocast that no fix moves, CUDA streams, graphs or Triton
//!   there keep the comparison CUDA's, with a note (`extend.rs`).

use ruff_python_ast::{self as ast, AnyNodeRef, CmpOp, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;
use super::strings::{Form, StringSite};
use crate::port::edit::Edit;
use crate::port::rules::{Portable, Rule, StringForm};
use crate::port::template;

/// The current accelerator, as a device.
const ACCELERATOR: &str = "torch.accelerator.current_accelerator()";
/// Its default process-group backend.
const DEFAULT_BACKEND: &str = "torch.distributed.get_default_backend_for_device";

/// A literal tuple, list or set.
#[derive(Clone, Copy)]
struct Collection<'a> {
    range: TextRange,
    elements: &'a [Expr],
    /// `("cuda",)`: rewritten whole, so no trailing comma is left before the new element.
    single_tuple: bool,
}

/// Where a string sits, for its portable form.
enum Place<'a> {
    /// `x == "cuda"` (`!=`), the string on one side.
    Equal(&'a ast::ExprCompare),
    /// `"cuda" in name` (`not in`), a substring test of a name or attribute.
    Substring(&'a ast::ExprCompare),
    /// `x in ("cuda", "mps")` (`not in`), the string an element of the collection.
    Member(Collection<'a>),
    /// `self.assertEqual(x, "cuda")` (`assertNotEqual`), the string one of the two values.
    Asserted(&'a ast::ExprCall),
    /// A comparison that cannot be extended mechanically, with the reason.
    Unextendable(&'static str),
    /// The device a torch API takes; with the call when the string is all of
    /// `torch.device("cuda")`.
    Device(Option<&'a ast::ExprCall>),
    /// Anywhere else: a string.
    Text,
}

impl<'a> Checker<'a> {
    /// The portable fix of a string matched by a `portable = "device"` or `"backend"` rule.
    pub(super) fn portable_string(&mut self, rule: &Rule, site: &StringSite) -> Form {
        let at: Vec<AnyNodeRef<'a>> = self.stack[..self.stack.len() - site.depth].to_vec();
        let backend = matches!(rule.portable, Portable::Backend);
        let place = self.place(&at, site.form_range);
        let edits = match place {
            Place::Unextendable(why) => return Form::Kept(why.to_string()),
            Place::Asserted(c) => match self.extend_assert(rule, site, c) {
                Ok(e) => {
                    self.remember_extension(&at, c.range(), site.range);
                    e
                }
                Err(why) => return Form::Kept(why),
            },
            Place::Substring(c) if self.substring_extended(&at, c) => return Form::Done,
            Place::Substring(c) => match self.extend_substring(rule, site, c, &at) {
                Ok(e) => {
                    self.remember_extension(&at, c.range(), site.range);
                    e
                }
                Err(why) => return Form::Kept(why),
            },
            Place::Equal(c) => match self.extend_equal(rule, site, c) {
                Ok(e) => {
                    self.remember_extension(&at, c.range(), site.range);
                    e
                }
                Err(why) => return Form::Kept(why),
            },
            Place::Member(coll) => {
                let Some(twin) = self.twin(rule, site) else {
                    return Form::Kept(
                        "the TPU's name for this string cannot be built mechanically: add it to the comparison by hand".into(),
                    );
                };
                if coll.elements.iter().any(names_tpu) {
                    return Form::Done;
                }
                let compare = at
                    .iter()
                    .rev()
                    .find(|n| matches!(n, AnyNodeRef::ExprCompare(_)))
                    .map(|n| n.range())
                    .unwrap_or(coll.range);
                self.remember_extension(&at, compare, site.range);
                if coll.single_tuple {
                    vec![Edit::replace(
                        coll.range,
                        format!("({}, {twin})", self.text(site.range)),
                    )]
                } else {
                    vec![Edit::insert(site.range.end(), format!(", {twin}"))]
                }
            }
            Place::Device(call) => {
                let (acc, imports) = self.accelerator(site.range);
                let plain = site.static_text == "cuda" && site.form == StringForm::Plain;
                match (call, backend) {
                    (Some(c), false) if plain => {
                        // Spelled as the call was (`T.device("cuda")` keeps `T`).
                        let (acc, imports) = self.accelerator(c.func.range());
                        return Form::Fix(self.make_fix(
                            rule,
                            vec![Edit::replace(c.range(), acc)],
                            imports,
                            None,
                        ));
                    }
                    (None, false) if plain => {
                        return Form::Fix(self.make_fix(
                            rule,
                            vec![Edit::replace(site.range, acc)],
                            imports,
                            None,
                        ));
                    }
                    _ => return self.string_form(rule, site, backend, &at),
                }
            }
            Place::Text => return self.string_form(rule, site, backend, &at),
        };
        Form::Fix(self.make_fix(rule, edits, vec![], None))
    }

    /// The string form ([`Self::text_form`]) of a string whose ancestors are `at`. Inside another
    /// f-string the fallback's inner quotes would need Python 3.12: kept for a hand port.
    fn string_form(
        &self,
        rule: &Rule,
        site: &StringSite,
        backend: bool,
        at: &[AnyNodeRef<'a>],
    ) -> Form {
        let available = self.available_only(at, site, backend);
        let nested = at
            .iter()
            .any(|n| matches!(n, AnyNodeRef::ExprFString(f) if f.range != site.range));
        if nested && !available {
            return Form::Kept(
                "a string inside an f-string's replacement field: port it by hand (the portable \
                 form's own quotes need Python 3.12 there)"
                    .into(),
            );
        }
        self.text_form(rule, site, backend, available)
    }

    /// Whether the string is reached only where an accelerator is available: in the branch of an
    /// `if` or conditional expression taken when `torch.cuda.is_available()` (or the
    /// accelerator's) is true, alone or `and`-ed with other tests, or the `else` of its negation.
    /// There `current_accelerator()` is never None. A backend given straight to
    /// `init_process_group` or `new_group` counts too: without an accelerator the original's
    /// NCCL raised there as well.
    fn available_only(&self, at: &[AnyNodeRef<'a>], site: &StringSite, backend: bool) -> bool {
        let creates_group = |n: &AnyNodeRef<'a>| {
            matches!(n, AnyNodeRef::ExprCall(c) if {
                let callee = self.callee_name(c);
                let method = callee.rsplit('.').next().unwrap_or("");
                matches!(method, "init_process_group" | "new_group")
                    && c.arguments.range().contains_range(site.range)
            })
        };
        if backend
            && at
                .iter()
                .rev()
                .find(|n| matches!(n, AnyNodeRef::ExprCall(_)))
                .is_some_and(creates_group)
        {
            return true;
        }
        let within = |stmts: &[ast::Stmt]| {
            stmts.first().zip(stmts.last()).is_some_and(|(a, b)| {
                a.start() <= site.range.start() && site.range.end() <= b.end()
            })
        };
        at.iter().rev().any(|n| match *n {
            AnyNodeRef::ExprIf(e) => {
                (e.body.range().contains_range(site.range) && self.asks_available(&e.test))
                    || (e.orelse.range().contains_range(site.range)
                        && self.asks_unavailable(&e.test))
            }
            AnyNodeRef::StmtIf(i) => {
                if within(&i.body) {
                    return self.asks_available(&i.test);
                }
                match i.elif_else_clauses.as_slice() {
                    [c] if c.test.is_none() && within(&c.body) => self.asks_unavailable(&i.test),
                    clauses => clauses.iter().any(|c| {
                        within(&c.body) && c.test.as_ref().is_some_and(|t| self.asks_available(t))
                    }),
                }
            }
            _ => false,
        })
    }

    /// `torch.cuda.is_available()` or `torch.accelerator.is_available()`, alone or one operand
    /// of an `and`.
    fn asks_available(&self, test: &Expr) -> bool {
        match test {
            Expr::BoolOp(b) if b.op == ast::BoolOp::And => {
                b.values.iter().any(|v| self.asks_available(v))
            }
            Expr::Call(c) if c.arguments.is_empty() => matches!(
                self.callee_name(c).as_str(),
                "torch.cuda.is_available" | "torch.accelerator.is_available"
            ),
            _ => false,
        }
    }

    /// `not torch.cuda.is_available()` (the accelerator's), alone or one operand of an `or`.
    fn asks_unavailable(&self, test: &Expr) -> bool {
        match test {
            Expr::BoolOp(b) if b.op == ast::BoolOp::Or => {
                b.values.iter().any(|v| self.asks_unavailable(v))
            }
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => self.asks_available(&u.operand),
            _ => false,
        }
    }

    /// `torch.accelerator.current_accelerator()` as the file spells it, and what it must import.
    fn accelerator(&self, at: TextRange) -> (String, Vec<String>) {
        let (name, import) =
            template::qualify(ACCELERATOR.trim_end_matches("()"), &self.ctx_at(at));
        (format!("{name}()"), import.into_iter().collect())
    }

    /// The string form: the accelerator's type (and for NCCL its default backend) in place of
    /// the CUDA name, an f-string where text goes on.
    ///
    /// Where the accelerator may be missing (a CPU-only torch build: `current_accelerator()` is
    /// None), the forms fall back to CUDA's name, as the original string was:
    /// `getattr(acc, "type", "cuda")`, `get_default_backend_for_device(acc or "cuda")`. A string
    /// reached only where an accelerator is available (`available` below) keeps the short
    /// `acc.type`. Inner quotes are the other kind than the f-string's (Python < 3.12).
    fn text_form(&self, rule: &Rule, site: &StringSite, backend: bool, available: bool) -> Form {
        let (acc, mut imports) = self.accelerator(site.range);
        let (dist, import) = template::qualify(DEFAULT_BACKEND, &self.ctx_at(site.range));
        imports.extend(import);
        let own_quote = quote_of(self.text(site.range));
        // Inside an f-string (the literal's own, or one the fix builds) the inner strings take
        // the other quote; an expression in place of the whole literal takes the literal's.
        let forms = |q: char| {
            let acc_type = accelerator_type(&acc, available, q);
            let backend = if available {
                format!("{dist}({acc})")
            } else {
                format!("{dist}({acc} or {q}cuda{q})")
            };
            (acc_type, backend)
        };
        let (acc_type, default_backend) = forms(other_quote(own_quote));
        // The literal's own text (a `+` concatenation's static text ends with its `{}`).
        let own = match site.form {
            StringForm::Concat => site
                .static_text
                .strip_suffix("{}")
                .unwrap_or(&site.static_text),
            _ => &site.static_text,
        };
        // Split the text into the CUDA names and what lies between them.
        let pieces = cuda_pieces(own, backend);
        if pieces.iter().all(|p| matches!(p, Piece::Text(_))) {
            return Form::Kept("no CUDA name in the string's text".into());
        }
        let edit = match site.form {
            StringForm::Fstring => {
                // Inside the f-string: each name becomes an interpolation, in its verbatim segment.
                let mut edits = vec![];
                let mut at = 0;
                for p in &pieces {
                    let len = match p {
                        Piece::Cuda => 4,
                        Piece::Nccl => 4,
                        Piece::Text(t) => t.len(),
                    };
                    if !matches!(p, Piece::Text(_)) {
                        let Some(&(s0, _, src)) = site
                            .segments
                            .iter()
                            .find(|(s, e, _)| *s <= at && at + len <= *e)
                        else {
                            return Form::Kept(
                                "the f-string's text cannot be edited in place: rewrite it by hand"
                                    .into(),
                            );
                        };
                        let start =
                            src + ruff_text_size::TextSize::try_from(at - s0).unwrap_or_default();
                        let range =
                            TextRange::at(start, ruff_text_size::TextSize::from(len as u32));
                        let inner = match p {
                            Piece::Cuda => &acc_type,
                            _ => &default_backend,
                        };
                        edits.push(Edit::replace(range, format!("{{{inner}}}")));
                    }
                    at += len;
                }
                return Form::Fix(self.make_fix(rule, edits, imports, None));
            }
            _ if pieces.len() == 1 => {
                let (acc_type, default_backend) = forms(own_quote);
                let text = match &pieces[0] {
                    Piece::Cuda => acc_type,
                    Piece::Nccl => default_backend,
                    Piece::Text(t) => format!("{t:?}"),
                };
                Edit::replace(site.range, text)
            }
            _ => {
                let quote = own_quote;
                let mut text = format!("f{quote}");
                for p in &pieces {
                    match p {
                        Piece::Cuda => text.push_str(&format!("{{{acc_type}}}")),
                        Piece::Nccl => text.push_str(&format!("{{{default_backend}}}")),
                        Piece::Text(t) => {
                            if t.contains(['\\', '\n', quote]) {
                                return Form::Kept(
                                    "the string holds escapes: rewrite it by hand".into(),
                                );
                            }
                            text.push_str(&t.replace('{', "{{").replace('}', "}}"));
                        }
                    }
                }
                text.push(quote);
                Edit::replace(site.range, text)
            }
        };
        Form::Fix(self.make_fix(rule, vec![edit], imports, None))
    }

    /// Where the string at `range` (ancestors `at`) sits.
    fn place(&self, at: &[AnyNodeRef<'a>], range: TextRange) -> Place<'a> {
        let mut child = range;
        let mut collection: Option<Collection<'a>> = None;
        for anc in at.iter().rev() {
            let elements: Option<(&'a [Expr], bool)> = match *anc {
                AnyNodeRef::ExprTuple(t) => Some((&t.elts, t.elts.len() == 1 && t.parenthesized)),
                AnyNodeRef::ExprList(l) => Some((&l.elts, false)),
                AnyNodeRef::ExprSet(s) => Some((&s.elts, false)),
                _ => None,
            };
            if let Some((elements, single_tuple)) = elements {
                if collection.is_some() {
                    return Place::Text;
                }
                collection = Some(Collection {
                    range: anc.range(),
                    elements,
                    single_tuple,
                });
                child = anc.range();
                continue;
            }
            match *anc {
                AnyNodeRef::ExprCompare(c) => {
                    if c.ops.len() != 1 {
                        return Place::Unextendable(
                            "a chained comparison: extend it to the TPU by hand",
                        );
                    }
                    let right = c.comparators[0].range() == child;
                    return match (c.ops[0], collection, right) {
                        (CmpOp::In | CmpOp::NotIn, Some(coll), true) => Place::Member(coll),
                        (CmpOp::Eq | CmpOp::NotEq, None, _) => Place::Equal(c),
                        (CmpOp::In | CmpOp::NotIn, None, false)
                            if matches!(c.comparators[0], Expr::Name(_) | Expr::Attribute(_)) =>
                        {
                            Place::Substring(c)
                        }
                        (CmpOp::In | CmpOp::NotIn, None, false) => Place::Unextendable(
                            "a substring test (`\"cuda\" in name`): extend it by hand (`or \"tpu\" in name`)",
                        ),
                        _ => Place::Unextendable(
                            "a comparison tpuport cannot extend: extend it to the TPU by hand",
                        ),
                    };
                }
                // `self.assertIn(x, ("cuda", "tpu"))`: the collection of an extended assertion.
                AnyNodeRef::ExprCall(c)
                    if collection.is_some()
                        && matches!(c.func.as_ref(), Expr::Attribute(a) if matches!(a.attr.as_str(), "assertIn" | "assertNotIn"))
                        && c.arguments.args.get(1).is_some_and(|a| a.range() == child) =>
                {
                    return collection.map_or(Place::Text, Place::Member);
                }
                AnyNodeRef::ExprCall(c) if collection.is_none() => {
                    let callee = self.callee_name(c);
                    let method = callee.rsplit('.').next().unwrap_or("");
                    if matches!(method, "assertEqual" | "assertNotEqual")
                        && matches!(c.func.as_ref(), Expr::Attribute(_))
                        && c.arguments.args.len() == 2
                        && c.arguments.keywords.is_empty()
                        && c.arguments.args.iter().any(|a| a.range() == child)
                    {
                        return Place::Asserted(c);
                    }
                    if matches!(method, "assertEqual" | "assertNotEqual" | "assert_equal") {
                        return Place::Unextendable(
                            "an assertion tpuport cannot extend to the TPU: extend it by hand (`assertIn(x, (\"cuda\", \"tpu\"))`)",
                        );
                    }
                    return self.device_slot(c, child);
                }
                AnyNodeRef::Keyword(_) | AnyNodeRef::Arguments(_) => {}
                _ => return Place::Text,
            }
        }
        Place::Text
    }

    /// A string given to a call: the device a torch API takes, else a string.
    fn device_slot(&self, c: &'a ast::ExprCall, child: TextRange) -> Place<'a> {
        let callee = self.callee_name(c);
        let keyword = c
            .arguments
            .keywords
            .iter()
            .find(|k| k.value.range() == child)
            .and_then(|k| k.arg.as_ref().map(|a| a.as_str()));
        let position = c.arguments.args.iter().position(|a| a.range() == child);
        let nargs = c.arguments.args.len() + c.arguments.keywords.len();
        let torch = callee.starts_with("torch.") && !callee.starts_with("torch.cuda.");
        match (callee.as_str(), keyword, position) {
            ("torch.device", Some("type"), _) | ("torch.device", None, Some(0)) if nargs == 1 => {
                Place::Device(Some(c))
            }
            (".to", Some("device"), _) | (".to", None, Some(0)) => Place::Device(None),
            (_, Some("device" | "map_location"), _) if torch => Place::Device(None),
            ("torch.load", None, Some(1))
            | ("torch.set_default_device", None, Some(0))
            | ("torch.Generator", None, Some(0))
            | ("torch.get_device_module", None, Some(0)) => Place::Device(None),
            _ => Place::Text,
        }
    }
}

/// Does the collection element name the TPU (`"tpu"`, `"tpu:0"`, `"tpu_dist"`)?
impl Checker<'_> {
    /// `"cuda" in device or "tpu" in device` (`not in`: `and`): the substring test names the
    /// TPU already (a port's own extension).
    fn substring_extended(&self, at: &[AnyNodeRef<'_>], c: &ast::ExprCompare) -> bool {
        let Some(AnyNodeRef::ExprBoolOp(b)) = at.iter().rev().find(|n| n.range() != c.range())
        else {
            return false;
        };
        let join = match c.ops[0] {
            ast::CmpOp::In => ast::BoolOp::Or,
            _ => ast::BoolOp::And,
        };
        let name = self.text(c.comparators[0].range());
        b.op == join
            && b.values.iter().any(|v| {
                matches!(v, Expr::Compare(o)
                    if o.ops.as_ref() == c.ops.as_ref()
                        && names_tpu(&o.left)
                        && o.comparators.len() == 1
                        && self.text(o.comparators[0].range()) == name)
            })
    }
}

pub(super) fn names_tpu(e: &Expr) -> bool {
    matches!(e, Expr::StringLiteral(s) if s.value.to_str().starts_with("tpu"))
}

/// The other quote character.
fn other_quote(q: char) -> char {
    if q == '"' { '\'' } else { '"' }
}

/// The current accelerator's type as a string, `acc` its spelling: `acc.type` where an
/// accelerator is known to be available, else with CUDA's name where there is none (a CPU-only
/// torch build), as the original string named it. `q` quotes the inner strings.
fn accelerator_type(acc: &str, available: bool, q: char) -> String {
    if available {
        format!("{acc}.type")
    } else {
        format!("getattr({acc}, {q}type{q}, {q}cuda{q})")
    }
}

/// The quote character of a string literal's source.
pub(super) fn quote_of(src: &str) -> char {
    src.chars()
        .rev()
        .find(|c| *c == '"' || *c == '\'')
        .unwrap_or('"')
}

enum Piece {
    Cuda,
    Nccl,
    Text(String),
}

/// `"cuda:{}"` → [Cuda, Text(":{}")]; with `backend`, `"cpu:gloo,cuda:nccl"` → [Text("cpu:gloo,"),
/// Cuda, Text(":"), Nccl].
fn cuda_pieces(text: &str, backend: bool) -> Vec<Piece> {
    let mut out = vec![];
    let mut rest = text;
    let mut plain = String::new();
    while !rest.is_empty() {
        let lower = rest.get(..4).map(|s| s.to_ascii_lowercase());
        match lower.as_deref() {
            Some("cuda") if !backend || rest[4..].starts_with(":nccl") || rest.len() == 4 => {
                if !plain.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut plain)));
                }
                out.push(Piece::Cuda);
                rest = &rest[4..];
            }
            Some("nccl") if backend => {
                if !plain.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut plain)));
                }
                out.push(Piece::Nccl);
                rest = &rest[4..];
            }
            _ => {
                let c = rest.chars().next().unwrap_or(' ');
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !plain.is_empty() {
        out.push(Piece::Text(plain));
    }
    out
}
