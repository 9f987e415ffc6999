import { test } from "node:test";
import assert from "node:assert/strict";
import { buildGroups, computeVisible, findFolds } from "../src/groups";
import { StepGraph } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

const node = (id: number, op: string, inputs: unknown[], module: string | null): Ev =>
  ({ v: 1, kind: "node", t: 0, step: 0, id, op, inputs, shape: [4], dtype: "float32", device: "cpu", module });

/** `blocks` identical blocks of `per` ops chained, under model.layers.i. */
function stack(blocks: number, per: number): StepGraph {
  const g = new StepGraph(0, new Map());
  let id = 0;
  let prev: unknown = null;
  for (let b = 0; b < blocks; b++) {
    for (let k = 0; k < per; k++) {
      id++;
      g.apply(node(id, k % 2 ? "relu" : "matmul", prev ? [prev] : [], `model.layers.${b}`));
      prev = { node: id };
    }
  }
  id++;
  g.apply(node(id, "sum", [prev], null));
  return g;
}

test("group tree sizes and signatures", () => {
  const g = stack(3, 4);
  const groups = buildGroups(g.nodes.values());
  assert.equal(groups.get("model")!.size, 12);
  assert.equal(groups.get("model.layers.1")!.size, 4);
  assert.equal(groups.get("model.layers.1")!.sig, groups.get("model.layers.2")!.sig);
  assert.deepEqual([...groups.get("model.layers")!.children].sort(), ["model.layers.0", "model.layers.1", "model.layers.2"]);
});

test("three or more identical numbered blocks fold; two do not", () => {
  const f3 = findFolds(buildGroups(stack(3, 2).nodes.values()));
  assert.equal(f3.size, 3);
  assert.equal(f3.get("model.layers.0")!.id, "F:model.layers[0-2]");
  assert.equal(findFolds(buildGroups(stack(2, 2).nodes.values())).size, 0);
});

test("under budget everything is expanded", () => {
  const v = computeVisible(stack(3, 4), { budget: 100, expanded: new Set(), collapsed: new Set() });
  assert.equal(v.items.size, 13);
  assert.equal(v.edges.length, 12);
});

test("over budget: folded into 'Block × 12' and within the budget", () => {
  const g = stack(12, 30);
  const v = computeVisible(g, { budget: 50, expanded: new Set(), collapsed: new Set() });
  assert.ok(v.items.size <= 50);
  const folds = [...v.items.values()].filter((i) => i.type === "fold");
  assert.equal(folds.length, 1);
  assert.equal(folds[0].label, "layers · Block × 12");
  assert.equal(folds[0].count, 360);
  assert.equal(v.total, 361);
  // the sum hangs off the fold
  assert.deepEqual(v.edges.map((e) => [e.from, e.to]), [["F:model.layers[0-11]", "|sum|1"]]);
});

test("unfolding shows the blocks as collapsed groups; expanding one opens it", () => {
  const g = stack(12, 30);
  const choices = { budget: 50, expanded: new Set(["F:model.layers[0-11]"]), collapsed: new Set<string>() };
  let v = computeVisible(g, choices);
  assert.equal([...v.items.values()].filter((i) => i.type === "group").length, 12);
  choices.expanded.add("model.layers.3");
  v = computeVisible(g, choices);
  assert.equal([...v.items.values()].filter((i) => i.type === "group").length, 11);
  assert.ok(v.items.has("model.layers.3|matmul|1"));
  assert.equal(v.rep.get("model.layers.3|relu|2"), "model.layers.3|relu|2");
  assert.equal(v.rep.get("model.layers.4|relu|2"), "G:model.layers.4");
});

test("5,000-node graph: visible graph computed quickly", () => {
  const g = stack(25, 200);
  const t0 = performance.now();
  const v = computeVisible(g, { budget: 300, expanded: new Set(), collapsed: new Set() });
  const ms = performance.now() - t0;
  assert.ok(v.items.size <= 300);
  assert.ok(ms < 500, `computeVisible took ${ms} ms`);
});

test("ghost nodes from the previous step fill in what the new step has not reached", () => {
  const prev = stack(1, 4);
  const cur = new StepGraph(1, new Map());
  cur.apply(node(100, "matmul", [], "model.layers.0"));
  const v = computeVisible(cur, { budget: 100, expanded: new Set(), collapsed: new Set() }, prev);
  assert.equal(v.items.size, 5);
  assert.equal(v.items.get("model.layers.0|matmul|1")!.ghost, false);
  assert.equal(v.items.get("model.layers.0|relu|1")!.ghost, true);
});

test("signatures count each op: blocks of the same size with other op counts differ and do not fold", () => {
  const g = new StepGraph(0, new Map());
  const ops = [["add", "add", "mul"], ["add", "mul", "mul"], ["add", "add", "mul"], ["mul", "add", "add"]];
  let id = 0;
  ops.forEach((list, b) => { for (const op of list) g.apply(node(++id, op, id > 1 ? [{ node: id - 1 }] : [], `m.layers.${b}`)); });
  const groups = buildGroups(g.nodes.values());
  assert.notEqual(groups.get("m.layers.0")!.sig, groups.get("m.layers.1")!.sig);
  assert.equal(groups.get("m.layers.0")!.sig, groups.get("m.layers.3")!.sig); // the same ops in another order
  assert.equal(findFolds(groups).size, 0); // 0 | 1 | 2-3: no run of three alike
});
