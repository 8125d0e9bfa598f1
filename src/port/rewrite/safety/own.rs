//! Attributes the program defines itself. An attribute rule is about PyTorch's attribute of
//! that name (`Tensor.is_cuda`); a class that keeps its own flag under the same name
//! (`self.is_cuda = torch.cuda.is_available()`, a class attribute or property `is_cuda`), an
//! object the program sets it on (`cfg.is_cuda = True`) or an argparse flag (`--is_cuda`) is
//! the program's own: renaming its reads to `is_tpu` reads an attribute nobody set.
//!
//! Methods too: a class of the file that is not a module and defines its own `cuda()` (an
//! alias-method sampler keeping its tables on the GPU) has no `.to()`, so `x.cuda()` on one of
//! its objects (a name or attribute the file assigns from a call of the class) would raise
//! AttributeError as `.to(device)` on every machine: that fix is unsafe
//! ([`Checker::own_cuda_method`]).

use std::collections::{HashMap, HashSet};

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};

use crate::port::rewrite::Checker;
use crate::port::rewrite::lints::walk;
use crate::port::semantic::values::{self, Origin};

/// Where the program defines one attribute name.
#[derive(Debug, Default)]
pub(in crate::port::rewrite) struct OwnAttribute {
    /// Classes of this file that define it: in their body (`is_cuda = False`, `is_cuda: bool`,
    /// `def is_cuda(self)`) or on `self` in a method (`self.is_cuda = ...`).
    classes: HashSet<String>,
    /// Other receivers it is set on, by their text (`cfg` for `cfg.is_cuda = True`).
    receivers: HashSet<String>,
    /// An argparse flag of that name (`--is_cuda`, `--is-cuda`, `dest="is_cuda"`).
    flag: bool,
}

/// One place an attribute is defined.
enum Defined {
    Class(String),
    Receiver(String),
    Flag,
}

