"""``torch.tpu.optimizers`` on the sim target.

TorchTPU's optimizers are not ``torch.optim`` ones: they are stateless functional optimizers
(``Optimizer(lr, weight_decay)``, ``init_param_group(params_or_module)`` returns a ParamGroup,
``step(param_group, grads)`` returns the updated one) meant to be traced whole with
``SingleTraceTrainer``. The sim does not emulate them: a script that uses them gets this error
on the sim (TorchTPU's own code runs them on xla-cpu and on a TPU), rather than ``torch.optim``
classes that a TPU would not give it.
"""

_TEXT = ("torch.tpu.optimizers.%s is one of TorchTPU's stateless functional optimizers (init_param_group(), "
         "step(param_group, grads)), which the tpuport sim target does not emulate; run the script on TorchTPU "
         "itself: tpuport run --target xla-cpu (Linux x86_64) or on a TPU")


def _not_emulated(name):
    class NotEmulated:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(_TEXT % name)

    NotEmulated.__name__ = NotEmulated.__qualname__ = name
    return NotEmulated


Optimizer = _not_emulated("Optimizer")
AdamW = _not_emulated("AdamW")
Sgd = _not_emulated("Sgd")
Muon = _not_emulated("Muon")
SingleTraceTrainer = _not_emulated("SingleTraceTrainer")
