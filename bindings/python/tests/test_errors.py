"""Failures are LoomError carrying loom_last_error()'s message and the
status; handles close with their context managers."""

from __future__ import annotations

import pytest

import loom
from loom._lib import lib


def test_a_missing_file_names_itself(runtime, tmp_path):
    missing = tmp_path / "no-such-model.gguf"
    with pytest.raises(loom.LoomError) as e:
        loom.Model(missing, runtime=runtime)
    assert e.value.status in (loom.Status.IO, loom.Status.NOT_FOUND)
    assert str(missing) in e.value.message
    assert e.value.call == "loom_model_load"
    # The message is the library's own, as loom_last_error() has it.
    assert e.value.message == lib().loom_last_error().decode()


def test_bad_arguments(stories):
    with pytest.raises(loom.LoomError) as e:
        stories.context(kv_type="f8")
    assert e.value.status == loom.Status.INVALID_ARGUMENT
    with stories.context(n_ctx=64, n_batch=16) as ctx:
        assert ctx.n_batch == 16
        with pytest.raises(loom.LoomError) as e:
            ctx.decode(list(range(20)))
        assert e.value.status == loom.Status.INVALID_ARGUMENT and "1 to 16 tokens" in e.value.message
        with pytest.raises(loom.LoomError) as e:
            list(ctx.generate(" ".join(["time"] * 80), max_tokens=4))
        assert e.value.status == loom.Status.CONTEXT_FULL
        with pytest.raises(loom.LoomError) as e:
            ctx.logits(0)  # the failed batch left none
        with pytest.raises(loom.LoomError) as e:
            list(ctx.generate("Once", logprobs=21))
        assert e.value.status == loom.Status.INVALID_ARGUMENT and "n_logprobs" in e.value.message


def test_context_managers_close(stories):
    with stories.context(n_ctx=32) as ctx:
        assert ctx.n_ctx == 32
    with pytest.raises(loom.LoomError, match="closed"):
        ctx.n_ctx
    ctx.close()  # twice is nothing


def test_a_model_closes_the_runtime_it_made(shared):
    with loom.Model(shared / "models" / "stories260K-f32.gguf") as m:
        rt = m.runtime
        chosen = [p for p in rt.plugins() if p.chosen]
        assert len(chosen) == 1 and chosen[0].name == rt.backend and chosen[0].kind == "backend"
        if rt.backend.startswith("cpu"):
            with pytest.raises(loom.LoomError) as e:
                rt.device()
            assert e.value.status == loom.Status.UNSUPPORTED
        else:
            assert rt.device().memory_total > 0
    with pytest.raises(loom.LoomError, match="closed"):
        rt.backend


def test_closing_closes_what_was_made_on_it(shared):
    rt = loom.Runtime(n_threads=1)
    m = loom.Model(shared / "models" / "stories260K-f32.gguf", runtime=rt)
    a, b = m.context(n_ctx=32), m.context(n_ctx=32)
    a.close()
    rt.close()  # the model first, and its contexts before it: no handle outlives what it needs
    for closed in (b, m):
        with pytest.raises(loom.LoomError, match="closed"):
            closed.handle
