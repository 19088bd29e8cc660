"""Several threads, each with a Context of its own on one Model, give what
one context gives alone: ctypes releases the GIL around each call, so
their decodes overlap in libloom."""

from __future__ import annotations

import threading

import numpy

import loom

PROMPTS = ["Once upon a time", "The quick brown fox", "Lily and Tom went to the park. They", "One day"]


def work(model: loom.Model, prompt: str) -> tuple[list[int], numpy.ndarray]:
    with model.context(n_ctx=256) as ctx:
        ids = [s.token for s in ctx.generate(prompt, max_tokens=32, sampling=loom.GREEDY)]
        return ids, ctx.embed(prompt)


def test_threads_with_a_context_each_equal_one(shared, runtime):
    with loom.Model(shared / "models" / "stories-llama-d256-q8_0.gguf", runtime=runtime) as m:
        alone = [work(m, p) for p in PROMPTS]
        results: dict[int, tuple[list[int], numpy.ndarray]] = {}
        errors: list[BaseException] = []
        start = threading.Barrier(len(PROMPTS) * 2)

        def run(i: int) -> None:
            try:
                start.wait()
                for _ in range(3):
                    results[i] = work(m, PROMPTS[i % len(PROMPTS)])
            except BaseException as e:  # reported on the main thread
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS) * 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(results) == len(threads)
        for i, (ids, emb) in results.items():
            want_ids, want_emb = alone[i % len(PROMPTS)]
            assert ids == want_ids and len(ids) > 0
            assert numpy.array_equal(emb, want_emb)
