"""Generation through the binding: greedy ids equal llama.cpp's golden
continuation and the C API's own, the iterator streams, and the sampler's
settings, stop strings and log-probabilities take effect."""

from __future__ import annotations

import math

import numpy
import pytest

import loom
from conftest import golden

PROMPTS = ["once_upon_a_time", "quick_brown_fox", "lily_and_tom", "bos_only"]


@pytest.mark.parametrize("prompt_id", PROMPTS)
def test_greedy_ids_equal_llama_cpp(shared, stories, prompt_id):
    g = golden(shared, "stories260K-f32", prompt_id)
    want = g["greedy"]["tokens"]
    if g["greedy"]["first_eog_index"] >= 0:  # llama.cpp went on; loom stops there
        want = want[: g["greedy"]["first_eog_index"] + 1]
    with stories.context(n_ctx=256) as ctx:
        steps = list(ctx.generate(g["prompt"], max_tokens=len(g["greedy"]["tokens"]), sampling=loom.GREEDY))
    assert stories.tokenize(g["prompt"]) == g["prompt_tokens"]
    assert [s.token for s in steps] == want
    assert steps[-1].done and all(not s.done for s in steps[:-1])


# Models of each architecture and weight type at hand, the C API's greedy
# continuation and embedding against the binding's.
C_MODELS = ["stories260K-f32", "stories260K-q4_k_m", "stories-llama-d256-q8_0", "stories-gpt2-d128-f16",
            "llama-2-tiny-random"]


@pytest.mark.parametrize("model", C_MODELS)
def test_greedy_ids_and_embeddings_equal_the_c_apis(shared, runtime, c_reference, model):
    prompt = "Once upon a time"
    path = shared / "models" / f"{model}.gguf"
    c = c_reference(path, prompt, 24)
    with loom.Model(path, runtime=runtime) as m, m.context(n_ctx=256) as ctx:
        ids = [s.token for s in ctx.generate(prompt, max_tokens=24, sampling=loom.GREEDY)]
        emb = ctx.embed(prompt)
        assert len(emb) == m.n_embd
    assert len(c.greedy) > 0
    assert ids == c.greedy
    assert c.embedding.shape == emb.shape
    diff = float(numpy.max(numpy.abs(emb - c.embedding)))
    print(f"{model}: {len(ids)} greedy ids equal; embedding of {len(emb)} max |diff| {diff:g}")
    assert diff == 0.0


def test_generate_streams_a_step_at_a_time(stories):
    with stories.context(n_ctx=256) as ctx:
        prompt = stories.tokenize("Once upon a time")
        it = ctx.generate(prompt, max_tokens=8, sampling=loom.GREEDY)
        assert ctx.kv_used == 0  # nothing runs before the first step is asked for
        first = next(it)
        assert ctx.kv_used == len(prompt)  # the prompt, not yet the sampled token
        next(it)
        assert ctx.kv_used == len(prompt) + 1
        assert first.token == 432 and first.text == ","
        it.close()


def test_sampling_settings_take_effect(stories):
    hot = loom.Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0)
    with stories.context(n_ctx=256) as ctx:
        def run(s: loom.Sampling) -> list[int]:
            return [step.token for step in ctx.generate("Once upon a time", max_tokens=24, sampling=s)]

        greedy = run(loom.GREEDY)
        assert run(loom.Sampling(top_k=1)) == greedy  # one candidate: the argmax at any temperature
        seeded = [run(loom.Sampling(**{**hot.__dict__, "seed": seed})) for seed in (1, 1, 2, 3)]
        assert seeded[0] == seeded[1]
        assert len({tuple(s) for s in seeded[1:]}) > 1 and any(s != greedy for s in seeded)


def test_stop_strings_and_lengths(stories):
    with stories.context(n_ctx=256) as ctx:
        full = "".join(s.text for s in ctx.generate("Once upon a time", max_tokens=32, sampling=loom.GREEDY))
        assert "little girl" in full
        steps = list(ctx.generate("Once upon a time", max_tokens=32, sampling=loom.GREEDY, stop=["girl"]))
        text = "".join(s.text for s in steps)
        assert text == full[: full.index("girl")]
        assert steps[-1].stop_reason == "stop string"
        steps = list(ctx.generate("Once upon a time", max_tokens=5, sampling=loom.GREEDY))
        assert len(steps) == 5 and steps[-1].stop_reason == "length"


def test_log_probabilities(stories):
    with stories.context(n_ctx=256) as ctx:
        for step in ctx.generate("Once upon a time", max_tokens=6, sampling=loom.GREEDY, logprobs=5):
            assert len(step.top) == 5
            assert step.top[0][0] == step.token and step.top[0][1] == step.logprob
            assert step.logprob is not None and step.logprob <= 0
            assert [lp for _, lp in step.top] == sorted((lp for _, lp in step.top), reverse=True)
            assert sum(math.exp(lp) for _, lp in step.top) <= 1.0 + 1e-5
