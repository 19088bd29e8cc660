"""The KV cache's sequence operations: copy, remove, keep, shift, save and
load, each seen in the positions held and in the logits that follow.
Logits after the same history agree to 1e-5 (the attention's sums run
over the cells where each sequence's lie); after a different one they
differ by far more."""

from __future__ import annotations

import numpy
import pytest

import loom


def next_logits(ctx: loom.Context, token: int, seq_id: int) -> numpy.ndarray:
    ctx.decode([token], seq_id=seq_id)
    return ctx.logits()


def same(a: numpy.ndarray, b: numpy.ndarray) -> bool:
    return float(numpy.max(numpy.abs(a - b))) < 1e-5


def test_copy_remove_keep(stories):
    prompt = stories.tokenize("Once upon a time")
    n = len(prompt)
    with stories.context(n_ctx=256) as ctx:
        ctx.decode(prompt)
        ctx.kv_copy(0, 1)
        assert ctx.kv_pos_max(1) == n - 1
        assert ctx.kv_used == n  # shared cells, not copies
        a, b = next_logits(ctx, 432, 0), next_logits(ctx, 432, 1)
        assert same(a, b)
        # Seq 1 cut back to its first 2 positions: what follows sees only
        # them; continued with the rest, the same logits again.
        ctx.kv_remove(1, 2)
        assert ctx.kv_pos_max(1) == 1
        ctx.kv_copy(1, 2)
        assert float(numpy.max(numpy.abs(next_logits(ctx, 432, 2) - a))) > 1e-2
        ctx.decode(prompt[2:] + [432], seq_id=1)
        assert same(ctx.logits(), a)
        ctx.kv_keep(1)
        assert ctx.kv_pos_max(0) == -1 and ctx.kv_pos_max(2) == -1 and ctx.kv_pos_max(1) == n
        ctx.kv_clear()
        assert ctx.kv_used == 0


def test_save_and_load_restore_a_sequence(stories):
    prompt = stories.tokenize("Lily and Tom went to the park. They")
    with stories.context(n_ctx=256) as ctx, stories.context(n_ctx=256) as other:
        ctx.decode(prompt)
        state = ctx.kv_save(0)
        want = next_logits(ctx, 432, 0)
        other.kv_load(4, state)
        assert other.kv_pos_max(4) == len(prompt) - 1
        assert same(next_logits(other, 432, 4), want)
        with pytest.raises(loom.LoomError) as e:
            other.kv_load(5, state[: len(state) // 2])
        assert e.value.status == loom.Status.BAD_FORMAT


def test_shift_moves_positions(stories):
    prompt = stories.tokenize("Once upon a time, there was")
    with stories.context(n_ctx=256) as ctx:
        ctx.decode(prompt)
        ctx.kv_remove(0, 1, 3)
        ctx.kv_shift(0, -2, 3)
        assert ctx.kv_pos_max(0) == len(prompt) - 3
        assert ctx.kv_used == len(prompt) - 2
        # What follows decodes at the position after the moved ones.
        ctx.decode([432])
        assert ctx.kv_pos_max(0) == len(prompt) - 2
