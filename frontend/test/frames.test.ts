import { test } from "node:test";
import assert from "node:assert/strict";
import { DRAW_NOW_EVENTS, Frames } from "../src/frames";
import { newMetrics } from "../src/metrics";
import { RunModel } from "../src/state";
import type { RunEvent as Ev } from "../src/generated/events";

// the frame loop under node: animation frames are queued here and run by the test
const queued: FrameRequestCallback[] = [];
(globalThis as { requestAnimationFrame?: unknown }).requestAnimationFrame = (cb: FrameRequestCallback) => queued.push(cb);
const runFrames = () => { for (const cb of queued.splice(0)) cb(0); };

const nodes = (n: number, from = 1): Ev[] => Array.from({ length: n }, (_, i) => ({
  v: 1, kind: "node", t: 0, step: 0, seq: from + i, id: from + i, op: "tanh", inputs: i ? [{ node: from + i - 1 }] : [],
  shape: [2], dtype: "float32", device: "cpu", module: null,
}));

function loop(model: RunModel | null) {
  const metrics = newMetrics();
  let draws = 0;
  const frames = new Frames(metrics, { model: () => model, follow: () => {}, dirty: () => false, draw: () => { draws++; } });
  return { frames, metrics, draws: () => draws };
}

test("events are applied as they arrive; a small batch is drawn in the next animation frame", () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  frames.push(nodes(10));
  assert.equal(model.record("0")!.graph.nodes.size, 10); // applied before any frame
  assert.equal(draws(), 0);
  assert.equal(metrics.drawnSeq, 0);
  frames.push(nodes(5, 11)); // a second message before the frame joins the same draw
  runFrames();
  assert.equal(draws(), 1);
  assert.equal(metrics.drawnSeq, 15);
  assert.equal(metrics.latencies.length, 15);
});

test("a batch of thousands of events is drawn in its own task, without waiting for a frame", () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  frames.push(nodes(DRAW_NOW_EVENTS));
  assert.equal(draws(), 1);
  assert.equal(metrics.drawnSeq, DRAW_NOW_EVENTS);
  runFrames(); // a frame queued before adds nothing: no second draw of the same events
  assert.equal(draws(), 1);
  assert.equal(metrics.latencies.length, DRAW_NOW_EVENTS);
});

test("events that came before a run was open are applied in the first frame that has one", () => {
  queued.length = 0;
  let model: RunModel | null = null;
  const metrics = newMetrics();
  let draws = 0;
  const frames = new Frames(metrics, { model: () => model, follow: () => {}, dirty: () => false, draw: () => { draws++; } });
  frames.push(nodes(3));
  runFrames();
  assert.equal(draws, 0);
  model = new RunModel();
  frames.queue();
  runFrames();
  assert.equal(model.record("0")!.graph.nodes.size, 3);
  assert.equal(draws, 1);
  assert.equal(metrics.drawnSeq, 3);
});

test("a new run drops what was applied for the old one and not yet drawn", () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  frames.push(nodes(4));
  frames.reset();
  runFrames();
  assert.equal(draws(), 0);
  assert.equal(metrics.drawnSeq, 0);
  assert.equal(metrics.latencies.length, 0);
});
