"""The strong-Wolfe line search LBFGS uses (PyTorch's port of minFunc's), with its cubic interpolation.

>>> cubic_interpolate(0.0, 1.0, -1.0, 1.0, 1.0, 1.0)  # f = 1 - x + x², sampled at 0 and 1: minimum at 1/2
0.5
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..engine.device import xp_of


def cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                      bounds: tuple[float, float] | None = None) -> float:
    """The minimiser of the cubic through (x1, f1, f1'=g1) and (x2, f2, g2), clamped to `bounds` (default: the
    interval between the two points); the bounds' midpoint when the cubic has no real minimiser."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def strong_wolfe(obj_func: Callable[[Any, float, Any], tuple[float, Any]], x: Any, t: float, d: Any, f: float,
                 g: Any, gtd: float, c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_ls: int = 25) -> tuple[float, Any, float, int]:
    """Find a step t along d from x meeting the strong Wolfe conditions (sufficient decrease c1, curvature c2).

    `obj_func(x, t, d)` returns (loss, flat gradient) at x + t·d. Returns (loss, flat gradient, t, the number
    of evaluations), as PyTorch's `_strong_wolfe`.
    """
    d_norm = float(xp_of(d).abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(g_new @ d)

    # bracket an interval containing a point satisfying the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        # extrapolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:  # reached the evaluation budget while bracketing
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point satisfies the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:  # the bracket is too small
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # keep away from the bracket's ends, unless progress has been poor twice in a row
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # Armijo condition not met, or not lower than the lowest point: the new point bounds from above
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True  # Wolfe conditions met
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # the old high becomes the new low
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
