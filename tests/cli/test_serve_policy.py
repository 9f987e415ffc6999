"""`rtxviz serve --policy`: by default the whole server runs under Linux's SCHED_IDLE (issue 21: on the machine
that trains, the training gets the cores the moment it wants them), and it still stores and answers; ``normal``
keeps the usual policy."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rtxviz.cli import build_parser
from rtxviz.cli.serve import POLICIES, idle_policy_supported

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(db: Path, *args: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", str(db),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving on" in line, line + proc.stdout.read()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/api/health", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the server did not answer")


def _policies(pid: int) -> set[int]:
    return {os.sched_getscheduler(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")}


def _post_and_read(url: str) -> list[int]:
    body = b"\n".join(json.dumps({"v": 1, "kind": "step_begin", "t": 0.0, "step": i}).encode() for i in range(3))
    req = urllib.request.Request(url + "/api/runs/r1/events", data=body,
                                 headers={"Content-Type": "application/x-ndjson"})
    assert json.loads(urllib.request.urlopen(req, timeout=30).read())["count"] == 3
    page = json.loads(urllib.request.urlopen(url + "/api/runs/r1/events", timeout=30).read())
    return [e["seq"] for e in page["events"]]


def test_the_default_policy_is_idle() -> None:
    assert build_parser().parse_args(["serve"]).policy == "idle"
    assert build_parser().parse_args(["serve", "--policy", "normal"]).policy == "normal"
    assert POLICIES == ("idle", "normal")


@pytest.mark.skipif(not idle_policy_supported(), reason="SCHED_IDLE is Linux's")
@pytest.mark.parametrize("policy", ["default", "normal"])
def test_every_server_thread_runs_under_the_policy_and_stores(tmp_path: Path, policy: str) -> None:
    args = () if policy == "default" else ("--policy", policy)
    proc, url = _serve(tmp_path / "r.db", *args)
    try:
        assert _post_and_read(url) == [1, 2, 3]  # the threads that parse, store and read exist by now
        want = os.SCHED_IDLE if policy == "default" else os.SCHED_OTHER
        assert _policies(proc.pid) == {want}
    finally:
        proc.terminate()
        proc.wait(30)


def test_an_unknown_policy_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "rtxviz.cli", "serve", "--policy", "low"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--policy" in out.stderr and "'low'" in out.stderr, out.stderr


@pytest.mark.skipif(not idle_policy_supported(), reason="SCHED_IDLE is Linux's")
def test_a_refused_serve_leaves_the_calling_process_policy_alone(tmp_path: Path) -> None:
    from rtxviz import cli

    # refused (a SQLite file has one writer process): the policy is applied only once serving is certain
    assert cli.main(["serve", "--port", "0", "--db", str(tmp_path / "r.db"), "--nice", "0", "--workers", "2"]) == 2
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
