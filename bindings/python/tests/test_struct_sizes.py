"""The binding's structs at their sizes: every mirror is one the library
reads and writes as it is; a mirror one field longer than the library's
(a binding newer than the library) is refused, the message naming the
struct, both sizes and the library's version; and the layout of a host
built against loom.h before its structs carried their size (the one the
old compute_on broke) is refused, not misread. How a mirror shorter than
the library's (a host of an older 1.x) is read, with the defaults for the
fields it lacks, is tests/test_struct_size.c's, on a struct grown past
its first version."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_uint64, c_void_p, sizeof

import pytest

import loom
from loom import _structs as S
from loom._lib import check, lib

PARAMS = {
    "loom_runtime_params": S.RuntimeParams,
    "loom_model_params": S.ModelParams,
    "loom_context_params": S.ContextParams,
    "loom_sampler_params": S.SamplerParams,
    "loom_generator_params": S.GeneratorParams,
}


@pytest.mark.parametrize("name", PARAMS)
def test_every_mirror_is_the_librarys_size(name):
    struct = PARAMS[name]
    p = struct()
    check(getattr(lib(), f"{name}_init")(byref(p), sizeof(p)), name)
    assert p.size == sizeof(struct)


def newer(struct: type) -> type:
    """struct as a newer loom.h would have it: a field appended."""
    return type(f"Newer{struct.__name__}", (ctypes.Structure,), {"_fields_": struct._fields_ + [("added", c_uint64)]})


def assert_refused(e: pytest.ExceptionInfo, name: str, host: int, lib_size: int) -> None:
    assert e.value.status == loom.Status.INVALID_ARGUMENT
    for part in (name, f"{host} bytes", f"{lib_size} bytes", loom.version()):
        assert part in e.value.message, (part, e.value.message)


@pytest.mark.parametrize("name", PARAMS)
def test_a_newer_mirror_is_refused_by_name(name):
    big = newer(PARAMS[name])
    p = big()
    with pytest.raises(loom.LoomError) as e:
        check(getattr(lib(), f"{name}_init")(ctypes.cast(byref(p), POINTER(PARAMS[name])), sizeof(p)), name)
    assert_refused(e, name, sizeof(big), sizeof(PARAMS[name]))
    assert p.size == sizeof(big) and p.added == 0


def test_a_newer_runtime_params_is_refused_by_create():
    big = newer(S.RuntimeParams)
    p = big()
    lib().loom_runtime_params_init(ctypes.cast(byref(p), POINTER(S.RuntimeParams)), sizeof(p))
    handle = c_void_p()
    with pytest.raises(loom.LoomError) as e:
        check(lib().loom_runtime_create(ctypes.cast(byref(p), POINTER(S.RuntimeParams)), byref(handle)),
              "loom_runtime_create")
    assert_refused(e, "loom_runtime_params", sizeof(big), sizeof(S.RuntimeParams))
    assert handle.value is None


def test_a_newer_out_struct_is_refused_and_left_alone(runtime):
    big = newer(S.PluginInfo)
    info = big()
    ctypes.memset(byref(info), 0xA5, sizeof(info))
    with pytest.raises(loom.LoomError) as e:
        check(lib().loom_runtime_plugin_info_sized(runtime.handle, 0, ctypes.cast(byref(info), POINTER(S.PluginInfo)),
                                                   sizeof(info)), "loom_runtime_plugin_info")
    assert_refused(e, "loom_plugin_info", sizeof(big), sizeof(S.PluginInfo))
    assert bytes(info) == b"\xa5" * sizeof(info)
    # At the mirror's size, written up to its end and no further.
    buf = (ctypes.c_ubyte * (sizeof(S.PluginInfo) + 16))()
    ctypes.memset(buf, 0xA5, sizeof(buf))
    check(lib().loom_runtime_plugin_info_sized(runtime.handle, 0, ctypes.cast(buf, POINTER(S.PluginInfo)),
                                               sizeof(S.PluginInfo)), "loom_runtime_plugin_info")
    assert bytes(buf)[sizeof(S.PluginInfo):] == b"\xa5" * 16
    assert ctypes.cast(buf, POINTER(S.PluginInfo)).contents.path


class UnsizedRuntimeParams(ctypes.Structure):
    """loom_runtime_params as loom.h had it before 1.0: no size, no
    compute_on."""

    _fields_ = [(n, t) for n, t in S.RuntimeParams._fields_ if n not in ("size", "compute_on")]


def test_a_host_of_the_unsized_layout_is_refused_not_misread():
    p = UnsizedRuntimeParams(n_threads=1, log_level=0)
    handle = c_void_p()
    with pytest.raises(loom.LoomError) as e:
        check(lib().loom_runtime_create(ctypes.cast(byref(p), POINTER(S.RuntimeParams)), byref(handle)),
              "loom_runtime_create")
    assert e.value.status == loom.Status.INVALID_ARGUMENT
    assert "loom_runtime_params of 0 bytes" in e.value.message and "smaller than any version" in e.value.message
    assert handle.value is None
