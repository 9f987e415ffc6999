import { test } from "node:test";
import assert from "node:assert/strict";
import { RunModel, StepGraph, cacheBadgeText, cacheKind } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

const ev = (kind: string, fields: Record<string, unknown> = {}, step: number | null = 0): Ev => ({ v: 1, kind, t: 0, step, ...fields });
const leaf = (id: number, name: string | null, extra: Record<string, unknown> = {}) =>
  ev("leaf", { id, name, shape: [2], dtype: "float32", device: "cpu", requires_grad: true, ...extra });
const node = (id: number, op: string, inputs: unknown[], module: string | null = null) =>
  ev("node", { id, op, inputs, shape: [2], dtype: "float32", device: "cpu", module });

test("nodes get structural keys that repeat across steps", () => {
  const m = new RunModel();
  m.apply(leaf(1, "model.w", { param: true }));
  for (const step of [0, 1]) {
    m.apply(ev("step_begin", {}, step));
    m.apply({ ...node(10 + step * 10, "mul", [{ leaf: 1 }, { leaf: 1 }], "model"), step });
    m.apply({ ...node(11 + step * 10, "mul", [{ node: 10 + step * 10 }, { leaf: 1 }], "model"), step });
    m.apply(ev("step_end", {}, step));
  }
  const k0 = [...m.record("0")!.graph.nodes.keys()];
  const k1 = [...m.record("1")!.graph.nodes.keys()];
  assert.deepEqual(k0, ["L:model.w", "model|mul|1", "model|mul|2"]);
  assert.deepEqual(k1, k0);
  const w = m.record("0")!.graph.nodes.get("L:model.w")!;
  assert.equal(w.kind, "param");
  assert.equal(w.group, "model");
  assert.deepEqual(m.record("1")!.graph.nodes.get("model|mul|2")!.inputs, ["model|mul|1", "L:model.w"]);
});

test("gradients: not computed (null) differs from zero; grad order is recorded", () => {
  const g = new StepGraph(0, new Map());
  g.apply(node(1, "exp", []));
  g.apply(node(2, "sum", [{ node: 1 }]));
  assert.equal(g.nodes.get("|exp|1")!.grad, null);
  g.apply(ev("backward_begin", { roots: [{ node: 2 }] }));
  assert.equal(g.nodes.get("|sum|1")!.isRoot, true);
  g.apply(ev("grad", { node: 2, output: { shape: [], norm: 1, min: 1, max: 1, mean: 1 }, inputs: [{ shape: [2], norm: 0, min: 0, max: 0, mean: 0 }] }));
  assert.equal(g.nodes.get("|exp|1")!.grad, null);
  g.apply(ev("grad", { node: 1, output: { shape: [2], norm: 0, min: 0, max: 0, mean: 0 }, inputs: [] }));
  assert.equal(g.nodes.get("|exp|1")!.grad!.norm, 0);
  assert.deepEqual(g.gradSteps.map((s) => s.key), ["|sum|1", "|exp|1"]);
  assert.deepEqual(g.gradSteps.map((s) => s.index), [3, 4]);
});

test("checkpoint segments: forward node, recompute state and recomputed nodes", () => {
  const g = new StepGraph(0, new Map());
  g.apply(ev("checkpoint", { phase: "begin", segment: 9, name: "blk" }));
  g.apply(node(1, "checkpoint", []));
  g.apply(ev("checkpoint", { phase: "end", segment: 9, ops: 3 }));
  assert.equal(g.segments[0].state, "saved");
  assert.equal(g.nodes.get("|checkpoint|1")!.segment, 1);
  g.apply(ev("checkpoint", { phase: "recompute_begin", segment: 9 }));
  assert.equal(g.segments[0].state, "recomputing");
  g.apply(node(2, "relu", []));
  g.apply(ev("checkpoint", { phase: "recompute_end", segment: 9 }));
  const r = g.nodes.get("rc1:|relu|1")!;
  assert.equal(r.recomputed, true);
  assert.equal(r.segment, 1);
  assert.equal(g.segments[0].state, "recomputed");
  g.apply(node(3, "relu", []));
  assert.equal(g.nodes.get("|relu|1")!.recomputed, false);
});

test("cache events (graph_cache with action), counted per step and per run", () => {
  assert.equal(cacheKind(ev("graph_cache", { action: "hit" })), "hit");
  assert.equal(cacheKind(ev("graph_cache", { action: "miss" })), "miss");
  assert.equal(cacheKind(ev("graph_cache", { action: "evict" })), "evict");
  assert.equal(cacheKind(ev("graph_cache", { action: "capture" })), null);
  assert.equal(cacheKind(ev("node")), null);
  const m = new RunModel();
  m.apply(ev("graph_cache", { action: "miss" }, 0));
  m.apply(ev("graph_cache", { action: "hit" }, 1));
  m.apply(ev("graph_cache", { action: "hit" }, 2));
  assert.deepEqual(m.totals, { hits: 2, misses: 1, evictions: 0, last: "hit" });
  assert.equal(m.record("2")!.graph.cache.hits, 1);
});

