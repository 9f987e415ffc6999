import { test } from "node:test";
import assert from "node:assert/strict";
import { activationBytes, bytesText, savedRows, segmentMemory, stepTotals } from "../src/saved";
import { leafFromEvent, StepGraph } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

const ev = (kind: string, fields: Record<string, unknown>): Ev => ({ v: 1, kind, t: 0, step: 0, ...fields }) as Ev;
const out = (bytes: number) => ({ role: "output", bytes, shape: [bytes / 4], dtype: "float32" });

/** W (a parameter) @ x -> exp (saves its output) -> mul(exp, exp) (saves that buffer twice: aliases) ->
 * a checkpoint of 2 ops recomputed in backward (a tanh keeping 64 B, a mul of the segment's input by itself). */
function graph(): StepGraph {
  const w = ev("leaf", { id: 1, name: "model.w", shape: [4, 4], dtype: "float32", device: "cpu", requires_grad: true, param: true });
  const g = new StepGraph(0, new Map([[1, leafFromEvent(w as Parameters<typeof leafFromEvent>[0])]]));
  const node = (id: number, op: string, inputs: unknown[], saved: unknown[]) => g.apply(ev("node",
    { id, op, inputs, shape: [4, 4], dtype: "float32", device: "cpu", module: "model.m",
      saved_bytes: saved.reduce((a: number, s) => a + (s as { bytes: number }).bytes, 0), saved }));
  node(1, "matmul", [{ leaf: 1 }, { leaf: 1 }], [
    { role: "input", index: 0, bytes: 64, shape: [4, 4], dtype: "float32" },
    { role: "input", index: 1, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 1, role: "input", index: 0 } }]);
  node(2, "exp", [{ node: 1 }], [out(64)]);
  node(3, "mul", [{ node: 2 }, { node: 2 }], [
    { role: "input", index: 0, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 2, role: "output" } },
    { role: "input", index: 1, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 2, role: "output" } }]);
  g.apply(ev("checkpoint", { phase: "begin", segment: 9, name: "blk" }));
  node(4, "checkpoint", [{ node: 3 }], [{ role: "input", index: 0, bytes: 64, shape: [4, 4], dtype: "float32" }]);
  g.apply(ev("checkpoint", { phase: "end", segment: 9, ops: 2, saved_bytes: 64 }));
  return g;
}

test("bytes read as B, KiB, MiB", () => {
  assert.equal(bytesText(512), "512 B");
  assert.equal(bytesText(1536), "1.50 KiB");
  assert.equal(bytesText(12 * 1024 * 1024), "12.0 MiB");
});

test("activation bytes leave out leaves and aliases; the rows say why", () => {
  const g = graph();
  const by = (id: number) => g.nodes.get(g.byNodeId.get(id)!)!;
  assert.equal(activationBytes(by(1), g), 0); // both inputs are the parameter
  assert.equal(activationBytes(by(2), g), 64);
  assert.equal(activationBytes(by(3), g), 0); // exp's output, already counted
  const rows = savedRows(by(3), g);
  assert.deepEqual(rows.map((r) => [r.slot, r.counted]), [["input 0", false], ["input 1", false]]);
  assert.match(rows[0].note!, /same buffer as exp #2's output/);
  assert.match(savedRows(by(1), g)[0].note!, /parameter/);
  // a buffer first saved in an earlier step (node 90 is not in this step): held across steps, not counted here
  g.apply(ev("node", { id: 91, op: "cross_entropy", inputs: [{ node: 3 }], shape: [], dtype: "float32", device: "cpu",
    saved_bytes: 96, saved: [
      { role: "input", index: 0, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 3, role: "input", index: 0 } },
      { role: "state", index: 1, bytes: 32, shape: [4], dtype: "int64", alias: { node: 90, role: "state", index: 1 } }] }));
  const across = savedRows(by(91), g);
  assert.deepEqual(across.map((r) => r.counted), [false, false]);
  assert.match(across[0].note!, /^same buffer as mul #3's input 0$/);
  assert.equal(across[1].note, "held across steps: first saved as node #90's state 1, before this step");
  assert.equal(activationBytes(by(91), g), 0);
  // an event without the list counts its saved_bytes
  const bare = { ...by(2), saved: null, savedBytes: 100 };
  assert.equal(activationBytes(bare, g), 100);
});

test("a checkpoint's savings: what its recomputed ops hold, less what it keeps; unknown before backward", () => {
  const g = graph();
  const seg = g.segments[0];
  assert.deepEqual(segmentMemory(g, seg), { kept: 64, dropped: null, saved: null });
  g.apply(ev("backward_begin", { roots: [{ node: 4 }] }));
  g.apply(ev("checkpoint", { phase: "recompute_begin", segment: 9, ops: 2 }));
  g.apply(ev("leaf", { id: 2, name: null, shape: [4, 4], dtype: "float32", device: "cpu", requires_grad: true }));
  g.apply(ev("node", { id: 5, op: "tanh", inputs: [{ leaf: 2 }], shape: [4, 4], dtype: "float32", device: "cpu",
    saved_bytes: 64, saved: [out(64)] }));
  g.apply(ev("node", { id: 6, op: "mul", inputs: [{ node: 5 }, { node: 5 }], shape: [4, 4], dtype: "float32",
    device: "cpu", saved_bytes: 128, saved: [
      { role: "input", index: 0, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 5, role: "output" } },
      { role: "input", index: 1, bytes: 64, shape: [4, 4], dtype: "float32", alias: { node: 5, role: "output" } }] }));
  g.apply(ev("node", { id: 7, op: "exp", inputs: [{ node: 6 }], shape: [4, 4], dtype: "float32", device: "cpu",
    saved_bytes: 64, saved: [out(64)] }));
  g.apply(ev("checkpoint", { phase: "recompute_end", segment: 9 }));
  assert.deepEqual(segmentMemory(g, seg), { kept: 64, dropped: 128, saved: 64 });
  // the step's forward activations: exp's output and the checkpoint's kept input (the recomputation not counted)
  assert.deepEqual(stepTotals(g), { activations: 128, checkpointSaved: 64 });
});
