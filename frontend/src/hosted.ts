// The notebook widget's transport: the host window (src/widget.ts, in the notebook's page) posts the live event
// batches it receives over the widget's comm to this page, which runs in the widget's frame. The page reads its
// first events (the saved snapshot) from `#rtxviz-run` like the exported page; this adds the live ones.
import type { RunEvent } from "./generated/events";

/** What the host posts to the frame. */
export type HostMessage =
  | { rtxviz: "events"; events: RunEvent[]; sent?: number; host?: number }
  | { rtxviz: "status"; text: string };

/** One live batch's way to the frame, in seconds of the kernel's clock (Date.now() / 1000 here, the same clock on
 * one machine): its oldest event made (`t`), sent by the kernel, received by the host page, by this frame; with
 * its last seq, whose draw the frame's metrics.drawLog records. The latency's split (bench_notebook.py). */
export interface BatchTimes { seq: number; n: number; t: number; sent: number | null; host: number | null; frame: number }

/** The last batches' times (window.__rtxvizHosted), bounded. */
export const batchTimes: BatchTimes[] = [];

function logBatch(m: { events: RunEvent[]; sent?: number; host?: number }): void {
  let t = Infinity, seq = 0;
  for (const e of m.events) {
    if (typeof e.t === "number" && e.t < t) t = e.t;
    if (typeof e.seq === "number" && e.seq > seq) seq = e.seq;
  }
  if (!isFinite(t)) return;
  batchTimes.push({ seq, n: m.events.length, t, sent: typeof m.sent === "number" ? m.sent : null,
    host: typeof m.host === "number" ? m.host : null, frame: Date.now() / 1000 });
  if (batchTimes.length > 5000) batchTimes.splice(0, batchTimes.length - 5000);
}

/** What the frame posts to the host: the height (CSS px) its page needs to show the whole graph. */
export interface FrameSize { rtxviz: "size"; height: number }

/** Room the fitted drawing keeps around the graph (view.ts `fit`: 44 px above, 20 below), and the largest scale
 * it fits at (view.ts `fit` zooms to at most 1.2): the height asked for shows the graph whole at that scale. */
const FIT_MARGIN = 64;
const FIT_SCALE = 1.2;

/** The frame's height that shows the drawn graph whole at the fit's largest scale: the page around the graph's
 * svg (header, controls) plus the graph's own extent (the viewport group's box, in graph coordinates). */
export function wantedHeight(doc: Document): number | null {
  const svg = doc.querySelector("svg#graph") as SVGSVGElement | null;
  const vp = doc.querySelector("#viewport") as SVGGElement | null;
  if (!svg || !vp || !vp.querySelector("g.vnode")) return null;
  const chrome = doc.documentElement.clientHeight - svg.getBoundingClientRect().height;
  return Math.ceil(Math.max(0, chrome) + vp.getBBox().height * FIT_SCALE + FIT_MARGIN);
}

/** Tell the host the height the graph wants whenever the drawing changes (at most once a frame, and only when
 * it moved by more than a few pixels): the host sizes the cell's view to it, within bounds (src/widget.ts). */
export function reportSize(): () => void {
  let last = -1;
  let queued = false;
  const send = (): void => {
    queued = false;
    const h = wantedHeight(document);
    if (h === null || Math.abs(h - last) < 8) return;
    last = h;
    const m: FrameSize = { rtxviz: "size", height: h };
    window.parent.postMessage(m, "*");
  };
  const obs = new MutationObserver(() => {
    if (!queued) { queued = true; requestAnimationFrame(send); }
  });
  const target = document.querySelector("#viewport") ?? document.body;
  obs.observe(target, { childList: true, subtree: true, attributes: true, attributeFilter: ["transform"] });
  return () => obs.disconnect();
}

/** Steps whose events the frame keeps for the step picker (older ones are gone, as on the server's page). */
export const HOSTED_STEPS_KEPT = 50;

/** Listen to the host window; returns the function that stops listening. */
export function listenToHost(onEvents: (evs: RunEvent[]) => void, onStatus: (text: string) => void): () => void {
  const handler = (e: MessageEvent): void => {
    if (e.source !== window.parent) return; // only the host posts batches
    const m = e.data as HostMessage | null;
    if (!m || typeof m !== "object") return;
    if (m.rtxviz === "events" && Array.isArray(m.events)) {
      logBatch(m);
      onEvents(m.events);
    }
    else if (m.rtxviz === "status" && typeof m.text === "string") onStatus(m.text);
  };
  (window as unknown as { __rtxvizHosted: BatchTimes[] }).__rtxvizHosted = batchTimes;
  window.addEventListener("message", handler);
  const stopSize = reportSize();
  return () => { window.removeEventListener("message", handler); stopSize(); };
}

/** Append `more` to `evs` (in place) and keep the events of the newest `keep` steps and the step-less ones, in
 * order. Trimming runs only when a batch begins a step, so most batches cost their own length. */
export function keepRecentSteps(evs: RunEvent[], more: RunEvent[], keep = HOSTED_STEPS_KEPT): RunEvent[] {
  for (const e of more) evs.push(e);
  if (!more.some((e) => e.kind === "step_begin")) return evs;
  const steps = new Set<number>();
  for (const e of evs) if (typeof e.step === "number") steps.add(e.step);
  if (steps.size <= keep) return evs;
  const kept = new Set(Array.from(steps).slice(-keep));
  return evs.filter((e) => typeof e.step !== "number" || kept.has(e.step));
}