test("anomalies mark the node, origin flagged", () => {
  const g = new StepGraph(0, new Map());
  g.apply(node(5, "log", []));
  g.apply(ev("anomaly", { phase: "forward", op: "log", node: 5, origin: true, message: "log produced NaN" }));
  const n = g.nodes.get("|log|1")!;
  assert.equal(n.origin, true);
  assert.equal(n.anomaly, "log produced NaN");
});

test("only a few steps are kept; replay rebuilds a prefix", () => {
  const m = new RunModel(2);
  for (let s = 0; s < 5; s++) {
    m.apply({ ...node(s * 2 + 1, "exp", []), step: s });
    m.apply({ ...node(s * 2 + 2, "sum", [{ node: s * 2 + 1 }]), step: s });
  }
  assert.deepEqual(m.order, ["3", "4"]);
  assert.equal(m.allSteps.length, 5);
  assert.equal(m.replay("4", 1)!.nodes.size, 1);
  assert.equal(m.replay("4", 2)!.nodes.size, 2);
  assert.equal(m.latestWithNodes(), "4");
});

test("with sampling, the newest step that has a graph outlives the unsampled steps after it", () => {
  const m = new RunModel(2);
  m.apply({ ...node(1, "exp", []), step: 0 });
  for (let s = 1; s <= 4; s++) {  // sample_every=5: steps 1-4 carry only their boundaries
    m.apply(ev("step_begin", { sampled: false }, s));
    m.apply(ev("step_end", {}, s));
  }
  m.apply(ev("grad_mode", { enabled: false }, null));  // after the loop: an event outside any step
  assert.equal(m.latestWithNodes(), "0");
  assert.equal(m.record("0")!.graph.nodes.size, 1);
  assert.deepEqual(m.order, ["0", "-"]);
});

test("recompute: the segment input's copy is drawn as the input itself; nested backward keeps the loss as root", () => {
  const m = new RunModel();
  m.apply(leaf(1, "model.w", { param: true }));
  const g = (e: Ev) => m.apply(e);
  g(node(1, "exp", [], "model.stem"));
  g(ev("checkpoint", { phase: "begin", segment: 5, name: "blk" }));
  g(node(2, "checkpoint", [{ node: 1 }, { leaf: 1 }], "model"));
  g(ev("checkpoint", { phase: "end", segment: 5, ops: 2 }));
  g(node(3, "sum", [{ node: 2 }], "model"));
  g(ev("backward_begin", { roots: [{ node: 3 }] }));
  g(ev("checkpoint", { phase: "recompute_begin", segment: 5 }));
  g(leaf(9, null, { requires_grad: true }));
  g(node(4, "linear", [{ leaf: 9 }, { leaf: 1 }], "model.blocks.0"));
  g(node(5, "relu", [{ node: 4 }], "model.blocks.1"));
  g(ev("backward_begin", { roots: [{ node: 5 }] }));
  const mid = m.record("0")!.graph;
  assert.equal(mid.backward, "running");
  g(ev("backward_end"));
  assert.equal(mid.backward, "running"); // the inner pass ended, not the outer one
  g(ev("checkpoint", { phase: "recompute_end", segment: 5 }));
  g(ev("backward_end"));
  const gr = m.record("0")!.graph;
  assert.equal(gr.backward, "done");
  const lin = gr.nodes.get("rc1:model.blocks.0|linear|1")!;
  assert.deepEqual(lin.inputs, ["model.stem|exp|1", "L:model.w"]); // no extra leaf for the detached copy
  assert.equal(gr.nodes.size, 6); // w, exp, checkpoint, sum, and the two recomputed ops
  assert.equal(lin.anchor, "model|checkpoint|1");
  assert.equal(lin.group, "model"); // grouped with its checkpoint node, whatever module it ran in
  assert.equal(lin.module, "model.blocks.0");
  assert.equal(gr.nodes.get("rc1:model.blocks.1|relu|1")!.isRoot, false); // the inner root is not an output
  assert.equal(gr.nodes.get("model|sum|1")!.isRoot, true);
});

test("cache banner says which function hit and where", () => {
  const m = new RunModel();
  m.apply(ev("graph_cache", { action: "miss", fn: "train.<locals>.evaluate" }, null));
  assert.equal(cacheBadgeText(m.lastCache, m.totals.last, 3), "● graph cache miss: evaluate() ran and its graph was recorded outside the training steps");
  m.apply(ev("graph_cache", { action: "hit", key: "train.<locals>.evaluate([359, 64] float32)", ops: 9 }, 3));
  assert.equal(cacheBadgeText(m.lastCache, m.totals.last, 3), "↻ graph cache hit: evaluate([359, 64] float32) replayed its cached graph, 9 ops in this step, nothing re-recorded");
  assert.equal(cacheBadgeText(null, "hit", 3), "↻ graph cache hit: the cached graph was replayed");
  m.apply(ev("graph_cache", { action: "miss", fn: "Model.forward" }, 4));
  assert.equal(cacheBadgeText(m.lastCache, m.totals.last, 4), "● graph cache miss: Model.forward() ran and its graph was recorded in this step");
});
