"""ctypes mirrors of loom.h's structs (libloom 1.x).

Each params struct starts with its size, set by the library's
loom_*_params_init from ctypes.sizeof of these classes, and every other
struct goes to a *_sized function with its size: so the library reads and
writes these at the sizes they have here, and a library older than them
refuses them by name instead of misreading them. Fields are only ever
appended within a major version; a mirror that lacks the newest ones
keeps working against a newer library (it gets their defaults).
"""

from __future__ import annotations

import ctypes
from ctypes import (
    POINTER,
    c_bool,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int8,
    c_int32,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

MAX_TOP_LOGPROBS = 20

class RuntimeParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("plugins_file", c_char_p),
        ("backend", c_char_p),
        ("arch_dir", c_char_p),
        ("n_threads", c_int),
        ("log_level", c_int),
        ("log_fn", c_void_p),
        ("log_user", c_void_p),
        ("compute_on", c_int),
    ]


class PluginInfo(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("path", c_char_p),
        ("version", c_char_p),
        ("kind", c_int),
        ("score", c_int),
        ("loaded", c_bool),
        ("chosen", c_bool),
        ("why", c_char_p),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("name", c_char * 128),
        ("memory_total", c_uint64),
        ("memory_free", c_uint64),
    ]


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("vocab_only", c_bool),
        ("metadata_only", c_bool),
        ("quantize", c_char_p),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_ctx", c_uint32),
        ("n_batch", c_uint32),
        ("kv_type", c_int),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", c_int32),
        ("tokens", POINTER(c_int32)),
        ("pos", POINTER(c_int32)),
        ("seq_id", POINTER(c_int32)),
        ("logits", POINTER(c_int8)),
    ]


class SamplerParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("seed", c_uint64),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
    ]


class GeneratorParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("sampling", POINTER(SamplerParams)),
        ("n_predict", c_int32),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_size_t),
        ("ignore_eos", c_bool),
        ("n_logprobs", c_int32),
    ]


class Generated(ctypes.Structure):
    _fields_ = [
        ("token", c_int32),
        ("text", c_void_p),  # len bytes, not NUL-terminated
        ("len", c_size_t),
        ("done", c_bool),
        ("stop_reason", c_int),
        ("logprob", c_float),
        ("n_top", c_int32),
        ("top", c_int32 * MAX_TOP_LOGPROBS),
        ("top_logprob", c_float * MAX_TOP_LOGPROBS),
    ]


class ReplyParts(ctypes.Structure):
    _fields_ = [
        ("content", c_void_p),
        ("n_content", c_size_t),
        ("reasoning", c_void_p),
        ("n_reasoning", c_size_t),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [
        ("role", c_char_p),
        ("content", c_char_p),
    ]
