"""Real engine runs for the browser tests: the engine watched through the emitter (`rtxviz.events.watch`) with a
transport that keeps the events, which the tests then post to the test server as a recorded run would arrive."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

import rtxviz.events as events
from rtxviz import Tensor, Variable


class KeepEvents:
    """A transport that keeps every event it is sent (seq is assigned by the server they are posted to)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, run: Any, lines: list, dropped: int) -> None:
        self.events.extend(json.loads(line) for line in lines)

    def close(self) -> None:
        pass


def recorded(name: str, body: Callable[[Any], None], **options: Any) -> list[dict[str, Any]]:
    """The events of running `body(run)` under `watch`, run_start to run_end."""
    keep = KeepEvents()
    with events.watch(transport=keep, run_name=name, flush_interval=0.01, **options) as run:
        try:
            body(run)
        except Exception as exc:  # the run's error is part of what the page shows
            run.error = exc  # type: ignore[attr-defined]
    return keep.events


def var(values: list[float], name: str | None = None, requires_grad: bool = True) -> Variable:
    v = Variable.from_tensor(Tensor(np.array(values, dtype=np.float64)), name=name)
    v.requires_grad = requires_grad
    return v


def inplace_error_run() -> list[dict[str, Any]]:
    """exp saves its output; the output is then doubled in place, so exp's backward raises (version mismatch)."""
    def body(run: Any) -> None:
        with run.step(0):
            x = var([0.5, -1.0, 2.0], "x")
            y = x.exp()
            y.mul_(2.0)
            y.sum().backward()
    return recorded("inplace-error", body)


def anomaly_error_run() -> list[dict[str, Any]]:
    """log of a negative number under detect_anomaly: the forward NaN makes it raise AnomalyError."""
    from rtxviz.debug.anomaly import detect_anomaly

    def body(run: Any) -> None:
        with run.step(0):
            x = var([1.0, -1.0], "x")
            w = var([0.0, 2.0], "w")
            with detect_anomaly(forward=False):
                ((x * w).sqrt()).sum().backward()
    return recorded("anomaly-error", body)


MICROGRAD_B = 6.8813735870195432  # micrograd's neuron bias: tanh(x1*w1 + x2*w2 + b) = 0.7071 (= 1/sqrt(2))


def neuron_run() -> list[dict[str, Any]]:
    """micrograd's neuron by hand: o = tanh(x1*w1 + x2*w2 + b), x1 = 2, x2 = 0, w1 = -3, w2 = 1. By hand (the
    closed form): o = 1/sqrt(2), do/dn = 1 - o^2 = 0.5, so x1.grad = w1 * 0.5 = -1.5, w1.grad = x1 * 0.5 = 1,
    x2.grad = w2 * 0.5 = 0.5, w2.grad = x2 * 0.5 = 0."""
    def body(run: Any) -> None:
        with run.step(0):
            x1, x2, w1, w2 = var([2.0], "x1"), var([0.0], "x2"), var([-3.0], "w1"), var([1.0], "w2")
            b = var([MICROGRAD_B], "b")
            ((x1 * w1 + x2 * w2 + b).tanh()).sum().backward()
    return recorded("neuron", body)


def fan_out_run() -> list[dict[str, Any]]:
    """b = a + a with a = 3: the two arrivals at a are 1 and 1, its gradient their sum, 2."""
    def body(run: Any) -> None:
        with run.step(0):
            a = var([3.0], "a")
            (a + a).sum().backward()
    return recorded("fan-out", body)


def small_mlp_run() -> list[dict[str, Any]]:
    """micrograd's MLP in miniature, by scalars: two inputs, a hidden layer of two tanh neurons, one tanh output
    neuron with a bias, its squared error against a target: 26 nodes (17 ops, 9 leaves)."""
    def neuron(xs: list[Variable], ws: list[float], b: float | None, name: str) -> Variable:
        terms = [x * var([w], f"{name}.w{i}") for i, (x, w) in enumerate(zip(xs, ws, strict=True))]
        acc = terms[0] + terms[1]
        return (acc + var([b], f"{name}.b") if b is not None else acc).tanh()

    def body(run: Any) -> None:
        with run.step(0):
            xs = [var([2.0], "x1", requires_grad=False), var([-1.0], "x2", requires_grad=False)]
            hidden = [neuron(xs, [0.5, -0.3], None, "h1"), neuron(xs, [-0.2, 0.4], None, "h2")]
            out = neuron(hidden, [1.0, -1.0], 0.2, "o")
            ((out - 1.0) * (out - 1.0)).sum().backward()
    return recorded("small-mlp", body)
