// The notebook widget's transport: the host window (src/widget.ts, in the notebook's page) posts the live event
// batches it receives over the widget's comm to this page, which runs in the widget's frame. The page reads its
// first events (the saved snapshot) from `#rtxviz-run` like the exported page; this adds the live ones.
import type { RunEvent } from "./generated/events";

/** What the host posts to the frame. */
export type HostMessage =
  | { rtxviz: "events"; events: RunEvent[] }
  | { rtxviz: "status"; text: string };

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
  return () => window.removeEventListener("message", handler);
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
