"""Fixtures of the binding's tests: the shared reference data (models and
llama.cpp's golden outputs, in ../shared beside the source tree or
$LOOM_TEST_DATA; tests that need it skip, saying so, without it) and the
C host the results are compared with (loom_c_reference, built with the
tests; $LOOM_C_REFERENCE)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from dataclasses import dataclass

import numpy
import pytest

import loom

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _data_dir() -> pathlib.Path:
    env = os.environ.get("LOOM_TEST_DATA")
    return pathlib.Path(env) if env else ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared() -> pathlib.Path:
    d = _data_dir()
    if not (d / "golden").is_dir():
        pytest.skip(f"reference data not found at {d} (set LOOM_TEST_DATA)")
    return d


@pytest.fixture(scope="session")
def runtime():
    """One thread, as the C reference runs: the same sums in the same order."""
    with loom.Runtime(n_threads=1) as rt:
        yield rt


@pytest.fixture(scope="session")
def stories(shared, runtime):
    with loom.Model(shared / "models" / "stories260K-f32.gguf", runtime=runtime) as m:
        yield m


def golden(shared: pathlib.Path, model: str, prompt_id: str) -> dict:
    return json.loads((shared / "golden" / model / f"{prompt_id}.json").read_text())


@dataclass
class CResult:
    greedy: list[int]
    embedding: numpy.ndarray


@pytest.fixture(scope="session")
def c_reference():
    """c_reference(model_path, prompt, n_predict): what the C API gives."""
    exe = os.environ.get("LOOM_C_REFERENCE") or str(ROOT / "build" / "tests" / "loom_c_reference")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"the C reference host {exe} is not built (set LOOM_C_REFERENCE)")

    def run(model: pathlib.Path, prompt: str, n_predict: int) -> CResult:
        out = subprocess.run([exe, str(model), prompt, str(n_predict), "1"], capture_output=True, text=True,
                             check=True).stdout
        lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())
        return CResult(greedy=[int(t) for t in lines["greedy"].split()],
                       # %.9g text read back as float32: the value exactly
                       embedding=numpy.array(lines["embedding"].split(), dtype=numpy.float32))

    return run
