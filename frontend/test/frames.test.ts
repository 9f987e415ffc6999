import { test } from "node:test";
import assert from "node:assert/strict";
import { DRAW_NOW_EVENTS, Frames, HOLD_MS } from "../src/frames";
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

test("the parts of one post are applied as they come and drawn once, when the last is in", () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  const post = nodes(5000);
  frames.push(post.slice(0, 2000), 5000); // parts of 2,000 (the server's), each saying the post ends at seq 5000
  runFrames();
  frames.push(post.slice(2000, 4000), 5000);
  runFrames();
  assert.equal(model.record("0")!.graph.nodes.size, 4000); // applied, not drawn
  assert.equal(draws(), 0);
  assert.equal(metrics.drawnSeq, 0);
  assert.equal(metrics.latencies.length, 0);
  frames.push(post.slice(4000)); // the last part has no `until`
  assert.equal(draws(), 1); // at once, in the last part's task (thousands of events)
  assert.equal(metrics.drawnSeq, 5000);
  assert.equal(metrics.latencies.length, 5000);
  runFrames();
  assert.equal(draws(), 1);
});

test("a small last part of a post is drawn in the next frame; a post's parts do not hold a later small batch", () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  frames.push(nodes(10), 12);
  runFrames();
  assert.equal(draws(), 0);
  frames.push(nodes(2, 11));
  runFrames();
  assert.equal(draws(), 1);
  assert.equal(metrics.drawnSeq, 12);
  frames.push(nodes(3, 13)); // no post in progress: the next frame draws it
  runFrames();
  assert.equal(draws(), 2);
  assert.equal(metrics.drawnSeq, 15);
});

test("a post whose rest never comes is drawn HOLD_MS after its first part", async () => {
  queued.length = 0;
  const model = new RunModel();
  const { frames, metrics, draws } = loop(model);
  const t0 = performance.now();
  frames.push(nodes(100), 5000); // the server failed after this part
  runFrames();
  assert.equal(draws(), 0);
  await new Promise((done) => setTimeout(done, HOLD_MS + 100));
  assert.equal(draws(), 1);
  assert.ok(performance.now() - t0 >= HOLD_MS);
  assert.equal(metrics.drawnSeq, 100);
  assert.equal(metrics.latencies.length, 100);
});
