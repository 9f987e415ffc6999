import { test } from "node:test";
import assert from "node:assert/strict";
import { matchNodes } from "../src/search";
import { pngScale, MAX_AREA, MAX_SIDE } from "../src/png";
import { linkHash, parseLink } from "../src/deeplink";
import { inputsCone, pathToLoss } from "../src/paths";
import { leafFromEvent, StepGraph } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

const node = (id: number, op: string, inputs: unknown[], module: string | null): Ev =>
  ({ v: 1, kind: "node", t: 0, step: 0, id, op, inputs, shape: [4], dtype: "float32", device: "cpu", module });

function graph(): StepGraph {
  const leaf = { v: 1, kind: "leaf", t: 0, step: 0, id: 1, name: "model.fc.weight", shape: [4], dtype: "float32",
    device: "cpu", requires_grad: true, param: true } as Ev;
  // the run keeps the leaf table (state.ts's RunModel); a step's graph reads its leaves from it
  const g = new StepGraph(0, new Map([[1, leafFromEvent(leaf as Parameters<typeof leafFromEvent>[0])]]));
  g.apply(node(1, "matmul", [{ leaf: 1 }], "model.fc"));
  g.apply(node(2, "relu", [{ node: 1 }], "model.act"));
  g.apply(node(3, "sum", [{ node: 2 }], null));
  return g;
}

test("a query matches op, module path and leaf name, every word, case-insensitively", () => {
  const g = graph();
  const keys = (q: string) => matchNodes(g, q).map((n) => n.key);
  assert.deepEqual(keys("FC").sort(), ["L:model.fc.weight", "model.fc|matmul|1"]);
  assert.deepEqual(keys("relu"), ["model.act|relu|1"]);
  assert.deepEqual(keys("fc weight"), ["L:model.fc.weight"]);
  assert.deepEqual(keys("sum"), ["|sum|1"]);
  assert.deepEqual(keys("   "), []);
  assert.deepEqual(keys("conv"), []);
});

test("the PNG scale is 2 unless the canvas would pass the browsers' limits", () => {
  assert.equal(pngScale(800, 600), 2);
  assert.equal(pngScale(20000, 100), MAX_SIDE / 20000);
  const s = pngScale(12000, 12000);
  assert.ok(12000 * s * 12000 * s <= MAX_AREA * 1.0001 && 12000 * s <= MAX_SIDE);
});

test("a deep link's fragment reads back what was written, and malformed fields are null", () => {
  const l = { run: "run 1&2", step: 3, node: "model.fc|add|1" };
  assert.deepEqual(parseLink(linkHash(l)), l);
  assert.deepEqual(parseLink("#step=x&node="), { run: null, step: null, node: null });
  assert.deepEqual(parseLink(""), { run: null, step: null, node: null });
});

test("path to the loss keeps what reaches a root; the inputs' cone is everything upstream", () => {
  const g = new StepGraph(0, new Map());
  g.apply(node(1, "matmul", [], "m"));
  g.apply(node(2, "add", [{ node: 1 }], "m"));
  g.apply(node(3, "exp", [{ node: 2 }], "m")); // a side branch
  g.apply(node(4, "sum", [{ node: 2 }], null));
  const [mm, add, exp, sum] = ["m|matmul|1", "m|add|1", "m|exp|1", "|sum|1"];
  assert.deepEqual([...pathToLoss(g, [mm])].sort(), [add, exp, sum].sort()); // no backward yet: all it feeds
  g.apply({ v: 1, kind: "backward_begin", t: 0, step: 0, roots: [{ node: 4 }] } as Ev);
  assert.deepEqual([...pathToLoss(g, [mm])].sort(), [add, sum].sort());
  assert.deepEqual([...inputsCone(g, [sum])].sort(), [mm, add].sort());
  assert.deepEqual([...inputsCone(g, [mm])], []);
});
