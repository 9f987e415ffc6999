"""Known event streams for the browser tests and the frontend benchmark (schema v1, rtxviz/schema.py)."""

from __future__ import annotations

import math
import random
from typing import Any

XSS = "<img src=x onerror=alert(1)>"


def _st(shape: list[int], norm: float | None, values: list | None = None, nan: int = 0, inf: int = 0,
        lo: float | None = None, hi: float | None = None, mean: float | None = None) -> dict[str, Any]:
    s = {"shape": shape, "norm": norm, "min": lo, "max": hi, "mean": mean, "nan": nan, "inf": inf}
    if values is not None:
        s["values"] = values
    return s


def ev(kind: str, step: int | None = 0, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "kind": kind, "t": 0.0, "step": step, **fields}


def known_graph() -> list[dict[str, Any]]:
    """A small model step with every thing the page must show.

    Forward: x (input) @ W (a parameter named with an XSS payload) -> matmul, + model.fc.bias -> add, a checkpointed
    segment on it, sum -> loss; a side branch exp (never reached by backward: its gradient stays "not computed").
    Backward: the loss gets 1, the checkpoint segment is recomputed (relu, mul inside), the segment's backward
    yields NaN for the add, the matmul gets exactly zero, one recomputed node a vanishing 1e-9, the sum 1e-2.
    Then step 1 is a graph-cache hit.
    """
    g = [
        ev("run_start", None, name="known-graph"),
        ev("step_begin", 0),
        ev("graph_cache", 0, action="miss", key="mlp"),
        ev("leaf", 0, id=1, name="x", shape=[2, 3], dtype="float32", device="cpu", requires_grad=False,
           values=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ev("leaf", 0, id=2, name=XSS, shape=[3, 2], dtype="float32", device="cpu", requires_grad=True, param=True,
           values=[0.5, -0.25, 0.125, 1.5, -2.0, 0.75]),
        ev("leaf", 0, id=3, name="model.fc.bias", shape=[2], dtype="float32", device="cpu", requires_grad=True,
           param=True, values=[0.1, -0.1]),
        ev("node", 0, id=1, op="matmul", inputs=[{"leaf": 1}, {"leaf": 2}], shape=[2, 2], dtype="float32",
           device="cpu", module="model.fc", rule="dA = dC @ Bᵀ, dB = Aᵀ @ dC", saved_bytes=48,
           values=[-5.25, 4.0, -11.875, 9.625]),
        ev("node", 0, id=2, op="add", inputs=[{"node": 1}, {"leaf": 3}], shape=[2, 2], dtype="float32",
           device="cpu", module="model.fc", rule="dA = dC, dB = dC", saved_bytes=0,
           values=[-5.15, 3.9, -11.775, 9.525]),
        ev("checkpoint", 0, phase="begin", segment=7, name="block"),
        ev("node", 0, id=3, op="checkpoint", inputs=[{"node": 2}], shape=[2, 2], dtype="float32", device="cpu",
           module="model.block", rule="recompute the segment, then backward through it", saved_bytes=16),
        ev("checkpoint", 0, phase="end", segment=7, ops=2, saved_bytes=16),
        ev("node", 0, id=4, op="sum", inputs=[{"node": 3}], shape=[], dtype="float32", device="cpu",
           module=None, rule="dA = dC · 1", saved_bytes=0, values=[185.32]),
        ev("node", 0, id=5, op="exp", inputs=[{"node": 2}], shape=[2, 2], dtype="float32", device="cpu",
           module="model.aux", rule="dA = dC · exp(A)", saved_bytes=16),
        ev("backward_begin", 0, roots=[{"node": 4}], create_graph=False),
        ev("grad", 0, node=4, output=_st([], 1.0, [1.0], lo=1.0, hi=1.0, mean=1.0),
           inputs=[_st([2, 2], 1e-2, [0.005, 0.005, 0.005, 0.005], lo=0.005, hi=0.005, mean=0.005)]),
        ev("checkpoint", 0, phase="recompute_begin", segment=7, ops=2),
        ev("leaf", 0, id=4, name=None, shape=[2, 2], dtype="float32", device="cpu", requires_grad=True),
        ev("node", 0, id=6, op="relu", inputs=[{"leaf": 4}], shape=[2, 2], dtype="float32", device="cpu",
           module="model.block", rule="dA = dC · (A > 0)", saved_bytes=16),
        ev("node", 0, id=7, op="mul", inputs=[{"node": 6}, {"node": 6}], shape=[2, 2], dtype="float32",
           device="cpu", module="model.block", rule="dA = dC · B, dB = dC · A", saved_bytes=32),
        ev("grad", 0, node=7, output=_st([2, 2], 1e-2), inputs=[_st([2, 2], 2e-3), _st([2, 2], 2e-3)]),
        ev("grad", 0, node=6, output=_st([2, 2], 4e-3), inputs=[_st([2, 2], 1e-9, lo=0.0, hi=1e-9, mean=5e-10)]),
        ev("checkpoint", 0, phase="recompute_end", segment=7),
        ev("grad", 0, node=3, output=_st([2, 2], 1e-2), inputs=[_st([2, 2], None, nan=4)]),
        ev("anomaly", 0, phase="backward", op="checkpoint", node=3, nan=4, inf=0, origin=True, bad_inputs=[0],
           message="backward of checkpoint node #3 produced NaN/Inf gradients for input(s) [0]"),
        ev("grad", 0, node=2, output=_st([2, 2], None, nan=4), inputs=[_st([2, 2], 0.0, [0.0, 0.0, 0.0, 0.0],
           lo=0.0, hi=0.0, mean=0.0), _st([2], 3.5, [2.5, 2.449489742783178], lo=2.449489742783178, hi=2.5,
           mean=2.474744871391589)]),
        ev("grad", 0, node=1, output=_st([2, 2], 0.0, [0.0, 0.0, 0.0, 0.0], lo=0.0, hi=0.0, mean=0.0),
           inputs=[None, _st([3, 2], 0.0, [0.0] * 6, lo=0.0, hi=0.0, mean=0.0)]),
        ev("leaf_grad", 0, leaf=3, stats=_st([2], 3.5, [2.5, 2.449489742783178], lo=2.449489742783178, hi=2.5,
           mean=2.474744871391589)),
        ev("leaf_grad", 0, leaf=2, stats=_st([3, 2], 0.0, [0.0] * 6, lo=0.0, hi=0.0, mean=0.0)),
        ev("backward_end", 0),
        ev("step_end", 0),
        ev("step_begin", 1),
        ev("graph_cache", 1, action="hit", key="mlp"),
        ev("step_end", 1),
    ]
    return g


def big_graph(n_blocks: int = 12, ops_per_block: int = 160, seed: int = 0) -> list[dict[str, Any]]:
    """A transformer-like step: `n_blocks` identical blocks of `ops_per_block` ops each (plus params), residual
    links between blocks, grads on every node. ~n_blocks * ops_per_block nodes."""
    rnd = random.Random(seed)
    out = [ev("run_start", None, name=f"big-{n_blocks}x{ops_per_block}"), ev("step_begin", 0)]
    nid = 0
    lid = 0
    lid += 1
    out.append(ev("leaf", 0, id=lid, name="input", shape=[32, 64], dtype="float32", device="cpu",
                  requires_grad=False))
    prev: dict[str, int] = {"leaf": lid}
    nodes = []
    ops = ["matmul", "add", "relu", "mul", "sum", "exp", "div", "sub", "transpose", "reshape"]
    for b in range(n_blocks):
        block_in = prev
        recent: list[dict[str, int]] = [prev]
        for k in range(ops_per_block):
            sub = f"model.layers.{b}.{['attn', 'mlp'][k * 2 // ops_per_block]}"
            nid += 1
            op = ops[k % len(ops)]
            inputs = [recent[-1]]
            if k % 4 == 0:
                lid += 1
                out.append(ev("leaf", 0, id=lid, name=f"{sub}.w{k}", shape=[64, 64], dtype="float32", device="cpu",
                              requires_grad=True, param=True))
                inputs.append({"leaf": lid})
            elif k % 7 == 3 and len(recent) > 3:
                inputs.append(recent[-3])
            out.append(ev("node", 0, id=nid, op=op, inputs=inputs, shape=[32, 64], dtype="float32", device="cpu",
                          module=sub, rule=f"rule of {op}", saved_bytes=8192))
            nodes.append(nid)
            recent.append({"node": nid})
        nid += 1
        out.append(ev("node", 0, id=nid, op="add", inputs=[recent[-1], block_in], shape=[32, 64], dtype="float32",
                      device="cpu", module=f"model.layers.{b}", rule="dA = dC, dB = dC", saved_bytes=0))
        nodes.append(nid)
        prev = {"node": nid}
    out.append(ev("backward_begin", 0, roots=[prev]))
    for n in reversed(nodes):
        norm = 10 ** rnd.uniform(-6, 1)
        out.append(ev("grad", 0, node=n, output=_st([32, 64], norm), inputs=[_st([32, 64], norm * 0.9)]))
    out.append(ev("backward_end", 0))
    out.append(ev("step_end", 0))
    return out


def chain_graph(n: int) -> list[dict[str, Any]]:
    """A plain chain of n ops in one module-less graph (deep: a stack-overflow case for recursive layouts)."""
    out = [ev("run_start", None, name=f"chain-{n}"), ev("step_begin", 0),
           ev("leaf", 0, id=1, name="x", shape=[4], dtype="float32", device="cpu", requires_grad=True)]
    prev = {"leaf": 1}
    for i in range(1, n + 1):
        out.append(ev("node", 0, id=i, op="tanh" if i % 2 else "mul", inputs=[prev], shape=[4], dtype="float32",
                      device="cpu", module=f"model.blocks.{(i - 1) // 50}", rule="r", saved_bytes=16))
        prev = {"node": i}
    return out


def finite(x: float) -> bool:
    return math.isfinite(x)


def gpt_graph(n_blocks: int = 12, ops_per_block: int = 200, seed: int = 0) -> list[dict[str, Any]]:
    """`big_graph`'s blocks followed by an output section as a GPT has it: a final layer_norm, the head's matmul
    with its weight, and the loss (module paths model.ln_f, model.head; the loss module-less); backward from the
    loss. ~n_blocks * ops_per_block nodes."""
    body = big_graph(n_blocks, ops_per_block, seed)
    cut = next(i for i, e in enumerate(body) if e["kind"] == "backward_begin")
    head, tail = body[:cut], body[cut:]
    last = tail[0]["roots"][0]
    nid = max(e["id"] for e in head if e["kind"] == "node")
    lid = max(e["id"] for e in head if e["kind"] == "leaf")
    sh = dict(dtype="float32", device="cpu")
    head += [
        ev("node", 0, id=nid + 1, op="layer_norm", inputs=[last], shape=[32, 64], module="model.ln_f",
           rule="r", saved_bytes=8192, **sh),
        ev("leaf", 0, id=lid + 1, name="model.head.weight", shape=[64, 100], requires_grad=True, param=True, **sh),
        ev("node", 0, id=nid + 2, op="matmul", inputs=[{"node": nid + 1}, {"leaf": lid + 1}], shape=[32, 100],
           module="model.head", rule="r", saved_bytes=8192, **sh),
        ev("node", 0, id=nid + 3, op="cross_entropy", inputs=[{"node": nid + 2}], shape=[], module=None,
           rule="r", saved_bytes=0, **sh),
    ]
    grads = [ev("grad", 0, node=n, output=_st(s, 1.0), inputs=[_st(s, 0.5)])
             for n, s in ((nid + 3, []), (nid + 2, [32, 100]), (nid + 1, [32, 64]))]
    tail[0] = ev("backward_begin", 0, roots=[{"node": nid + 3}])
    return head + tail[:1] + grads + tail[1:]


def norm_ladder(norms: list[float]) -> list[dict[str, Any]]:
    """One op per norm, each fed by its own leaf, each op's gradient of that norm (for badge colours)."""
    out = [ev("run_start", None, name="norm-ladder"), ev("step_begin", 0)]
    for i, _ in enumerate(norms, 1):
        out.append(ev("leaf", 0, id=i, name=f"p{i}", shape=[3], dtype="float32", device="cpu", requires_grad=True,
                      param=True))
        out.append(ev("node", 0, id=i, op="tanh", inputs=[{"leaf": i}], shape=[3], dtype="float32", device="cpu",
                      module=None, rule="r", saved_bytes=12))
    out.append(ev("backward_begin", 0, roots=[{"node": 1}]))
    for i, n in enumerate(norms, 1):
        out.append(ev("grad", 0, node=i, output=_st([3], n), inputs=[_st([3], n)]))
    out += [ev("backward_end", 0), ev("step_end", 0)]
    return out
