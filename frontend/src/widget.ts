// The notebook widget's front end (anywidget's `render({model, el})`): the page's app, mounted in a frame in the
// cell's output, fed with the events the kernel sends over the widget's comm. The frame is the app's own page
// (index.html, app.js and the layout worker inlined by build.mjs, as in the exported page), so its styles and
// element ids cannot clash with the notebook's, and several views can share one notebook page.
// The frame first draws the widget state's `snapshot` (the last graph: what a saved notebook shows without a
// kernel), then every live batch, posted to it (src/hosted.ts).
import type { RunEvent } from "./generated/events";
import { keepRecentSteps, type HostMessage } from "./hosted";

/** The frame's page, with RUN_JSON where the run's first events go (made by build.mjs from index.html). */
declare const RTXVIZ_FRAME_HTML: string;
const RUN_JSON = "__RTXVIZ_RUN_JSON__";

/** The part of anywidget's model this view uses. */
export interface WidgetModel {
  get(name: "snapshot" | "run_name"): string;
  get(name: "height"): number;
  on(event: string, cb: (...args: never[]) => void): void;
  off(event: string, cb: (...args: never[]) => void): void;
}

/** A batch message from the kernel (rtxviz/notebook/transport.py). */
interface BatchContent { kind: "events"; first_seq: number; count: number; dropped: number }

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

function render({ model, el }: { model: WidgetModel; el: HTMLElement }): () => void {
  const first = snapshotEvents(model.get("snapshot"));
  let lastSeq = first.reduce((m, e) => Math.max(m, e.seq ?? 0), 0);
  const name = model.get("run_name") || "notebook";
  const frame = document.createElement("iframe");
  frame.className = "rtxviz-frame";
  frame.title = `rtxviz · ${name}`;
  frame.style.cssText = `width:100%;height:${model.get("height")}px;border:1px solid #d9dce1;border-radius:4px;display:block`;
  frame.srcdoc = RTXVIZ_FRAME_HTML.replace(RUN_JSON, () => scriptJson({ run: { id: "notebook", name }, events: first }));
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
    post({ rtxviz: "events", events: evs });
    if (content.dropped) post({ rtxviz: "status", text: `notebook view: ${content.dropped} event(s) dropped` });
  };
  const onHeight = (): void => { frame.style.height = `${model.get("height")}px`; };
  model.on("msg:custom", onMsg);
  model.on("change:height", onHeight);
  el.append(frame);
  return () => {
    model.off("msg:custom", onMsg);
    model.off("change:height", onHeight);
    frame.remove();
  };
}

export default { render };
