"""The end of a script under `tpuport run` (tests/integration/run.rs): its atexit handlers run
and see its globals, then its objects are freed while the interpreter is still whole (a gloo
process group held by a DDP model aborts the process if it is freed during finalization)."""
import atexit
import sys


class Held:
    def __del__(self):
        sys.stderr.write("released, interpreter finalizing: %s\n" % sys.is_finalizing())


def helper():
    return held  # a function defined here: the script's globals are a reference cycle


held = Held()
atexit.register(lambda: sys.stderr.write("atexit sees %s\n" % type(held).__name__))
print("done")
