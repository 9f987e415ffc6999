"""Run `rtx-reference/1` conformance files (values, gradients, Hessians, Jacobians computed by PyTorch)
against rtxviz, case by case.

Each case is a small program over named tensors. Every step is dispatched by its op name through the registry the
ops fill themselves (`program.dispatch`), the output is differentiated with the case's `grad_output`,
and value, gradients and (where given) Hessian / Jacobian are compared elementwise with
``|got - want| <= atol + rtol * |want|``. The file format is described in ``rtxviz/reference/FORMAT.md``.

Command line::

    python -m rtxviz.conformance rtxviz/reference/ops.json [--dtype float32] [--verbose]

prints one line per failing case and ends with ``N passed, N failed``; exit status 0 (all pass), 1 (a case
failed) or 2 (a file is malformed).

>>> from rtxviz.conformance import run_file, reference_path
>>> results = run_file(reference_path("ops.json"))       # doctest: +SKIP
>>> sum(r.passed for r in results), len(results)        # doctest: +SKIP
(187, 187)
"""

from __future__ import annotations

from .cli import main
from .format import FORMAT, MalformedFileError, load_file, reference_path
from .program import UnsupportedOp, build, dispatch
from .runner import CaseResult, Mismatch, run_case, run_file

__all__ = ["FORMAT", "CaseResult", "MalformedFileError", "Mismatch", "UnsupportedOp", "build", "dispatch",
           "load_file", "main", "reference_path", "run_case", "run_file"]
