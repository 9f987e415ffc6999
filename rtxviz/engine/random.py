"""rtxviz's seedable random generator. Samples are drawn on the CPU and moved to the device, so a seed gives
the same numbers on numpy and cupy (a teaching engine values reproducibility over GPU sampling speed)."""

from __future__ import annotations

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed every random draw of rtxviz (randn, rand, init, dropout, shuffling).

    >>> manual_seed(0)
    """
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return _generator


def get_state() -> dict:
    """The generator's state, to replay random ops exactly (checkpoint recomputation)."""
    return dict(_generator.bit_generator.state)


def set_state(state: dict) -> None:
    _generator.bit_generator.state = state
