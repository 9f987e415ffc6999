"""Gradient health classes: the thresholds, the class of a summary, and the colours every drawing uses.

One table for the SVG drawings and the page (the frontend's copy is generated from `as_json()` at build time),
so "vanishing" means the same norm and the same colour everywhere.

>>> grad_class(3e-9), grad_class(0.0), grad_class(None, nan=2), grad_class(5.0)
('vanishing', 'zero', 'nonfinite', 'ok')
>>> GradStat.of([3.0, 4.0]).norm, GradStat(2e4).status()
(5.0, 'exploding')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Gradient norms below this are vanishing (exactly 0 is its own class, "zero"), above `EXPLODING` exploding.
VANISHING = 1e-7
EXPLODING = 1e3


@dataclass(frozen=True)
class GradClass:
    """How one class of gradient looks: `colour` for edges and borders, `fill` for a marked node (None: the
    node keeps its kind's fill), `word` added to labels, `legend` its line in a legend. "ok" edges take their
    colour from the `RAMP` instead."""

    name: str
    colour: str
    fill: str | None
    word: str
    legend: str
    rank: int  # how alarming, for picking the worst of several gradients


#: Every class, least to most alarming. "none": no gradient (not computed yet, or not captured).
CLASSES: dict[str, GradClass] = {c.name: c for c in (
    GradClass("none", "#9ca3af", None, "", "not computed yet", 0),
    GradClass("ok", "#374151", None, "", "‖grad‖ on a log scale", 1),
    GradClass("zero", "#6b7280", "#ffffff", "zero", "exactly 0", 2),
    GradClass("vanishing", "#7b3294", "#f3e8ff", "vanishing", f"vanishing: ‖grad‖ < {VANISHING:g}", 3),
    GradClass("exploding", "#d7301f", "#ffedd5", "exploding", f"exploding: ‖grad‖ > {EXPLODING:g}", 4),
    GradClass("nonfinite", "#000000", "#fee2e2", "NaN/Inf", "NaN or Inf in the gradient", 5),
)}

#: The colour ramp of "ok" norms: viridis stops (colour-blind safe) over log10(norm) from RAMP_LOG_MIN to
#: RAMP_LOG_MAX, i.e. from the vanishing to the exploding threshold.
RAMP = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
RAMP_LOG_MIN = round(math.log10(VANISHING))
RAMP_LOG_MAX = round(math.log10(EXPLODING))


def grad_class(norm: float | None, nan: int = 0, inf: int = 0) -> str:
    """The class name of a gradient summary (a None norm means it was not finite)."""
    if nan or inf or norm is None or not math.isfinite(norm):
        return "nonfinite"
    if norm == 0:
        return "zero"
    if norm < VANISHING:
        return "vanishing"
    if norm > EXPLODING:
        return "exploding"
    return "ok"


def ramp_colour(norm: float) -> str:
    """The ramp colour of a norm, as ``#rrggbb``.

    >>> ramp_colour(1e-7), ramp_colour(1e3)
    ('#440154', '#fde725')
    """
    t = (math.log10(max(norm, 1e-30)) - RAMP_LOG_MIN) / (RAMP_LOG_MAX - RAMP_LOG_MIN)
    x = min(1.0, max(0.0, t)) * (len(RAMP) - 1)
    i = min(len(RAMP) - 2, int(x))
    f = x - i
    rgb = [round(a + (b - a) * f) for a, b in zip(RAMP[i], RAMP[i + 1], strict=True)]
    return "#" + "".join(f"{v:02x}" for v in rgb)


def as_json() -> dict[str, Any]:
    """Thresholds, classes and ramp as plain JSON: what the frontend build turns into TypeScript constants."""
    return {
        "vanishing": VANISHING, "exploding": EXPLODING, "ramp": [list(c) for c in RAMP],
        "ramp_log_min": RAMP_LOG_MIN, "ramp_log_max": RAMP_LOG_MAX,
        "classes": {c.name: {"colour": c.colour, "fill": c.fill, "word": c.word, "legend": c.legend,
                             "rank": c.rank} for c in CLASSES.values()},
    }


@dataclass(frozen=True)
class GradStat:
    """A gradient's summary as drawings need it: its L2 norm (None when not finite) and NaN / Inf counts."""

    norm: float | None
    nan: int = 0
    inf: int = 0

    def status(self, vanishing: float = VANISHING, exploding: float = EXPLODING) -> str:
        """Its class name (see `CLASSES`), with thresholds that a drawing may override."""
        if self.nan or self.inf or self.norm is None:
            return "nonfinite"
        if self.norm == 0:
            return "zero"
        if self.norm < vanishing:
            return "vanishing"
        if self.norm > exploding:
            return "exploding"
        return "ok"

    @staticmethod
    def of(array: Any) -> GradStat:
        """Summarise a numpy or cupy array (a Variable's `.data`), or anything numpy reads."""
        from .stats import norm, tensor_stats

        if type(array) is not np.ndarray and not hasattr(array, "__cuda_array_interface__"):
            array = np.asarray(array)
        if array.size == 0:
            return GradStat(0.0)
        n = norm(array)  # one pass (on the device for cupy); counts only when it is not finite
        if n is not None:
            return GradStat(n)
        s = tensor_stats(array)
        return GradStat(s["norm"], s["nan"], s["inf"])

    @staticmethod
    def from_stats(stats: dict | None) -> GradStat | None:
        """From an event's `Stats` dict (norm null means not finite, see its nan/inf counts)."""
        if not stats:
            return None
        nan, inf = int(stats.get("nan") or 0), int(stats.get("inf") or 0)
        norm = stats.get("norm")
        if norm is None and not (nan or inf):
            nan = 1  # a null norm with no counts: the summary saw a non-finite value
        return GradStat(None if norm is None else float(norm), nan, inf)


def worst(stats: Iterable[GradStat | None]) -> GradStat | None:
    """The most alarming of several gradient summaries (by class rank; the largest norm among equals).

    >>> worst([GradStat(1.0), GradStat(3e-9), GradStat(2.0)]).norm
    3e-09
    """
    best: GradStat | None = None
    for s in stats:
        if s is None:
            continue
        if best is None:
            best = s
            continue
        a, b = CLASSES[s.status()].rank, CLASSES[best.status()].rank
        if a > b or (a == b and (s.norm or 0.0) > (best.norm or 0.0)):
            best = s
    return best
