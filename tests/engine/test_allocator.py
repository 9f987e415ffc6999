"""The engine keeps freed array memory in the process (rtxviz/engine/allocator.py): a loop that allocates and
frees activation-sized arrays, as a training step does, stops page-faulting them in every iteration. Measured by
the kernel's own count of minor page faults (getrusage), with the tuning on and with RTXVIZ_MALLOC_TUNING=0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rtxviz.engine.allocator import is_glibc

pytestmark = pytest.mark.skipif(not is_glibc(), reason="the tuning is glibc's mallopt; elsewhere nothing is done")

# a step's worth of buffers (1-6 MiB of float32, touched), freed at the end of each iteration
_LOOP = """
import json, resource
import numpy as np
import rtxviz
from rtxviz.engine import allocator

def step():
    arrays = [np.ones(n, dtype=np.float32) for n in (262144, 524288, 1179648, 1572864, 262144, 786432)]
    return sum(float(a[-1]) for a in arrays)

for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"tuned": allocator.tune_malloc(), "faults_per_step": faults / 50}))
"""


def _run(tuning: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    if tuning is not None:
        env["RTXVIZ_MALLOC_TUNING"] = tuning
    else:
        env.pop("RTXVIZ_MALLOC_TUNING", None)
    out = subprocess.run([sys.executable, "-c", _LOOP], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_freed_buffers_are_not_faulted_in_again_each_step() -> None:
    tuned, untuned = _run(None), _run("0")
    assert tuned["tuned"] is True and untuned["tuned"] is False
    # 17.5 MiB of buffers is ~4,500 pages: without the tuning glibc trims the heap's top and each step faults
    # about half of them in again (2,147 measured here); with it the pages stay mapped and a step faults almost none
    assert untuned["faults_per_step"] > 200, untuned
    assert tuned["faults_per_step"] < untuned["faults_per_step"] / 10, (tuned, untuned)
