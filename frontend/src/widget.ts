// The notebook widget's front end (anywidget's `render({model, el})`): the page's app, mounted in a frame in the
// cell's output, fed with the events the kernel sends over the widget's comm. The frame is the app's own page
// (index.html, app.js and the layout worker inlined by build.mjs, as in the exported page), so its styles and
// element ids cannot clash with the notebook's, and several views can share one notebook page.
// The frame first draws the widget state's `snapshot` (the last graph: what a saved notebook shows without a
// kernel), then every live batch, posted to it (src/hosted.ts).
import type { RunEvent } from "./generated/events";
import { keepRecentSteps, type FrameSize, type HostMessage } from "./hosted";

/** The frame's page, with RUN_JSON where the run's first events go (made by build.mjs from index.html). */
declare const RTXVIZ_FRAME_HTML: string;
const RUN_JSON = "__RTXVIZ_RUN_JSON__";

/** The part of anywidget's model this view uses. */
export interface WidgetModel {
  get(name: "snapshot" | "run_name"): string;
  get(name: "height"): number;
  set(name: "height", value: number): void;
  save_changes(): void;
  on(event: string, cb: (...args: never[]) => void): void;
  off(event: string, cb: (...args: never[]) => void): void;
}

/** A batch message from the kernel (rtxviz/notebook/transport.py). */
interface BatchContent { kind: "events"; first_seq: number; count: number; dropped: number; sent?: number }

/** The events of a snapshot traitlet (`{"seqs": [...], "ndjson": "..."}`), each with its seq. */
export function snapshotEvents(text: string): RunEvent[] {
  if (!text) return [];
  const snap = JSON.parse(text) as { seqs: number[]; ndjson: string };
  return parseBatch(snap.ndjson, (i) => snap.seqs[i]);
}

/** NDJSON lines as events, the i-th numbered `seq(i)`. */
export function parseBatch(ndjson: string, seq: (i: number) => number): RunEvent[] {
  const out: RunEvent[] = [];
  const lines = ndjson.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]) continue;
    const ev = JSON.parse(lines[i]) as RunEvent;
    ev.seq = seq(i);
    out.push(ev);
  }
  return out;
}

/** JSON that is safe inside a `<script type="application/json">` block. */
function scriptJson(obj: unknown): string {
  return JSON.stringify(obj).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

function decode(buf: ArrayBuffer | DataView | Uint8Array): string {
  return new TextDecoder().decode(buf);
}

/** The view's height bounds while it fits the graph (CSS px): small graphs take little room, big ones no more than
 * a screenful (the drawing then fits by zooming out, as on the page). */
export const FIT_MIN = 320;
export const FIT_MAX = 900;
/** Before the frame has drawn anything to measure. */
const FIT_FIRST = 420;

/** The box's height for a frame that wants `wanted` px, within the fit bounds. */
export function fittedHeight(wanted: number): number {
  return Math.round(Math.min(FIT_MAX, Math.max(FIT_MIN, wanted)));
}

function render({ model, el }: { model: WidgetModel; el: HTMLElement }): () => void {
  const first = snapshotEvents(model.get("snapshot"));
  let lastSeq = first.reduce((m, e) => Math.max(m, e.seq ?? 0), 0);
  const name = model.get("run_name") || "notebook";
  // the box the user can resize (its corner is the drag handle); the frame fills it
  const box = document.createElement("div");
  box.className = "rtxviz-box";
  box.style.cssText = "resize:vertical;overflow:hidden;min-height:160px;border:1px solid #d9dce1;border-radius:4px;" +
    "box-sizing:border-box;background:#f3f4f6";
  const frame = document.createElement("iframe");
  frame.className = "rtxviz-frame";
  frame.title = `rtxviz · ${name}`;
  // a strip below the frame holds the resize corner: over a frame, the frame would take the mouse
  frame.style.cssText = "width:100%;height:calc(100% - 12px);border:0;display:block";
  frame.srcdoc = RTXVIZ_FRAME_HTML.replace(RUN_JSON, () => scriptJson({ run: { id: "notebook", name }, events: first }));
  box.append(frame);
  // height: a number of pixels set by the caller (show(..., height=) / watch) or by the user's drag, which the
  // kernel keeps so a re-run cell opens at that size; 0: fit the graph, within FIT_MIN..FIT_MAX
  let setByUs = 0;
  const setHeight = (h: number): void => {
    setByUs = Math.round(h);
    box.style.height = `${setByUs}px`;
    box.dataset.height = String(setByUs);
  };
  const fixed = (): number => model.get("height") || 0;
  setHeight(fixed() || FIT_FIRST);
  box.dataset.sizing = fixed() ? "fixed" : "fit";
  let loaded = false;
  let waiting: HostMessage[] = [];
  // the live events since the snapshot (recent steps): a frame that reloads (the notebook moved its output in
  // the page: an iframe moved in the DOM loads again) gets them again after its snapshot
  let live: RunEvent[] = [];
  const post = (m: HostMessage): void => {
    if (loaded && frame.contentWindow) frame.contentWindow.postMessage(m, "*");
    else waiting.push(m);
  };
  frame.addEventListener("load", () => {
    if (loaded) waiting = live.length ? [{ rtxviz: "events", events: live.slice() }] : [];
    loaded = true;
    for (const m of waiting) frame.contentWindow?.postMessage(m, "*");
    waiting = [];
  });
  const onMsg = (content: BatchContent, buffers: (ArrayBuffer | DataView)[]): void => {
    if (!content || content.kind !== "events" || !buffers?.length) return;
    const evs = parseBatch(decode(buffers[0]), (i) => content.first_seq + i).filter((e) => (e.seq ?? 0) > lastSeq);
    if (!evs.length) return;
    lastSeq = evs[evs.length - 1].seq ?? lastSeq;
    live = keepRecentSteps(live, evs);
    post({ rtxviz: "events", events: evs, sent: content.sent, host: Date.now() / 1000 });
    if (content.dropped) post({ rtxviz: "status", text: `notebook view: ${content.dropped} event(s) dropped` });
  };
  const onFrame = (e: MessageEvent): void => {
    if (e.source !== frame.contentWindow) return;
    const m = e.data as FrameSize | null;
    if (!m || m.rtxviz !== "size" || typeof m.height !== "number" || !isFinite(m.height)) return;
    if (!fixed()) setHeight(fittedHeight(m.height));
  };
  const onHeight = (): void => {
    const h = fixed();
    box.dataset.sizing = h ? "fixed" : "fit";
    if (h && h !== setByUs) setHeight(h);
  };
  // a height we did not set is the user's drag: kept in the model (and so in the kernel) once the drag settles
  let saveTimer: ReturnType<typeof setTimeout> | undefined;
  const resized = new ResizeObserver(() => {
    const h = Math.round(box.getBoundingClientRect().height);
    if (!h || Math.abs(h - setByUs) <= 2) return;
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => {
      setByUs = h;
      box.dataset.height = String(h);
      box.dataset.sizing = "fixed";
      model.set("height", h);
      model.save_changes();
    }, 150);
  });
  resized.observe(box);
  model.on("msg:custom", onMsg);
  model.on("change:height", onHeight);
  window.addEventListener("message", onFrame);
  el.append(box);
  return () => {
    model.off("msg:custom", onMsg);
    model.off("change:height", onHeight);
    window.removeEventListener("message", onFrame);
    resized.disconnect();
    clearTimeout(saveTimer);
    box.remove();
  };
}

export default { render };
