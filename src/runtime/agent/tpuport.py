"""Helpers a script can call while it runs under ``tpuport run``.

    import tpuport
    for batch in loader:
        out = model(batch)
        tpuport.step(samples=len(batch))     # marks a step (inference loops, no optimizer)

    tpuport.report(tokens=4096, loss=loss.item())  # attaches numbers to the next step

Outside ``tpuport run`` both calls do nothing, so the script runs unchanged with plain Python
(put this module on the path, or guard the import).
"""


def _agent():
    try:
        from tpuport_agent import agent
    except ImportError:
        return None
    return agent()


def step(samples=None, tokens=None, **metrics):
    """End the current step (use in loops without an optimizer)."""
    a = _agent()
    if a is not None:
        a.marker(samples=samples, tokens=tokens, **metrics)


def report(samples=None, tokens=None, **metrics):
    """Attach samples/tokens (and other numbers) to the step that is running."""
    a = _agent()
    if a is not None:
        a.report(samples=samples, tokens=tokens, **metrics)
