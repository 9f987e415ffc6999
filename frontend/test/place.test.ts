import { test } from "node:test";
import assert from "node:assert/strict";
import { computeVisible } from "../src/groups";
import { COL, NODE_H, NODE_W, Placement, RC_DX, RC_ROW, ROW, expandLayout, layoutInput, segmentRegions } from "../src/place";
import { layoutGraph } from "../src/worker";
import { StepGraph } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";
import { gradClass, gradColor, gradWidth, rampColor } from "../src/colors";

const node = (id: number, op: string, inputs: unknown[]): Ev =>
  ({ v: 1, kind: "node", t: 0, step: 0, id, op, inputs, shape: [1], dtype: "float32", device: "cpu", module: null });
const all = { budget: 10_000, expanded: new Set<string>(), collapsed: new Set<string>() };

test("rows follow dependencies; siblings share a row without overlapping", () => {
  const g = new StepGraph(0, new Map());
  g.apply(node(1, "a", []));
  g.apply(node(2, "b", [{ node: 1 }]));
  g.apply(node(3, "c", [{ node: 1 }]));
  g.apply(node(4, "d", [{ node: 2 }, { node: 3 }]));
  const p = new Placement();
  p.place(computeVisible(g, all));
  const at = (k: string) => p.pos.get(k)!;
  assert.equal(at("|b|1").y - at("|a|1").y, ROW);
  assert.equal(at("|c|1").y - at("|a|1").y, ROW);
  assert.notEqual(at("|b|1").x, at("|c|1").x);
  assert.equal(at("|d|1").y - at("|a|1").y, 2 * ROW);
  assert.equal(Math.abs(at("|b|1").x - at("|c|1").x), COL);
});

test("placed items never move as the graph grows", () => {
  const g = new StepGraph(0, new Map());
  const p = new Placement();
  g.apply(node(1, "a", []));
  g.apply(node(2, "b", [{ node: 1 }]));
  p.place(computeVisible(g, all));
  const before = JSON.stringify([...p.pos]);
  for (let i = 3; i < 60; i++) g.apply(node(i, "x", [{ node: 1 + (i % 2) }]));
  p.place(computeVisible(g, all));
  const after = new Map(p.pos);
  for (const [k, v] of JSON.parse(before) as [string, { x: number; y: number }][]) assert.deepEqual(after.get(k), v);
  // no two items share a spot
  const spots = new Set([...p.pos.values()].map((q) => `${q.x},${q.y}`));
  assert.equal(spots.size, p.pos.size);
});

test("a parameter used deep in the graph sits just above its use", () => {
  const leaves = new Map([[1, { id: 1, name: "w", shape: [1], dtype: "float32", device: "cpu", requiresGrad: true, param: true, values: null }]]);
  const g = new StepGraph(0, leaves);
  g.apply(node(1, "a", []));
  for (let i = 2; i <= 20; i++) g.apply(node(i, "b", [{ node: i - 1 }, ...(i === 20 ? [{ leaf: 1 }] : [])]));
  const p = new Placement();
  p.place(computeVisible(g, all));
  assert.equal(p.pos.get("|b|19")!.y - p.pos.get("L:w")!.y, ROW);
});

test("a 5,000-node chain places incrementally without recursion, quickly", () => {
  const g = new StepGraph(0, new Map());
  g.apply(node(1, "x", []));
  for (let i = 2; i <= 5000; i++) g.apply(node(i, "tanh", [{ node: i - 1 }, ...(i % 4 === 0 ? [{ node: i - 3 }] : [])]));
  const t0 = performance.now();
  const p = new Placement();
  p.place(computeVisible(g, all));
  const ms = performance.now() - t0;
  assert.equal(p.pos.size, 5000);
  assert.equal(p.pos.get("|tanh|4999")!.y - p.pos.get("|x|1")!.y, 4999 * ROW);
  assert.ok(ms < 1500, `placement took ${ms} ms`);
});

test("gradient classes and colours", () => {
  const st = (norm: number | null, nan = 0) => ({ shape: [1], norm, min: 0, max: 0, mean: 0, nan });
  assert.equal(gradClass(null), "none");
  assert.equal(gradClass(st(0)), "zero");
  assert.equal(gradClass(st(1e-8)), "vanishing");
  assert.equal(gradClass(st(1e4)), "exploding");
  assert.equal(gradClass(st(null, 1)), "nonfinite");
  assert.equal(gradClass(st(1)), "ok");
  // ramp ends and middle are viridis' stops (hand-copied): 1e-7 -> (68,1,84), 1e-2 -> (33,145,140), 1e3 -> (253,231,37)
  assert.equal(rampColor(0), "rgb(68, 1, 84)");
  assert.equal(gradColor(st(1e-2)), "rgb(33, 145, 140)");
  assert.equal(gradColor(st(1e3)), "rgb(253, 231, 37)");
  assert.ok(gradWidth(st(10)) > gradWidth(st(1e-5)));
  assert.notEqual(gradColor(null), gradColor(st(0)));
});

