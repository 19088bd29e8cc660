"""Rows of floats as numpy arrays when numpy is installed, lists otherwise."""

from __future__ import annotations

import ctypes
from typing import Any

try:
    import numpy
except ImportError:  # numpy is optional
    numpy = None  # type: ignore[assignment]


def floats(data: Any, n: int) -> Any:
    """A copy of n floats at data (a ctypes float pointer or array): a
    numpy.ndarray of float32 with numpy, else a list of float."""
    if numpy is not None:
        return numpy.ctypeslib.as_array(ctypes.cast(data, ctypes.POINTER(ctypes.c_float)), shape=(n,)).copy()
    return [float(x) for x in ctypes.cast(data, ctypes.POINTER(ctypes.c_float))[:n]]
