//! Modules that drive another runtime: ONNX Runtime, ExecuTorch, TensorRT, OpenVINO, TVM,
//! Core ML. There a `"cuda"` is most often that runtime's backend (an execution provider for
//! IO binding, the ExecuTorch CUDA delegate's lowering limits), not where this program's
//! PyTorch tensors live, and the runtime has no TPU backend to rename it to. The module's
//! device and stream fixes become unsafe, with a note naming the runtime.

use std::sync::LazyLock;

use regex::Regex;

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::RuleSet;

/// An import of a runtime (at any indentation: runtimes are often imported lazily), or the
/// availability probe a library wraps it in (`is_onnxruntime_available()`).
static RUNTIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^[ \t]*(?:from|import)[ \t]+(onnxruntime|executorch|tensorrt|torch_tensorrt|openvino|tvm|coremltools|tflite_runtime)\b|\bis_(onnxruntime|executorch|openvino|tensorrt)_available\b",
    )
    .unwrap()
});

/// The runtime this module drives, if any.
pub(in crate::port::rewrite) fn runtime_of(src: &str) -> Option<&str> {
    // Every alternative names one of these: the substring tests spare most modules the
    // anchored pattern, which has no literal for the regex engine to skip ahead with.
    const NAMES: [&str; 7] = [
        "onnxruntime",
        "executorch",
        "tensorrt",
        "openvino",
        "tvm",
        "coremltools",
        "tflite_runtime",
    ];
    if !NAMES.iter().any(|n| src.contains(n)) {
        return None;
    }
    let c = RUNTIME.captures(src)?;
    c.get(1).or_else(|| c.get(2)).map(|m| m.as_str())
}

/// Make the module's safe DEV/STM fixes unsafe when it drives another runtime.
pub(in crate::port::rewrite) fn keep_runtime_devices(
    src: &str,
    rules: &RuleSet,
    diags: &mut [Diagnostic],
) {
    let devices = |d: &Diagnostic| matches!(rules.rules[d.rule].family.as_str(), "DEV" | "STM");
    if !diags.iter().any(|d| devices(d) && d.fix.is_some()) {
        return;
    }
    let Some(runtime) = runtime_of(src) else {
        return;
    };
    let note = format!(
        "unsafe: this module drives another runtime (`{runtime}`), where a CUDA device is often \
         that runtime's backend (an execution provider, a delegate) rather than this program's \
         tensors; the runtime has no TPU backend: check that this device is PyTorch's"
    );
    super::scope::keep_module_devices(rules, &note, diags);
}

#[cfg(test)]
mod tests {
    use super::runtime_of;
    use crate::port::rewrite::migrated as migrate;

    #[test]
    fn devices_of_modules_driving_other_runtimes_are_unsafe() {
        let src = "from .utils import is_onnxruntime_available\n\n\ndef bind(device):\n    on_gpu = device.type == \"cuda\"\n    return on_gpu\n";
        assert_eq!(runtime_of(src), Some("onnxruntime"));
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("device.type == \"tpu\""));
        let lazy =
            "def export(m):\n    from executorch.exir import to_edge\n    return m.to(\"cuda\")\n";
        assert_eq!(runtime_of(lazy), Some("executorch"));
        assert_eq!(migrate(lazy, false), lazy);
        let plain = "def f(m):\n    return m.to(\"cuda\")\n";
        assert_eq!(runtime_of(plain), None);
        assert!(migrate(plain, false).contains("m.to(\"tpu\")"));
    }
}