/** A checkpointed step: a -> checkpoint -> out, and in backward the segment recomputed as r1 -> r2 (from a). */
function checkpointed(extraBeside = false): StepGraph {
  const g = new StepGraph(0, new Map());
  g.apply(node(1, "a", []));
  g.apply({ v: 1, kind: "checkpoint", t: 0, step: 0, phase: "begin", segment: 3, name: "blk" });
  g.apply(node(2, "checkpoint", [{ node: 1 }]));
  g.apply({ v: 1, kind: "checkpoint", t: 0, step: 0, phase: "end", segment: 3, ops: 2 });
  g.apply(node(3, "out", [{ node: 2 }]));
  if (extraBeside) g.apply(node(9, "side", [{ node: 1 }])); // lands right of the checkpoint node
  g.apply({ v: 1, kind: "checkpoint", t: 0, step: 0, phase: "recompute_begin", segment: 3 });
  g.apply(node(4, "r1", [{ node: 1 }]));
  g.apply(node(5, "r2", [{ node: 4 }]));
  g.apply({ v: 1, kind: "checkpoint", t: 0, step: 0, phase: "recompute_end", segment: 3 });
  return g;
}

test("recomputed nodes are placed beside their checkpoint node, a chain going down", () => {
  const v = computeVisible(checkpointed(), all);
  const p = new Placement();
  p.place(v);
  const ck = p.pos.get("|checkpoint|1")!, r1 = p.pos.get("rc1:|r1|1")!, r2 = p.pos.get("rc1:|r2|1")!;
  assert.equal(r1.y, ck.y); // beside it, not in a row of its own below the forward graph
  assert.ok(r1.x > ck.x);
  assert.equal(r2.x, r1.x);
  assert.equal(r2.y, r1.y + ROW);
  const regs = segmentRegions(v, p.pos);
  assert.equal(regs.length, 1);
  assert.deepEqual(regs[0].members.sort(), ["rc1:|r1|1", "rc1:|r2|1", "|checkpoint|1"]);
});

test("segment shading never covers a node outside the segment", () => {
  const v = computeVisible(checkpointed(true), all);
  const p = new Placement();
  p.place(v);
  // the out node sits under the checkpoint node, inside the members' bounding box: one rect per member then
  const regs = segmentRegions(v, p.pos);
  const rects = regs[0].rects;
  assert.equal(rects.length, 3);
  for (const [vid, q] of p.pos) {
    if (regs[0].members.includes(vid)) continue;
    const n = { x0: q.x - NODE_W / 2, y0: q.y - NODE_H / 2, x1: q.x + NODE_W / 2, y1: q.y + NODE_H / 2 };
    for (const r of rects) assert.ok(!(n.x0 < r.x1 && r.x0 < n.x1 && n.y0 < r.y1 && r.y0 < n.y1), `${vid} is covered`);
  }
});

test("full layout: a segment goes to dagre as one box and comes back as node + recomputed column", () => {
  const v = computeVisible(checkpointed(true), all);
  const inp = layoutInput(v);
  const ids = inp.nodes.map((n) => n.id).sort();
  assert.deepEqual(ids, ["|a|1", "|checkpoint|1", "|out|1", "|side|1"]);
  const box = inp.nodes.find((n) => n.id === "|checkpoint|1")!;
  assert.deepEqual([box.w, box.h], [RC_DX + NODE_W, NODE_H + RC_ROW]);
  assert.ok(inp.edges.every((e) => e.from !== e.to));
  const pos = expandLayout(layoutGraph({ id: 1, ...inp }), inp.chains);
  const ck = pos["|checkpoint|1"], r1 = pos["rc1:|r1|1"], r2 = pos["rc1:|r2|1"];
  assert.deepEqual([r1.x - ck.x, r1.y - ck.y, r2.x - r1.x, r2.y - r1.y], [RC_DX, 0, 0, RC_ROW]);
  // dagre kept every other node out of the segment: its shading is a single box
  const regs = segmentRegions(v, new Map(Object.entries(pos)));
  assert.equal(regs[0].rects.length, 1);
});