/// The attribute names of `names` this module defines, each with where.
pub(in crate::port::rewrite) fn own_attributes(
    body: &[Stmt],
    names: &[&str],
) -> HashMap<String, OwnAttribute> {
    let mut out: HashMap<String, OwnAttribute> = HashMap::new();
    let mut add = |name: &str, what: Defined| {
        if !names.contains(&name) {
            return;
        }
        let e = out.entry(name.to_string()).or_default();
        match what {
            Defined::Class(c) => e.classes.insert(c),
            Defined::Receiver(r) => e.receivers.insert(r),
            Defined::Flag => {
                e.flag = true;
                true
            }
        };
    };
    walk(body, true, &mut |node, stack| {
        let class = stack.iter().rev().find_map(|a| match a {
            AnyNodeRef::StmtClassDef(c) => Some(c.name.as_str()),
            _ => None,
        });
        match node {
            // A store `x.name = ...` (assignment, augmented, annotated, loop or `with` target).
            AnyNodeRef::ExprAttribute(a) if a.ctx == ast::ExprContext::Store => {
                let what = match (a.value.as_ref(), class) {
                    (Expr::Name(n), Some(c)) if matches!(n.id.as_str(), "self" | "cls") => {
                        Defined::Class(c.to_string())
                    }
                    (v, _) => Defined::Receiver(receiver_key(v)),
                };
                add(a.attr.as_str(), what);
            }
            // In a class body: `name = ...`, `name: T`, `def name(self)`.
            AnyNodeRef::StmtClassDef(c) => {
                for s in &c.body {
                    let defined: Vec<&str> = match s {
                        Stmt::Assign(a) => a
                            .targets
                            .iter()
                            .filter_map(|t| t.as_name_expr().map(|n| n.id.as_str()))
                            .collect(),
                        Stmt::AnnAssign(a) => a
                            .target
                            .as_name_expr()
                            .map(|n| n.id.as_str())
                            .into_iter()
                            .collect(),
                        Stmt::FunctionDef(f) => vec![f.name.as_str()],
                        _ => vec![],
                    };
                    for d in defined {
                        add(d, Defined::Class(c.name.to_string()));
                    }
                }
            }
            // `parser.add_argument("--is_cuda", ...)`, `setattr(x, "is_cuda", v)`.
            AnyNodeRef::ExprCall(call) => {
                let method = match call.func.as_ref() {
                    Expr::Attribute(a) => a.attr.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => return,
                };
                let strings = || {
                    call.arguments
                        .args
                        .iter()
                        .filter_map(|a| a.as_string_literal_expr())
                        .map(|s| s.value.to_str())
                };
                match method {
                    "add_argument" => {
                        let dests = strings()
                            .filter_map(|s| s.strip_prefix("--"))
                            .map(|s| s.replace('-', "_"))
                            .chain(
                                call.arguments
                                    .find_keyword("dest")
                                    .and_then(|k| k.value.as_string_literal_expr())
                                    .map(|s| s.value.to_str().to_string()),
                            )
                            .collect::<Vec<_>>();
                        for d in dests {
                            add(&d, Defined::Flag);
                        }
                    }
                    "setattr" => {
                        let value = call.arguments.args.first();
                        if let (Some(name), Some(v)) = (strings().next(), value) {
                            add(name, Defined::Receiver(receiver_key(v)));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    });
    out
}

/// A receiver by its text, without spaces (`self.cfg`, `args`).
fn receiver_key(e: &Expr) -> String {
    let mut s = String::new();
    let mut cur = e;
    let mut parts = vec![];
    loop {
        match cur {
            Expr::Attribute(a) => {
                parts.push(a.attr.as_str());
                cur = &a.value;
            }
            Expr::Name(n) => {
                parts.push(n.id.as_str());
                break;
            }
            _ => return String::new(),
        }
    }
    for (i, p) in parts.iter().rev().enumerate() {
        if i > 0 {
            s.push('.');
        }
        s.push_str(p);
    }
    s
}

impl<'a> Checker<'a> {
    /// Is `receiver.name` (a read) an attribute the program defines itself rather than
    /// PyTorch's? A receiver known to be a tensor is PyTorch's whatever else the program does.
    pub(in crate::port::rewrite) fn own_attribute(&self, name: &str, receiver: &'a Expr) -> bool {
        let table = self.own_attributes.get_or_init(|| {
            let names: Vec<&str> = self.index.attributes.keys().map(|k| k.as_str()).collect();
            own_attributes(&self.parsed.module.body, &names)
        });
        let Some(own) = table.get(name) else {
            return false;
        };
        if values::is_tensor_or_module(self.sem, &self.parsed.module, receiver) {
            return false;
        }
        let key = receiver_key(receiver);
        if !key.is_empty() && own.receivers.contains(&key) {
            return true;
        }
        // An instance of such a class (`Runner().is_cuda`, `r = Runner()`, `r: Runner`), or an
        // argparse namespace.
        let class_of = |e: &Expr| match e {
            Expr::Call(c) => c.func.as_name_expr().map(|f| f.id.to_string()),
            Expr::Name(f) => Some(f.id.to_string()),
            Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
            _ => None,
        };
        let Expr::Name(n) = receiver else {
            return class_of(receiver).is_some_and(|c| own.classes.contains(&c));
        };
        if matches!(n.id.as_str(), "self" | "cls") {
            let class = self.stack.iter().rev().find_map(|a| match a {
                AnyNodeRef::StmtClassDef(c) => Some(c.name.as_str()),
                _ => None,
            });
            return class.is_some_and(|c| own.classes.contains(c));
        }
        let class = match values::origin(self.sem, &self.parsed.module, n) {
            Origin::Annotated(a) => class_of(a),
            Origin::Value(v) => class_of(v),
            _ => None,
        };
        class.is_some_and(|c| own.classes.contains(&c)) || (own.flag && self.is_namespace(n))
    }

    /// Does `n` hold parsed command-line arguments (`args = parser.parse_args()`, or a name
    /// programs give them: `args`, `opt`, `flags`, `cfg`)?
    /// Whether `receiver` holds an object of a class of this module that is not a `Module`
    /// (nor anything else with `.to()`) and defines its own `cuda` method: that class's name.
    /// The receiver counts when the module assigns it from a call of the class
    /// (`self.multinomial = AliasMethod(probs)`).
    pub(in crate::port::rewrite) fn own_cuda_method(&self, receiver: &Expr) -> Option<&'a str> {
        if !self.src.contains("def cuda(") {
            return None;
        }
        let mut classes: Vec<&'a str> = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::StmtClassDef(c) = node else {
                return;
            };
            let defines = |name: &str| {
                c.body
                    .iter()
                    .any(|s| matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == name))
            };
            let module_like = c.arguments.as_ref().is_some_and(|a| {
                a.args.iter().any(|b| {
                    let t = self.text(ruff_text_size::Ranged::range(b));
                    t.contains("Module") || t.contains("Tensor") || t.contains("Parameter")
                })
            });
            if defines("cuda") && !defines("to") && !module_like {
                classes.push(c.name.as_str());
            }
        });
        if classes.is_empty() {
            return None;
        }
        let wanted = self.text(ruff_text_size::Ranged::range(receiver));
        let mut found = None;
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::StmtAssign(a) = node else {
                return;
            };
            let Expr::Call(c) = a.value.as_ref() else {
                return;
            };
            let Expr::Name(n) = c.func.as_ref() else {
                return;
            };
            if let Some(class) = classes.iter().find(|k| **k == n.id.as_str())
                && a.targets
                    .iter()
                    .any(|t| self.text(ruff_text_size::Ranged::range(t)) == wanted)
            {
                found = Some(*class);
            }
        });
        found
    }

    fn is_namespace(&self, n: &ast::ExprName) -> bool {
        const NAMES: [&str; 9] = [
            "args", "opt", "opts", "flags", "FLAGS", "cfg", "config", "options", "hparams",
        ];
        if NAMES.contains(&n.id.as_str()) {
            return true;
        }
        let Origin::Value(mut v) = values::origin(self.sem, &self.parsed.module, n) else {
            return false;
        };
        if let Expr::Subscript(s) = v {
            v = &s.value;
        }
        matches!(v, Expr::Call(c) if matches!(c.func.as_ref(),
            Expr::Attribute(a) if matches!(a.attr.as_str(), "parse_args" | "parse_known_args")))
    }
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated;

    /// The reads of `is_cuda` left as they were after `migrate --unsafe-fixes`.
    fn kept(src: &str) -> Vec<String> {
        let out = migrated(src, true);
        out.lines()
            .filter(|l| l.contains(".is_cuda") && !l.contains("= "))
            .map(|l| l.trim().to_string())
            .collect()
    }

    #[test]
    fn a_class_with_its_own_cuda_method_makes_cuda_calls_unsafe() {
        let src = "import torch\n\n\nclass AliasMethod(object):\n    def __init__(self, p):\n        self.prob = p\n\n    def cuda(self):\n        self.prob = self.prob.cuda()\n\n\nclass Memory(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.multinomial = AliasMethod(torch.ones(3))\n        self.multinomial.cuda()\n";
        let out = crate::port::test_support::migrate("DEV006", src, None);
        assert!(out.output.is_none(), "{:?}", out.output);
        assert!(out.diagnostics.iter().any(|d| {
            d.note
                .as_deref()
                .is_some_and(|n| n.contains("class `AliasMethod`"))
        }));
        // Other receivers keep their fix; so does a module subclass that overrides cuda().
        let other = src.replace("self.multinomial.cuda()", "self.table.cuda()");
        assert!(
            crate::port::test_support::migrate("DEV006", &other, None)
                .output
                .is_some()
        );
        let module = src.replace(
            "class AliasMethod(object):",
            "class AliasMethod(torch.nn.Module):",
        );
        assert!(
            crate::port::test_support::migrate("DEV006", &module, None)
                .output
                .is_some()
        );
    }

    #[test]
    fn a_class_flag_named_is_cuda_is_the_programs_own() {
        let src = "import torch\n\n\nclass Runner:\n    def __init__(self, model):\n        self.is_cuda = torch.cuda.is_available()\n\n    def step(self, x: torch.Tensor):\n        if self.is_cuda:\n            return x\n        return self.weight.is_cuda\n\n    def on(self, x: torch.Tensor):\n        return x.is_cuda\n\n\ndef f(r: Runner, s):\n    return r.is_cuda, Runner().is_cuda, s.is_cuda\n";
        let out = migrated(src, true);
        // The class's own flag keeps its name, on `self` and on instances of the class.
        assert!(out.contains("if self.is_cuda:\n"), "{out}");
        assert!(out.contains("return x.is_tpu"), "{out}");
        assert!(out.contains("return r.is_cuda, "), "{out}");
        // Another object (`self.weight`, an unknown `s`) may be a tensor: its fix stays (unsafe).
        assert!(out.contains("return self.weight.is_tpu"), "{out}");
        assert!(out.contains("s.is_tpu"), "{out}");
    }

    #[test]
    fn class_attributes_flags_and_set_objects_are_the_programs_own() {
        let class_attr = "import torch\n\nclass Net(torch.nn.Module):\n    is_cuda = False\n\n    def forward(self, x: torch.Tensor):\n        if not self.is_cuda:\n            return x\n\n    def on(self, x: torch.Tensor):\n        return x.is_cuda\n";
        assert_eq!(kept(class_attr), ["if not self.is_cuda:"]);
        let property = "import torch\n\nclass Cfg:\n    @property\n    def is_cuda(self):\n        return torch.cuda.is_available()\n\n    def dev(self):\n        return 1 if self.is_cuda else 0\n";
        assert_eq!(kept(property), ["return 1 if self.is_cuda else 0"]);
        let flag = "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument(\"--is-cuda\", action=\"store_true\")\nargs = p.parse_args()\nif args.is_cuda:\n    print(1)\n";
        assert_eq!(kept(flag), ["if args.is_cuda:"]);
        let set = "import torch\ncfg = load()\ncfg.is_cuda = torch.cuda.is_available()\nif cfg.is_cuda:\n    print(1)\n";
        assert_eq!(kept(set), ["if cfg.is_cuda:"]);
        // Without a definition of its own, `cfg.is_cuda` may be a tensor's: unsafe fix as before.
        let unknown = "import torch\ncfg = load()\nif cfg.is_cuda:\n    print(1)\n";
        assert!(kept(unknown).is_empty());
    }
}
