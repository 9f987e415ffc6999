"""What watching a PyTorch model costs (issue 18, point 4). Not a test: it prints numbers.

    python benchmarks/bench_torch_watch.py [--rounds 5] [--steps 10] [--threads 1]
    python benchmarks/bench_torch_watch.py --probe [--rounds 3] [--steps 5]   # the seams one at a time, no server

torchvision's resnet18 (random weights, 10 classes) trains on random 64x64 images, batch 16, SGD with momentum,
in three variants alternating round by round in a shuffled order, in one process, beside a live `rtxviz serve`
on loopback (a subprocess at its default lower priority): unwatched; `rtxviz.torch.watch(model,
sample_every=10)`; and watched every step. Each round runs `--steps` training steps per variant (steps inferred
from `optimizer.step()`, as a loop that never calls `run.step` gets) and takes their mean (with sample_every=10
one step in ten is the sampled one); after a
watched variant the benchmark waits, untimed, until the server has acknowledged every event, so the server's work
on one variant's events does not land in the next variant's time. Overheads are the median of each round's
ratio to that round's unwatched step (drift on a shared machine affects those less than the medians' ratio).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from serving import server_process  # noqa: E402

import rtxviz.torch as rt  # noqa: E402


def resnet18() -> torch.nn.Module:
    # torchvision 0.28's compiled ops do not load beside the CPU torch 2.13 wheel; the models need none of them
    # (tests/torch/_torchvision.py says more)
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


def probe(rounds: int, steps: int, batch: int = 4) -> None:
    """The seams one at a time, in process, no server (events to a null sink): where a watched step's time goes."""
    from torch.overrides import TorchFunctionMode

    from rtxviz.torch.recorder import TorchRecorder

    torch.manual_seed(0)
    model = resnet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 3, 64, 64), torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    class BareMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def recorder(recording: bool):
        rec = TorchRecorder(lambda ev: None, model).attach()
        rec.recording = recording
        try:
            yield
        finally:
            rec.detach()

    variants = {
        "unwatched": contextlib.nullcontext,
        "seams attached, not recording (an unsampled step)": lambda: recorder(False),
        "recording, null sink (a sampled step, no server)": lambda: recorder(True),
        "a bare function mode": BareMode,
        "bare saved-tensor hooks": lambda: torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach(),
                                                                                  lambda t: t),
    }
    for _ in range(2):
        step()
    times: dict[str, list[float]] = {k: [] for k in variants}
    rng = random.Random(0)
    for _ in range(rounds):
        order = list(variants.items())
        rng.shuffle(order)
        for name, make in order:
            per = []
            with make():
                for _ in range(steps):
                    t0 = time.perf_counter()
                    step()
                    per.append(time.perf_counter() - t0)
            times[name].append(statistics.median(per) * 1e3)
    base = times["unwatched"]
    print(f"probe: resnet18, batch {batch}, 3x64x64, {rounds} rounds x {steps} steps (median step per round)")
    for k, v in times.items():
        ratios = [a / b for a, b in zip(v, base, strict=True)]
        print(f"  {k:52s} {statistics.median(v):8.1f} ms  {100 * (statistics.median(ratios) - 1):+6.1f}%")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (the server needs a core)")
    ap.add_argument("--probe", action="store_true", help="the seams one at a time, in process, no server")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.probe:
        probe(args.rounds, args.steps)
        return
    torch.manual_seed(0)
    model = resnet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(16, 3, 64, 64)
    y = torch.randint(0, 10, (16,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()  # warm up the allocator and the kernels
    runs: list = []
    times: dict[str, list[float]] = {"unwatched": [], "sample_every=10": [], "every step": []}
    with tempfile.TemporaryDirectory() as tmp, server_process(str(Path(tmp) / "bench.db")) as url:
        def variant(every: int | None) -> float:
            ctx = (rt.watch(model, url, run_name=f"bench-resnet18-every{every}", sample_every=every,
                            close_timeout=60, max_queue=1_000_000) if every else contextlib.nullcontext())
            per = []
            with ctx as run:
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    step()
                    per.append(time.perf_counter() - t0)
                if run is not None:
                    runs.append(run)
                    deadline = time.monotonic() + 60
                    while run.stats()["queued"] and time.monotonic() < deadline:  # untimed: let the server catch up
                        run._wake.set()
                        time.sleep(0.01)
            return sum(per) / len(per) * 1e3  # the mean: with sample_every=10, one step in ten is the sampled one

        rng = random.Random(0)
        names = {"unwatched": None, "sample_every=10": 10, "every step": 1}
        for r in range(args.rounds):
            order = list(names.items())
            rng.shuffle(order)
            for name, every in order:
                times[name].append(variant(every))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in times.items()), flush=True)
        stored = 0
        for run in runs:
            with urllib.request.urlopen(f"{url}/api/runs/{run.id}") as resp:
                stored += json.loads(resp.read())["n_events"]
    base = times["unwatched"]
    print(f"\nresnet18, batch 16, 3x64x64, SGD momentum, {args.threads} torch thread(s), {args.steps} steps a round, "
          f"{args.rounds} rounds (ms per step: each round's mean step, then the median over rounds)")
    for k, v in times.items():
        ratios = [a / b for a, b in zip(v, base, strict=True)]
        print(f"  {k:16s} {statistics.median(v):8.1f} ms   overhead {100 * (statistics.median(ratios) - 1):+6.1f}%"
              f"   (rounds: {' '.join(f'{100 * (q - 1):+.0f}%' for q in ratios)})")
    sent = sum(run.stats()["sent"] for run in runs)
    dropped = sum(run.stats()["dropped"] for run in runs)
    print(f"  events sent {sent}, dropped {dropped}, stored by the server {stored}")


if __name__ == "__main__":
    main()
