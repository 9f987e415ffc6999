import { test } from "node:test";
import assert from "node:assert/strict";
import { computeVisible } from "../src/groups";
import { COL, Placement, ROW } from "../src/place";
import { StepGraph } from "../src/state";
import type { Ev } from "../src/types";
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
