"""Model: a loaded model file, its vocabulary and its chat template."""

from __future__ import annotations

import ctypes
import json
import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from . import _structs as S
from ._lib import check, defaults, lib
from ._owned import Owned
from .errors import LoomError, Status
from .runtime import Runtime

# loom_reasoning's values by the names requests give them.
REASONING_LEVELS = {"none": 1, "on": 2, "low": 3, "medium": 4, "high": 5}

if TYPE_CHECKING:
    from .context import Context

Message = Mapping[str, str]


class Model(Owned):
    """A loom_model: immutable once loaded, shared by any number of
    contexts on any threads. Without a runtime it makes one of its own
    (with the runtime's defaults) and closes it with itself. Closing it
    closes its contexts first."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        runtime: Runtime | None = None,
        vocab_only: bool = False,
        quantize: str | None = None,
    ) -> None:
        self._handle: int | None = None
        self._contexts: weakref.WeakSet = weakref.WeakSet()
        self._own_runtime = runtime is None
        self.runtime = runtime if runtime is not None else Runtime()
        self.path = os.fspath(path)
        p = defaults(S.ModelParams, "loom_model_params_init")
        p.vocab_only = vocab_only
        p.quantize = quantize.encode() if quantize is not None else None
        handle = ctypes.c_void_p()
        try:
            check(lib().loom_model_load(self.runtime.handle, os.fsencode(path), ctypes.byref(p),
                                        ctypes.byref(handle)), "loom_model_load")
        except LoomError:
            if self._own_runtime:
                self.runtime.close()
            raise
        self._handle = handle.value
        self.runtime._adopt(self)

    def close(self) -> None:
        """Frees the model, after its contexts, and the runtime it made for
        itself."""
        for ctx in list(self._contexts):
            ctx.close()
        if self._handle is not None:
            lib().loom_model_free(self._handle)
            self._handle = None
            if self._own_runtime:
                self.runtime.close()

    def _adopt(self, ctx: object) -> None:
        self._contexts.add(ctx)

    def context(self, **params: int | str) -> Context:
        """Context(self, **params)."""
        from .context import Context

        return Context(self, **params)  # type: ignore[arg-type]

    # ---- what the model is ------------------------------------------------

    @property
    def architecture(self) -> str:
        return lib().loom_model_architecture(self.handle).decode()

    @property
    def n_vocab(self) -> int:
        return int(lib().loom_model_n_vocab(self.handle))

    @property
    def n_embd(self) -> int:
        return int(lib().loom_model_n_embd(self.handle))

    @property
    def n_layer(self) -> int:
        return int(lib().loom_model_n_layer(self.handle))

    @property
    def n_ctx_train(self) -> int:
        return int(lib().loom_model_n_ctx_train(self.handle))

    @property
    def n_params(self) -> int:
        return int(lib().loom_model_n_params(self.handle))

    def metadata(self) -> dict[str, str]:
        """The file's metadata, each value rendered as text (arrays
        abbreviated), in file order."""
        out = {}
        for i in range(lib().loom_model_meta_count(self.handle)):
            need = lib().loom_model_meta_value_str(self.handle, i, None, 0)
            buf = ctypes.create_string_buffer(need + 1)
            lib().loom_model_meta_value_str(self.handle, i, buf, len(buf))
            out[lib().loom_model_meta_key(self.handle, i).decode()] = buf.value.decode("utf-8", "replace")
        return out

    # ---- the vocabulary ---------------------------------------------------

    @property
    def bos(self) -> int | None:
        t = lib().loom_token_bos(self.handle)
        return t if t >= 0 else None

    @property
    def eos(self) -> int | None:
        t = lib().loom_token_eos(self.handle)
        return t if t >= 0 else None

    def is_eog(self, token: int) -> bool:
        """Whether the token ends generation (EOS, EOT, ...)."""
        return bool(lib().loom_token_is_eog(self.handle, token))

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """The text's tokens; add_special: BOS/EOS as the model's metadata
        asks; parse_special: control-token text ("<s>") becomes those
        tokens."""
        data = text.encode()
        n = ctypes.c_size_t()
        capacity = len(data) + 8
        while True:
            out = (ctypes.c_int32 * capacity)()
            st = lib().loom_tokenize(self.handle, data, len(data), add_special, parse_special, out, capacity,
                                     ctypes.byref(n))
            if st != Status.BUFFER_TOO_SMALL:
                check(st, "loom_tokenize")
                return list(out[: n.value])
            capacity = n.value

    def token_to_piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token stands for (maybe part of a UTF-8 sequence)."""
        n = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(64)
        st = lib().loom_token_to_piece(self.handle, token, special, buf, len(buf), ctypes.byref(n))
        if st == Status.BUFFER_TOO_SMALL:
            buf = ctypes.create_string_buffer(n.value)
            st = lib().loom_token_to_piece(self.handle, token, special, buf, len(buf), ctypes.byref(n))
        check(st, "loom_token_to_piece")
        return buf.raw[: n.value]

    def detokenize(self, tokens: Iterable[int], *, special: bool = False) -> str:
        """The text of the tokens (invalid UTF-8 replaced)."""
        return b"".join(self.token_to_piece(t, special=special) for t in tokens).decode("utf-8", "replace")

    # ---- chat -------------------------------------------------------------

    @property
    def chat_template(self) -> str:
        """The name of the template the model's chats are formatted with
        ("chatml", "llama3", ..., "plain")."""
        return lib().loom_chat_template(self.handle).decode()

    def apply_chat_template(
        self, messages: Sequence[Message], *, add_assistant: bool = True, template: str | None = None,
        reasoning: str | None = None
    ) -> str:
        """The messages ({"role": ..., "content": ...}) as the model's prompt
        text, ending with the assistant's opening when add_assistant;
        template: a template's name instead of the model's own; reasoning:
        "none", "on", "low", "medium" or "high", as the template offers it
        (loom_chat_apply_json_reasoning; None: what the template does when
        told nothing). The text is to be tokenized with parse_special
        (Context.chat does)."""
        if reasoning is not None:
            return self._apply_chat_json(messages, add_assistant, template, reasoning)
        array = (S.ChatMessage * len(messages))()
        for i, m in enumerate(messages):  # the array keeps the bytes alive
            array[i].role, array[i].content = m["role"].encode(), m["content"].encode()
        name = template.encode() if template is not None else None
        n = ctypes.c_size_t()
        call = lib().loom_chat_apply_sized
        st = call(self.handle, name, array, len(messages), ctypes.sizeof(S.ChatMessage), add_assistant, None, 0,
                  ctypes.byref(n))
        if st != Status.BUFFER_TOO_SMALL:
            check(st, "loom_chat_apply")
        buf = ctypes.create_string_buffer(n.value + 1)
        check(call(self.handle, name, array, len(messages), ctypes.sizeof(S.ChatMessage), add_assistant, buf,
                   len(buf), ctypes.byref(n)), "loom_chat_apply")
        return buf.raw[: n.value].decode("utf-8", "replace")

    def _apply_chat_json(self, messages: Sequence[Message], add_assistant: bool, template: str | None,
                         reasoning: str) -> str:
        if reasoning not in REASONING_LEVELS:
            raise ValueError(f"reasoning is one of {', '.join(REASONING_LEVELS)}, not {reasoning!r}")
        text = json.dumps([{"role": m["role"], "content": m["content"]} for m in messages]).encode()
        name = template.encode() if template is not None else None
        level = REASONING_LEVELS[reasoning]
        n = ctypes.c_size_t()
        call = lib().loom_chat_apply_json_reasoning
        st = call(self.handle, name, level, text, len(text), None, 0, add_assistant, None, 0, ctypes.byref(n))
        if st != Status.BUFFER_TOO_SMALL:
            check(st, "loom_chat_apply_json_reasoning")
        buf = ctypes.create_string_buffer(n.value + 1)
        check(call(self.handle, name, level, text, len(text), None, 0, add_assistant, buf, len(buf), ctypes.byref(n)),
              "loom_chat_apply_json_reasoning")
        return buf.raw[: n.value].decode("utf-8", "replace")
