//! Lints about the model and its data as a whole: convolutional networks in channels-first
//! layout (PERF001: found here, reported once per program by `programs.rs`), float16 casts
//! (AMP009), and padding each batch to its longest sequence (DYN005).

use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::{Found, walk};
use crate::port::rewrite::Checker;

const CONVS: [&str; 8] = [
    "torch.nn.Conv2d",
    "torch.nn.Conv3d",
    "torch.nn.ConvTranspose2d",
    "torch.nn.ConvTranspose3d",
    "torch.nn.LazyConv2d",
    "torch.nn.LazyConv3d",
    "torch.nn.modules.conv.Conv2d",
    "torch.nn.modules.conv.Conv3d",
];

/// The last names of [`CONVS`], and timm's model factory.
const CONV_NAMES: [&str; 7] = [
    "Conv2d",
    "Conv3d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "LazyConv2d",
    "LazyConv3d",
    "create_model",
];

/// torchvision functions under `torchvision.models` that are not model builders.
const NOT_BUILDERS: [&str; 4] = [
    "get_weight",
    "get_model_weights",
    "list_models",
    "get_model_builder",
];

const HALF: [&str; 2] = ["torch.float16", "torch.half"];

const AUTOCASTS: [&str; 4] = [
    "torch.autocast",
    "torch.amp.autocast",
    "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast",
];

/// The convolutional networks built here (classes constructing `nn.Conv2d`/`Conv3d`, or
/// torchvision/timm models): where the first is, and what each is (`class `Net``), when the file
/// never mentions `channels_last`. `programs.rs` reports them once per program.
pub(super) fn conv_places(c: &Checker) -> Option<(TextRange, Vec<String>)> {
    if c.src.contains("channels_last")
        || !(c.src.contains("Conv") || c.src.contains("torchvision") || c.src.contains("timm"))
    {
        return None;
    }
    let torchvision = c.src.contains("torchvision");
    let mut convs = 0;
    // (where, what) per class or model, in source order.
    let mut places: Vec<(TextRange, String)> = vec![];
    walk(&c.parsed.module.body, true, &mut |node, stack| {
        let AnyNodeRef::ExprCall(call) = node else {
            return;
        };
        // Resolve only what can match: a conv class by its last name, `timm.create_model`, and
        // (in files that mention torchvision) any imported call.
        let q = if torchvision {
            c.callee(call)
        } else {
            c.callee_named(call, &CONV_NAMES)
        };
        let Some(q) = q else { return };
        let what = if CONVS.contains(&q.as_str()) {
            convs += 1;
            let class = stack.iter().rev().find_map(|a| match a {
                AnyNodeRef::StmtClassDef(k) => Some(k.name.as_str()),
                _ => None,
            });
            match class {
                Some(k) => format!("class `{k}`"),
                None => "module level".to_string(),
            }
        } else if let Some(f) = q.strip_prefix("torchvision.models.")
            && !f.contains('.')
            && f.starts_with(|ch: char| ch.is_ascii_lowercase())
            && !NOT_BUILDERS.contains(&f)
        {
            format!("`{q}`")
        } else if q == "timm.create_model" {
            format!("`{q}`")
        } else {
            return;
        };
        if !places.iter().any(|(_, w)| *w == what) {
            places.push((call.range(), what));
        }
    });
    // One convolution (a ViT's patch embedding, a depthwise conv in a text model) is not a CNN:
    // a convolutional network builds several, or comes from torchvision/timm.
    if convs < 2 && !places.iter().any(|(_, w)| w.starts_with('`')) {
        return None;
    }
    let range = places.first()?.0;
    Some((range, places.into_iter().map(|(_, w)| w).collect()))
}

/// `.half()`, `.to(torch.float16)`, `dtype=torch.float16`, `torch_dtype="float16"` (autocast
/// calls are the AMP rules').
pub(super) fn half_casts(c: &Checker) -> Vec<Found> {
    let is_half = |e: &Expr| match e {
        Expr::Attribute(_) | Expr::Name(_) => c
            .sem
            .qualified_name(e)
            .is_some_and(|q| HALF.contains(&q.as_str())),
        _ => false,
    };
    let mut out = vec![];
    walk(&c.parsed.module.body, true, &mut |node, _| {
        let AnyNodeRef::ExprCall(call) = node else {
            return;
        };
        let args = &call.arguments;
        match c.method_name(call) {
            Some("half") if args.args.is_empty() && args.keywords.is_empty() => {
                out.push(Found::at(call.range()));
                return;
            }
            Some("to" | "type") if args.args.iter().any(is_half) => {
                out.push(Found::at(call.range()));
                return;
            }
            _ => {}
        }
        let autocast = || {
            c.callee_named(call, &["autocast"])
                .is_some_and(|q| AUTOCASTS.contains(&q.as_str()))
        };
        for kw in &args.keywords {
            let Some(name) = kw.arg.as_ref().map(|a| a.as_str()) else {
                continue;
            };
            let half = match (name, &kw.value) {
                ("dtype" | "torch_dtype", v) if is_half(v) => true,
                ("torch_dtype", Expr::StringLiteral(s)) => {
                    matches!(s.value.to_str(), "float16" | "fp16" | "half")
                }
                _ => false,
            };
            if half && !autocast() {
                out.push(Found::at(kw.range()));
            }
        }
    });
    out
}

/// `pad_sequence(...)`, tokenizer/collator calls with `padding=True`/`"longest"`, and
/// `DataCollatorWithPadding` left at its default.
pub(super) fn variable_padding(c: &Checker) -> Vec<Found> {
    let mut out = vec![];
    walk(&c.parsed.module.body, true, &mut |node, _| {
        let AnyNodeRef::ExprCall(call) = node else {
            return;
        };
        let q = c.callee_named(call, &["pad_sequence", "DataCollatorWithPadding"]);
        if q.as_deref() == Some("torch.nn.utils.rnn.pad_sequence") {
            out.push(Found::at(call.range()));
            return;
        }
        let padding = call.arguments.find_keyword("padding");
        if q.as_deref()
            .is_some_and(|q| q.ends_with(".DataCollatorWithPadding"))
            && padding.is_none()
        {
            out.push(Found::at(call.range()));
            return;
        }
        let Some(kw) = padding else { return };
        let longest = match &kw.value {
            Expr::BooleanLiteral(b) => b.value,
            Expr::StringLiteral(s) => s.value.to_str() == "longest",
            _ => false,
        };
        let callee = c.text(call.func.range()).to_ascii_lowercase();
        let text_side = call.arguments.find_keyword("return_tensors").is_some()
            || ["token", "processor", "collat"]
                .iter()
                .any(|w| callee.contains(w))
            || callee.ends_with(".pad");
        if longest && text_side {
            out.push(Found::at(kw.range()));
        }
    });
    out
}
