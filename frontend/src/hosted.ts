// The notebook widget's transport: the host window (src/widget.ts, in the notebook's page) posts the live event
// batches it receives over the widget's comm to this page, which runs in the widget's frame. The page reads its
// first events (the saved snapshot) from `#rtxviz-run` like the exported page; this adds the live ones.
import type { RunEvent } from "./generated/events";

/** What the host posts to the frame. */
export type HostMessage =
  | { rtxviz: "events"; events: RunEvent[] }
  | { rtxviz: "status"; text: string };

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
    if (m.rtxviz === "events" && Array.isArray(m.events)) onEvents(m.events);
    else if (m.rtxviz === "status" && typeof m.text === "string") onStatus(m.text);
  };
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
