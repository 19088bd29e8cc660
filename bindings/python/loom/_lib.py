"""Finding libloom, loading it, and the signatures of its functions.

The library is loaded once per process, from the first of: the path given
to load_library(), $LOOM_LIBRARY, the source tree's build/ (when this
package runs from a checkout), then the system's libloom.so.1 (the
dynamic linker's search path). A path that is named but does not load is
an error, not a reason to try the next.

The functions are called through ctypes.CDLL, which releases the GIL for
the length of every foreign call: a decode on one thread leaves the
interpreter to the others.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading
from ctypes import (
    POINTER,
    c_bool,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_size_t,
    c_uint,
    c_uint32,
    c_uint64,
    c_void_p,
)

from . import _structs as S
from .errors import LoomError, Status

MAJOR = 1
SONAME = f"libloom.so.{MAJOR}"
ENV = "LOOM_LIBRARY"

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None

_status = c_int
_p = c_void_p  # every opaque handle
_tokens = POINTER(c_int32)


def _sized(struct: type) -> list:
    return [POINTER(struct), c_size_t]


# name: (result, argument types)
_SIGNATURES: dict[str, tuple[object, list]] = {
    "loom_version": (c_char_p, []),
    "loom_version_hex": (c_uint, []),
    "loom_strerror": (c_char_p, [c_int]),
    "loom_last_error": (c_char_p, []),
    # runtime
    "loom_runtime_params_init": (_status, _sized(S.RuntimeParams)),
    "loom_runtime_create": (_status, [POINTER(S.RuntimeParams), POINTER(_p)]),
    "loom_runtime_free": (None, [_p]),
    "loom_runtime_plugin_count": (c_size_t, [_p]),
    "loom_runtime_plugin_info_sized": (_status, [_p, c_size_t] + _sized(S.PluginInfo)),
    "loom_runtime_backend_name": (c_char_p, [_p]),
    "loom_runtime_device_sized": (_status, [_p] + _sized(S.DeviceInfo)),
    "loom_runtime_n_threads": (c_int, [_p]),
    # model
    "loom_model_params_init": (_status, _sized(S.ModelParams)),
    "loom_model_load": (_status, [_p, c_char_p, POINTER(S.ModelParams), POINTER(_p)]),
    "loom_model_free": (None, [_p]),
    "loom_model_architecture": (c_char_p, [_p]),
    "loom_model_format": (c_char_p, [_p]),
    "loom_model_n_vocab": (c_int32, [_p]),
    "loom_model_n_ctx_train": (c_int32, [_p]),
    "loom_model_n_embd": (c_int32, [_p]),
    "loom_model_n_layer": (c_int32, [_p]),
    "loom_model_size": (c_uint64, [_p]),
    "loom_model_n_params": (c_uint64, [_p]),
    "loom_model_meta_count": (c_size_t, [_p]),
    "loom_model_meta_key": (c_char_p, [_p, c_size_t]),
    "loom_model_meta_value_str": (c_size_t, [_p, c_size_t, c_void_p, c_size_t]),
    # vocabulary
    "loom_token_bos": (c_int32, [_p]),
    "loom_token_eos": (c_int32, [_p]),
    "loom_model_adds_bos": (c_bool, [_p]),
    "loom_token_is_eog": (c_bool, [_p, c_int32]),
    "loom_tokenize": (
        _status,
        [_p, c_char_p, c_size_t, c_bool, c_bool, _tokens, c_size_t, POINTER(c_size_t)],
    ),
    "loom_token_to_piece": (
        _status,
        [_p, c_int32, c_bool, c_void_p, c_size_t, POINTER(c_size_t)],
    ),
    # contexts
    "loom_context_params_init": (_status, _sized(S.ContextParams)),
    "loom_context_create": (_status, [_p, POINTER(S.ContextParams), POINTER(_p)]),
    "loom_context_free": (None, [_p]),
    "loom_context_n_ctx": (c_uint32, [_p]),
    "loom_context_n_batch": (c_uint32, [_p]),
    "loom_decode_sized": (_status, [_p] + _sized(S.Batch)),
    "loom_get_logits": (POINTER(c_float), [_p, c_int32]),
    "loom_kv_seq_remove": (_status, [_p, c_int32, c_int32, c_int32]),
    "loom_kv_seq_copy": (_status, [_p, c_int32, c_int32, c_int32, c_int32]),
    "loom_kv_seq_keep": (_status, [_p, c_int32]),
    "loom_kv_seq_shift": (_status, [_p, c_int32, c_int32, c_int32, c_int32]),
    "loom_kv_seq_state_size": (_status, [_p, c_int32, POINTER(c_size_t)]),
    "loom_kv_seq_save": (_status, [_p, c_int32, c_void_p, c_size_t, POINTER(c_size_t)]),
    "loom_kv_seq_load": (_status, [_p, c_int32, c_void_p, c_size_t]),
    "loom_kv_clear": (None, [_p]),
    "loom_kv_seq_pos_max": (c_int32, [_p, c_int32]),
    "loom_kv_used": (c_uint32, [_p]),
    "loom_embed": (_status, [_p, c_int32, _tokens, c_size_t, POINTER(c_float), c_size_t]),
    # sampling and the token step
    "loom_sampler_params_init": (_status, _sized(S.SamplerParams)),
    "loom_generator_params_init": (_status, _sized(S.GeneratorParams)),
    "loom_generator_create": (_status, [_p, POINTER(S.GeneratorParams), POINTER(_p)]),
    "loom_generator_free": (None, [_p]),
    "loom_generator_accept": (None, [_p, _tokens, c_size_t]),
    "loom_generator_next_sized": (_status, [_p, POINTER(c_float), c_bool] + _sized(S.Generated)),
    # chat
    "loom_chat_apply_sized": (
        _status,
        [_p, c_char_p, POINTER(S.ChatMessage), c_size_t, c_size_t, c_bool, c_void_p, c_size_t,
         POINTER(c_size_t)],
    ),
    "loom_chat_template": (c_char_p, [_p]),
    "loom_chat_apply_json_reasoning": (
        _status,
        [_p, c_char_p, c_int, c_char_p, c_size_t, c_char_p, c_size_t, c_bool, c_void_p, c_size_t, POINTER(c_size_t)],
    ),
    "loom_chat_check_reasoning": (_status, [_p, c_char_p, c_int]),
    "loom_reply_reader_create": (_status, [_p, c_char_p, POINTER(c_char_p), c_size_t, POINTER(_p)]),
    "loom_reply_reader_free": (None, [_p]),
    "loom_reply_reader_push_sized": (
        _status,
        [_p, POINTER(S.Generated), c_size_t, POINTER(S.ReplyParts), c_size_t],
    ),
}


def _in_tree() -> pathlib.Path | None:
    """build/libloom.so.1 of the source tree this package lies in, if it
    does (bindings/python/loom/_lib.py) and that was built."""
    root = pathlib.Path(__file__).resolve().parents[3]
    built = root / "build" / SONAME
    return built if (root / "include" / "loom.h").exists() and built.exists() else None


def _open(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    major = lib.loom_version_hex() >> 16
    if major != MAJOR:
        lib.loom_version.restype = c_char_p
        raise LoomError(Status.UNSUPPORTED,
                        f"{path} is libloom {lib.loom_version().decode()}; this package is for "
                        f"libloom {MAJOR}.x", "load_library")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load_library(path: str | os.PathLike[str] | None = None) -> ctypes.CDLL:
    """libloom, loaded on the first call (from path if given); later calls
    give the same library, and naming another path then is an error."""
    global _lib, _path
    with _lock:
        want = os.fspath(path) if path is not None else None
        if _lib is not None:
            if want is not None and os.path.realpath(want) != os.path.realpath(_path or ""):
                raise LoomError(Status.INVALID_ARGUMENT,
                                f"libloom is already loaded from {_path}; cannot load {want}", "load_library")
            return _lib
        if want is None:
            want = os.environ.get(ENV) or None
        if want is None and _in_tree() is not None:
            want = str(_in_tree())
        try:
            _lib = _open(want if want is not None else SONAME)
        except OSError as e:
            raise LoomError(Status.NOT_FOUND,
                            f"cannot load libloom ({e}): pass its path to loom.load_library() or set "
                            f"${ENV}, build it in the source tree's build/, or install it", "load_library") from e
        _path = want if want is not None else SONAME
        return _lib


def library_path() -> str:
    """Where libloom was loaded from (loading it if it was not)."""
    load_library()
    assert _path is not None
    return _path


def lib() -> ctypes.CDLL:
    return _lib if _lib is not None else load_library()


def check(status: int, call: str) -> None:
    """Raises LoomError, with loom_last_error()'s message, unless status is
    LOOM_OK. Called on the thread that made the call: the message is kept
    per thread."""
    if status != Status.OK:
        raise LoomError(status, lib().loom_last_error().decode("utf-8", "replace"), call)


def defaults(struct: type, init: str):
    """A params struct with the library's defaults, at this mirror's size."""
    p = struct()
    check(getattr(lib(), init)(ctypes.byref(p), ctypes.sizeof(p)), init)
    return p
