"""Embeddings and logits: numpy arrays with numpy, lists without it,
equal either way; the embedding has unit norm and leaves its sequence
empty; logits equal llama.cpp's golden logits within the f32 tolerance
of tests/test_golden.c."""

from __future__ import annotations

import json

import numpy

import loom
import loom._array


def test_logits_equal_llama_cpp(shared, stories):
    g = json.loads((shared / "golden" / "stories260K-f32" / "once_upon_a_time.json").read_text())
    rows = numpy.fromfile(shared / "golden" / "stories260K-f32" / g["logits_file"], dtype="<f4")
    rows = rows.reshape(g["logits_shape"])
    with stories.context(n_ctx=256, kv_type="f32") as ctx:  # as llama.cpp's golden run
        ctx.decode(g["prompt_tokens"], logits=True)
        for p in range(len(g["prompt_tokens"])):
            got = ctx.logits(p)
            assert isinstance(got, numpy.ndarray) and got.dtype == numpy.float32
            assert numpy.max(numpy.abs(got - rows[p])) < 1e-4
        assert numpy.array_equal(ctx.logits(-1), ctx.logits(len(g["prompt_tokens"]) - 1))


def test_lists_without_numpy(stories, monkeypatch):
    with stories.context(n_ctx=256) as ctx:
        arr = ctx.embed("Once upon a time")
        ctx.decode(stories.tokenize("Once upon a time"))
        logits = ctx.logits()
        monkeypatch.setattr(loom._array, "numpy", None)
        as_list = ctx.embed("Once upon a time")
        ctx.decode(stories.tokenize("Once upon a time"), seq_id=1)
        logits_list = ctx.logits()
    assert isinstance(as_list, list) and isinstance(logits_list, list)
    assert as_list == [float(x) for x in arr]
    assert logits_list == [float(x) for x in logits]


def test_embedding_is_unit_and_leaves_the_sequence_empty(stories):
    with stories.context(n_ctx=256) as ctx:
        ctx.decode(stories.tokenize("The quick brown fox"), seq_id=3)
        used = ctx.kv_used
        e = ctx.embed("Once upon a time", seq_id=5)
        assert abs(float(numpy.linalg.norm(e)) - 1.0) < 1e-5
        assert ctx.kv_pos_max(5) == -1 and ctx.kv_used == used
        same = ctx.embed(stories.tokenize("Once upon a time"), seq_id=0)
        assert numpy.array_equal(e, same)
        other = ctx.embed("The quick brown fox")
        assert not numpy.array_equal(e, other)
