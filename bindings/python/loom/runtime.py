"""Runtime: plugins.yaml, the plugins, the backend in use."""

from __future__ import annotations

import ctypes
import enum
import os
import weakref
from dataclasses import dataclass

from . import _structs as S
from ._lib import check, defaults, lib
from ._owned import Owned


class ComputeOn(enum.IntEnum):
    """Where the backends a runtime may choose compute."""

    ANY = 0
    HOST = 1
    DEVICE = 2


@dataclass(frozen=True)
class DeviceInfo:
    """The device a GPU backend computes on."""

    name: str
    memory_total: int  # bytes
    memory_free: int  # bytes free now


@dataclass(frozen=True)
class PluginInfo:
    """What the registry knows of one plugins.yaml entry."""

    name: str
    path: str
    version: str | None
    kind: str  # "backend" or "format"
    score: int
    loaded: bool
    chosen: bool
    why: str


def _text(b: bytes | None) -> str | None:
    return b.decode("utf-8", "replace") if b is not None else None


class Runtime(Owned):
    """A loom_runtime. Safe to share between threads once made. Closing it
    closes the models made on it first."""

    def __init__(
        self,
        *,
        backend: str | None = None,
        n_threads: int = 0,
        plugins_file: str | os.PathLike[str] | None = None,
        arch_dir: str | os.PathLike[str] | None = None,
        compute_on: ComputeOn = ComputeOn.ANY,
    ) -> None:
        self._handle: int | None = None
        self._models: weakref.WeakSet = weakref.WeakSet()
        p = defaults(S.RuntimeParams, "loom_runtime_params_init")
        p.backend, p.plugins_file, p.arch_dir = (os.fsencode(x) if x is not None else None
                                                  for x in (backend, plugins_file, arch_dir))
        p.n_threads = n_threads
        p.compute_on = int(compute_on)
        handle = ctypes.c_void_p()
        check(lib().loom_runtime_create(ctypes.byref(p), ctypes.byref(handle)), "loom_runtime_create")
        self._handle = handle.value

    def close(self) -> None:
        for model in list(self._models):
            model.close()
        if self._handle is not None:
            lib().loom_runtime_free(self._handle)
            self._handle = None

    def _adopt(self, model: object) -> None:
        self._models.add(model)

    @property
    def backend(self) -> str:
        """The backend in use."""
        return lib().loom_runtime_backend_name(self.handle).decode()

    @property
    def n_threads(self) -> int:
        return int(lib().loom_runtime_n_threads(self.handle))

    def device(self) -> DeviceInfo:
        """The backend's device; LoomError (UNSUPPORTED) for a backend that
        computes in host memory."""
        info = S.DeviceInfo()
        check(lib().loom_runtime_device_sized(self.handle, ctypes.byref(info), ctypes.sizeof(info)),
              "loom_runtime_device")
        return DeviceInfo(name=info.name.decode("utf-8", "replace"), memory_total=info.memory_total,
                          memory_free=info.memory_free)

    def plugins(self) -> list[PluginInfo]:
        out = []
        for i in range(lib().loom_runtime_plugin_count(self.handle)):
            info = S.PluginInfo()
            check(lib().loom_runtime_plugin_info_sized(self.handle, i, ctypes.byref(info), ctypes.sizeof(info)),
                  "loom_runtime_plugin_info")
            out.append(PluginInfo(
                name=_text(info.name) or "", path=_text(info.path) or "", version=_text(info.version),
                kind="backend" if info.kind == 1 else "format", score=info.score, loaded=info.loaded,
                chosen=info.chosen, why=_text(info.why) or ""))
        return out
