"""Generation: the sampler's settings, and the loop that yields each token
as loom's token step (loom_generator) gives it."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from . import _structs as S
from ._lib import check, defaults, lib
from .errors import LoomError, Status

if TYPE_CHECKING:
    from .context import Context


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn; None keeps the library's default (loom.h's
    loom_sampler_params). temperature <= 0 is greedy."""

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    def params(self) -> S.SamplerParams:
        p = defaults(S.SamplerParams, "loom_sampler_params_init")
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                setattr(p, f.name, value)
        return p


GREEDY = Sampling(temperature=0)

STOP_REASONS = ("length", "eog", "stop string", "callback", "context")


@dataclass(frozen=True)
class Step:
    """One generated token: its id, the text it lets show (may be empty
    while a character or a possible stop string is incomplete), whether
    generation ends with it and why ("length", "eog", "stop string",
    "context"). With logprobs: its log-probability and the most likely
    tokens with theirs. In a chat, reasoning is the reply's reasoning
    text of this step (text is its content)."""

    token: int
    text: str
    done: bool
    stop_reason: str | None = None
    logprob: float | None = None
    top: list[tuple[int, float]] = field(default_factory=list)
    reasoning: str = ""


def _text(ptr: int | None, n: int) -> str:
    return ctypes.string_at(ptr, n).decode("utf-8", "replace") if n else ""


def _decode_prompt(ctx: Context, tokens: list[int], start: int, seq_id: int, n_batch: int) -> None:
    for i in range(0, len(tokens), n_batch):
        piece = tokens[i: i + n_batch]
        last = i + len(piece) == len(tokens)
        ctx.decode(piece, pos=range(start + i, start + i + len(piece)), seq_id=seq_id,
                   logits=[last and j == len(piece) - 1 for j in range(len(piece))])


def generate_steps(
    ctx: Context,
    tokens: list[int],
    *,
    max_tokens: int,
    sampling: Sampling | None,
    stop: Sequence[str],
    seq_id: int,
    ignore_eos: bool = False,
    keep_cache: bool = False,
    logprobs: int | None = None,
    chat_template: str | None = None,
) -> Iterator[Step]:
    """What Context.generate and Context.chat run: the prompt evaluated in
    n_batch pieces, then a token at a time from a loom_generator (and,
    for a chat, its reply reader), as loom_generate runs them."""
    L = lib()
    if not tokens:
        raise LoomError(Status.INVALID_ARGUMENT, "the prompt has no tokens", "generate")
    if keep_cache:
        start = ctx.kv_pos_max(seq_id) + 1
    else:
        ctx.kv_remove(seq_id)
        start = 0
    n_ctx = ctx.n_ctx
    if start + len(tokens) >= n_ctx:
        raise LoomError(Status.CONTEXT_FULL,
                        f"the prompt has {len(tokens)} tokens after {start} cached; the context holds {n_ctx}",
                        "generate")
    sp = (sampling or Sampling()).params()
    gp = defaults(S.GeneratorParams, "loom_generator_params_init")
    gp.sampling = ctypes.pointer(sp)
    gp.n_predict = max_tokens
    stops = (ctypes.c_char_p * max(len(stop), 1))(*[s.encode() for s in stop])
    gp.stop, gp.n_stop = stops, len(stop)
    gp.ignore_eos = ignore_eos
    gp.n_logprobs = -1 if logprobs is None else logprobs
    gen, reader = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        check(L.loom_generator_create(ctx.model.handle, ctypes.byref(gp), ctypes.byref(gen)), "loom_generator_create")
        if chat_template is not None:
            check(L.loom_reply_reader_create(ctx.model.handle, chat_template.encode() or None, stops, len(stop),
                                             ctypes.byref(reader)), "loom_reply_reader_create")
        prompt = (ctypes.c_int32 * len(tokens))(*tokens)
        L.loom_generator_accept(gen, prompt, len(tokens))
        _decode_prompt(ctx, tokens, start, seq_id, ctx.n_batch)
        pos = start + len(tokens)
        out, parts = S.Generated(), S.ReplyParts()
        while True:
            full = pos + 1 > n_ctx or ctx.kv_used >= n_ctx
            check(L.loom_generator_next_sized(gen, L.loom_get_logits(ctx.handle, ctx._n_logits - 1), full,
                                              ctypes.byref(out), ctypes.sizeof(out)), "loom_generator_next")
            text, reasoning = _text(out.text, out.len), ""
            if reader:
                check(L.loom_reply_reader_push_sized(reader, ctypes.byref(out), ctypes.sizeof(out),
                                                     ctypes.byref(parts), ctypes.sizeof(parts)),
                      "loom_reply_reader_push")
                text, reasoning = _text(parts.content, parts.n_content), _text(parts.reasoning, parts.n_reasoning)
            yield Step(
                token=out.token, text=text, done=out.done,
                stop_reason=STOP_REASONS[out.stop_reason] if out.done else None,
                logprob=out.logprob if logprobs is not None else None,
                top=[(out.top[i], out.top_logprob[i]) for i in range(out.n_top)],
                reasoning=reasoning)
            if out.done:
                return
            ctx.decode([out.token], pos=[pos], seq_id=seq_id)
            pos += 1
    finally:
        L.loom_reply_reader_free(reader)
        L.loom_generator_free(gen)

