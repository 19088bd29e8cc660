"""Context: a KV cache and its sequences; decoding, logits, embeddings."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from typing import Any

from . import _structs as S
from ._array import floats
from ._lib import check, defaults, lib
from ._owned import Owned
from .errors import LoomError, Status
from .generation import Sampling, Step, generate_steps
from .model import Message, Model

# loom_dtype numbers of the KV cache types a context takes.
KV_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}


class Context(Owned):
    """A loom_context: a KV cache of n_ctx cells shared by up to 256
    sequences, and the logits of the last batch. One thread at a time;
    contexts of one model may run on several threads at once (the GIL is
    released while loom computes)."""

    def __init__(self, model: Model, *, n_ctx: int = 0, n_batch: int = 512, kv_type: str = "f16") -> None:
        self._handle: int | None = None
        if kv_type not in KV_TYPES:
            raise LoomError(Status.INVALID_ARGUMENT,
                            f"kv_type '{kv_type}' is none of {', '.join(KV_TYPES)}", "Context")
        self.model = model
        p = defaults(S.ContextParams, "loom_context_params_init")
        p.n_ctx, p.n_batch, p.kv_type = n_ctx, n_batch, KV_TYPES[kv_type]
        handle = ctypes.c_void_p()
        check(lib().loom_context_create(model.handle, ctypes.byref(p), ctypes.byref(handle)), "loom_context_create")
        self._handle = handle.value
        self._n_logits = 0  # tokens of the last batch
        model._adopt(self)

    def close(self) -> None:
        if self._handle is not None:
            lib().loom_context_free(self._handle)
            self._handle = None

    @property
    def n_ctx(self) -> int:
        return int(lib().loom_context_n_ctx(self.handle))

    @property
    def n_batch(self) -> int:
        """The most tokens a decode takes."""
        return int(lib().loom_context_n_batch(self.handle))

    # ---- evaluating ---------------------------------------------------------

    def decode(
        self,
        tokens: Sequence[int],
        *,
        pos: Sequence[int] | None = None,
        seq_id: int | Sequence[int] = 0,
        logits: bool | Sequence[bool] = False,
    ) -> None:
        """Evaluates tokens (at most n_batch) as one batch and caches them.
        pos: each token's position (default: after what its sequence holds);
        seq_id: one sequence for all, or one per token; logits: which tokens'
        logits to keep (True: all; False: the last only)."""
        n = len(tokens)
        b = S.Batch(n_tokens=n, tokens=(ctypes.c_int32 * n)(*tokens))
        if pos is not None:
            b.pos = (ctypes.c_int32 * n)(*pos)
        seqs = [seq_id] * n if isinstance(seq_id, int) else list(seq_id)
        b.seq_id = (ctypes.c_int32 * n)(*seqs)
        want = [logits] * n if isinstance(logits, bool) else list(logits)
        if not any(want) and n > 0:
            want[-1] = True
        b.logits = (ctypes.c_int8 * n)(*want)
        self._n_logits = 0
        check(lib().loom_decode_sized(self.handle, ctypes.byref(b), ctypes.sizeof(b)), "loom_decode")
        self._n_logits = n

    def logits(self, i: int = -1) -> Any:
        """The logits (n_vocab floats) of token i of the last batch (negative:
        from its end): a numpy float32 array, or a list without numpy."""
        j = i + self._n_logits if i < 0 else i
        row = lib().loom_get_logits(self.handle, j) if 0 <= j < self._n_logits else None
        if not row:
            raise LoomError(Status.INVALID_ARGUMENT, f"token {i} of the last batch has no logits", "logits")
        return floats(row, self.model.n_vocab)

    def embed(self, text: str | Sequence[int], *, seq_id: int = 0, add_special: bool = True) -> Any:
        """The embedding of a text (tokenized with add_special) or of tokens:
        the last hidden state averaged over the tokens, unit L2 norm;
        n_embd floats as a numpy array, or a list without numpy. Uses
        sequence seq_id, which is left empty."""
        tokens = self.model.tokenize(text, add_special=add_special) if isinstance(text, str) else list(text)
        n_embd = self.model.n_embd
        out = (ctypes.c_float * n_embd)()
        self._n_logits = 0  # the embedding's batches keep no logits
        check(lib().loom_embed(self.handle, seq_id, (ctypes.c_int32 * len(tokens))(*tokens), len(tokens), out,
                               n_embd), "loom_embed")
        return floats(out, n_embd)

    # ---- the KV cache's sequences -------------------------------------------

    def kv_remove(self, seq_id: int, p0: int = 0, p1: int = -1) -> None:
        """Drops seq_id's entries at positions [p0, p1) (p1 < 0: to the end;
        seq_id < 0: every sequence)."""
        check(lib().loom_kv_seq_remove(self.handle, seq_id, p0, p1), "loom_kv_seq_remove")

    def kv_copy(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        """dst shares src's entries at positions [p0, p1) (cells are shared,
        not copied)."""
        check(lib().loom_kv_seq_copy(self.handle, src, dst, p0, p1), "loom_kv_seq_copy")

    def kv_keep(self, seq_id: int) -> None:
        """Drops every sequence but seq_id."""
        check(lib().loom_kv_seq_keep(self.handle, seq_id), "loom_kv_seq_keep")

    def kv_shift(self, seq_id: int, delta: int, p0: int = 0, p1: int = -1) -> None:
        """Moves seq_id's entries at [p0, p1) by delta (RoPE models)."""
        check(lib().loom_kv_seq_shift(self.handle, seq_id, p0, p1, delta), "loom_kv_seq_shift")

    def kv_clear(self) -> None:
        lib().loom_kv_clear(self.handle)

    def kv_pos_max(self, seq_id: int) -> int:
        """The largest position seq_id holds; -1 if none."""
        return int(lib().loom_kv_seq_pos_max(self.handle, seq_id))

    @property
    def kv_used(self) -> int:
        """Cells in use."""
        return int(lib().loom_kv_used(self.handle))

    def kv_save(self, seq_id: int) -> bytes:
        """seq_id's cache entries as bytes, for kv_load (this context or
        another of the same model and cache type)."""
        size = ctypes.c_size_t()
        check(lib().loom_kv_seq_state_size(self.handle, seq_id, ctypes.byref(size)), "loom_kv_seq_state_size")
        buf = ctypes.create_string_buffer(size.value)
        written = ctypes.c_size_t()
        check(lib().loom_kv_seq_save(self.handle, seq_id, buf, size.value, ctypes.byref(written)), "loom_kv_seq_save")
        return buf.raw[: written.value]

    def kv_load(self, seq_id: int, state: bytes) -> None:
        """Restores kv_save's bytes as seq_id (dropping what it held)."""
        check(lib().loom_kv_seq_load(self.handle, seq_id, state, len(state)), "loom_kv_seq_load")

    # ---- generating -----------------------------------------------------------

    def generate(
        self,
        prompt: str | Sequence[int],
        *,
        max_tokens: int = 128,
        sampling: Sampling | None = None,
        stop: Sequence[str] = (),
        ignore_eos: bool = False,
        seq_id: int = 0,
        keep_cache: bool = False,
        add_special: bool = True,
        parse_special: bool = False,
        logprobs: int | None = None,
    ) -> Iterator[Step]:
        """Generates from a prompt (text, or tokens), one Step per token as
        it is sampled. The sequence's cache is cleared first unless
        keep_cache (the prompt then continues it). max_tokens < 0: until the
        context is full. logprobs: each step's log-probability and that
        many of the most likely tokens' (0 to 20)."""
        tokens = (self.model.tokenize(prompt, add_special=add_special, parse_special=parse_special)
                  if isinstance(prompt, str) else list(prompt))
        return generate_steps(self, tokens, max_tokens=max_tokens, sampling=sampling, stop=stop,
                              ignore_eos=ignore_eos, seq_id=seq_id, keep_cache=keep_cache, logprobs=logprobs)

    def chat(
        self,
        messages: Sequence[Message],
        *,
        template: str | None = None,
        reasoning: str | None = None,
        max_tokens: int = 128,
        sampling: Sampling | None = None,
        stop: Sequence[str] = (),
        seq_id: int = 0,
    ) -> Iterator[Step]:
        """The assistant's reply to messages, formatted with the model's chat
        template (or the one named): each Step's text is the reply's
        content, its reasoning what the template marks as such; reasoning
        as Model.apply_chat_template takes it."""
        text = self.model.apply_chat_template(messages, template=template, reasoning=reasoning)
        tokens = self.model.tokenize(text, add_special=True, parse_special=True)
        return generate_steps(self, tokens, max_tokens=max_tokens, sampling=sampling, stop=stop, seq_id=seq_id,
                              chat_template=template or "")
