import { test } from "node:test";
import assert from "node:assert/strict";
import { nearest, sparkGeometry } from "../src/sparkline";
import { diffGraphs } from "../src/diff";
import { leafFromEvent, StepGraph } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

test("values spanning two decades or more, all positive, are drawn on a log scale; others linear", () => {
  assert.equal(sparkGeometry({ steps: [0, 1, 2], values: [1, 10, 1000] }, 100, 20).scale, "log");
  assert.equal(sparkGeometry({ steps: [0, 1], values: [1, 50] }, 100, 20).scale, "linear");
  assert.equal(sparkGeometry({ steps: [0, 1], values: [0, 1000] }, 100, 20).scale, "linear"); // 0 has no log
});

test("on a log scale each decade takes the same height; the largest value is at the top", () => {
  const g = sparkGeometry({ steps: [0, 1, 2], values: [1, 10, 100] }, 100, 46);
  const [a, b, c] = [1, 10, 100].map((v) => g.yOf(v)!);
  assert.ok(Math.abs((a - b) - (b - c)) < 1e-9);
  assert.equal(c, 3); // the top padding
  assert.equal(a, 43);
});

test("10,000 steps draw at most a few points per pixel column, and a missing value is a gap", () => {
  const steps = Array.from({ length: 10_000 }, (_, i) => i);
  const values = steps.map((i) => 1 + Math.sin(i / 50));
  const g = sparkGeometry({ steps, values }, 270, 40);
  const points = g.d.split(/[ML]/).filter(Boolean).length;
  assert.ok(points <= 3 * 270 + 2, `${points} points`);
  const gap = sparkGeometry({ steps: [0, 1, 2, 3], values: [1, 2, null, 3] }, 100, 20);
  assert.equal(gap.d.split("M").length - 1, 2);
});

test("nearest finds the closest recorded step", () => {
  assert.equal(nearest([0, 5, 10], 3), 1);
  assert.equal(nearest([0, 5, 10], 2), 0);
  assert.equal(nearest([0, 5, 10], 99), 2);
  assert.equal(nearest([], 1), -1);
});

const leaf = { v: 1, kind: "leaf", t: 0, step: 0, id: 1, name: "w", shape: [4], dtype: "float32", device: "cpu",
  requires_grad: true, param: true } as Ev;
function step(n: number, shapes: number[][], norms: (number | null)[], nan: number[] = []): StepGraph {
  const g = new StepGraph(n, new Map([[1, leafFromEvent(leaf as Parameters<typeof leafFromEvent>[0])]]));
  shapes.forEach((shape, i) => {
    g.apply({ v: 1, kind: "node", t: 0, step: n, id: 10 * n + i, op: "relu", inputs: [i ? { node: 10 * n + i - 1 } : { leaf: 1 }],
      shape, dtype: "float32", device: "cpu", module: "m" } as Ev);
  });
  norms.forEach((norm, i) => {
    g.apply({ v: 1, kind: "grad", t: 0, step: n, node: 10 * n + i, inputs: [],
      output: { shape: shapes[i], norm, min: 0, max: 0, nan: nan[i] ?? 0 } } as unknown as Ev);
  });
  return g;
}

test("the diff lists added, removed and reshaped nodes and the norms that jumped, NaN first", () => {
  const a = step(0, [[4], [4], [4]], [1, 1, 1]);
  const b = step(1, [[4], [8]], [20, null], [0, 3]);
  const d = diffGraphs(a, b);
  assert.deepEqual(d.added, []);
  assert.deepEqual(d.removed, ["m|relu|3"]);
  assert.deepEqual(d.reshaped, [{ key: "m|relu|2", from: [4], to: [8] }]);
  assert.deepEqual(d.jumped.map((j) => [j.key, j.nan]), [["m|relu|2", true], ["m|relu|1", false]]);
  assert.equal(d.jumped[1].factor, 20);
  // a drop by 10x is a jump too; 5x is not
  assert.deepEqual(diffGraphs(step(0, [[4]], [1]), step(1, [[4]], [0.1])).jumped.map((j) => j.key), ["m|relu|1"]);
  assert.deepEqual(diffGraphs(step(0, [[4]], [1]), step(1, [[4]], [5])).jumped, []);
  assert.deepEqual(diffGraphs(b, a).added, ["m|relu|3"]);
});
