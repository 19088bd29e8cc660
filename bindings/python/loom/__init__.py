"""loom: LLM inference in C, from Python.

    import loom

    with loom.Model("stories260K-f32.gguf") as model, model.context(n_ctx=256) as ctx:
        for step in ctx.generate("Once upon a time", max_tokens=32, sampling=loom.GREEDY):
            print(step.text, end="", flush=True)

A thin layer over libloom's C API (include/loom.h) through ctypes: the
library is found as load_library() says. ctypes releases the GIL around
every call into libloom, so contexts of one model decode on several
threads at once. Errors are LoomError, carrying loom_last_error()'s
message; logits and embeddings are numpy arrays when numpy is installed.
"""

from ._lib import library_path, load_library
from .context import Context
from .errors import LoomError, Status
from .generation import GREEDY, Sampling, Step
from .model import Model
from .runtime import ComputeOn, DeviceInfo, PluginInfo, Runtime


def version() -> str:
    """The loaded libloom's version ("1.0.0")."""
    from ._lib import lib

    return lib().loom_version().decode()


__all__ = [
    "GREEDY",
    "ComputeOn",
    "Context",
    "DeviceInfo",
    "LoomError",
    "Model",
    "PluginInfo",
    "Runtime",
    "Sampling",
    "Status",
    "Step",
    "library_path",
    "load_library",
    "version",
]
