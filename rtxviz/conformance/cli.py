"""The command line: ``python -m rtxviz.conformance FILE... [--dtype float32] [--device cuda] [--verbose]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..engine import Device
from .format import MalformedFileError, load_file
from .runner import run_case


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rtxviz.conformance FILE... [--dtype float32|float64] [--device cpu|cuda] [--verbose]`."""
    parser = argparse.ArgumentParser(prog="python -m rtxviz.conformance",
                                     description="Check rtxviz against rtx-reference/1 files computed by PyTorch.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="reference files (rtx-reference/1 JSON)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                        help="dtype of the inputs (float32 compares with rtol 1e-4, atol >= 1e-5)")
    parser.add_argument("--device", default=None, help="cpu (default) or cuda / cuda:N")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="also print passing cases with their worst error")
    args = parser.parse_args(argv)

    docs = []
    for f in args.files:  # validate every file before running anything: a malformed file is a usage error
        try:
            docs.append((f, load_file(f)))
        except MalformedFileError as exc:
            print(f"error: malformed reference file {exc}", file=sys.stderr)
            return 2
    device = None
    if args.device is not None:
        device = Device.cpu() if args.device == "cpu" else Device.cuda(int(args.device.partition(":")[2] or 0))
    passed = failed = 0
    for f, doc in docs:
        for case in doc["cases"]:
            r = run_case(case, args.dtype, device)
            label = f"{case['name']}" if len(docs) == 1 else f"{Path(f).name}:{case['name']}"
            if r.passed:
                passed += 1
                if args.verbose:
                    w = r.worst
                    print(f"ok   {label}" + (f": {w.describe()}" if w is not None else ""))
            else:
                failed += 1
                print(f"FAIL {label}: {r.message}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
