import { test } from "node:test";
import assert from "node:assert/strict";
import { keepRecentSteps } from "../src/hosted";
import { parseBatch, snapshotEvents } from "../src/widget";
import type { RunEvent as Ev } from "../src/generated/events";

const ev = (kind: string, step: number | null): Ev => ({ v: 1, kind, t: 0, step });

test("a batch's NDJSON lines become events numbered from the batch's first seq", () => {
  const evs = parseBatch('{"v":1,"kind":"step_begin","t":1,"step":0}\n{"v":1,"kind":"step_end","t":2,"step":0}', (i) => 7 + i);
  assert.deepEqual(evs.map((e) => [e.kind, e.seq]), [["step_begin", 7], ["step_end", 8]]);
});

test("a snapshot's events carry the seqs the kernel gave them", () => {
  const text = JSON.stringify({ seqs: [1, 40], truncated: 0, ndjson: '{"v":1,"kind":"run_start","t":0,"name":"n"}\n{"v":1,"kind":"step_begin","t":1,"step":3}' });
  assert.deepEqual(snapshotEvents(text).map((e) => [e.kind, e.seq]), [["run_start", 1], ["step_begin", 40]]);
  assert.deepEqual(snapshotEvents(""), []);
});

test("the frame keeps the newest steps' events and the step-less ones, in order", () => {
  const old = () => [ev("run_start", null), ev("step_begin", 0), ev("step_begin", 1), ev("step_begin", 2)];
  const kept = keepRecentSteps(old(), [ev("step_end", 2), ev("step_begin", 3)], 2);
  assert.deepEqual(kept.map((e) => [e.kind, e.step]), [["run_start", null], ["step_begin", 2], ["step_end", 2], ["step_begin", 3]]);
  assert.equal(keepRecentSteps(old(), [ev("step_begin", 3)], 10).length, 5); // within the bound: all kept
  assert.equal(keepRecentSteps(old(), [ev("grad", 0)], 1).length, 5); // no step begins: no trimming yet
});
