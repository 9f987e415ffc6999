// The full layout: dagre in a Web Worker (src/worker.ts), once the visible structure has been quiet for 250 ms and
// only within the layout budget. A slow layout shows its cancel button; cancelling, a timeout or a newer structure
// terminates the worker, and the incremental placement stays.
import { $ } from "./dom";
import { EMBEDDED, params } from "./env";
import type { Visible } from "./groups";
import type { Metrics } from "./metrics";
import { expandLayout, layoutInput, structureSig, type Pos } from "./place";
import type { LayoutReply, LayoutRequest } from "./worker";

const LAYOUT_SLOW_MS = 400; // a layout still running after this shows its cancel button
const LAYOUT_GIVE_UP_MS = 8000; // and is abandoned after this (the incremental placement stays)
const LAYOUT_BUDGET = Number(params.get("layout_budget") ?? 300); // dagre only up to this many visible items

export class LayoutRunner {
  private worker: Worker | null = null;
  private id = 0;
  private sig = "";
  private started = 0;
  private timers: number[] = [];
  private chains = new Map<string, { vid: string; row: number }[]>();
  private quietTimer: number | null = null;

  constructor(
    private metrics: Metrics,
    private visible: () => Visible | null,
    private landed: (pos: Record<string, Pos>) => void,
    private status: (text: string) => void,
  ) {
    $("#layout-cancel").addEventListener("click", () => this.cancel("layout cancelled: kept the incremental placement"));
  }

  /** A new run: its structure is laid out even if it looks like the last one. */
  forget(): void {
    this.sig = "";
  }

  schedule(v: Visible): void {
    if (v.items.size > LAYOUT_BUDGET || v.items.size < 2) {
      // a layout asked for a smaller structure (before a group opened) must not land on this one
      if (this.quietTimer !== null) { clearTimeout(this.quietTimer); this.quietTimer = null; }
      if (this.started) this.cancel("");
      this.sig = "";
      return;
    }
    if (this.quietTimer !== null) clearTimeout(this.quietTimer);
    this.quietTimer = window.setTimeout(() => this.request(), 250);
  }

  private request(): void {
    const v = this.visible();
    if (!v) return;
    const sig = structureSig(v);
    if (sig === this.sig) return;
    this.sig = sig;
    if (this.worker && this.started) this.cancel(""); // a newer structure replaces a running layout
    if (!this.worker) {
      this.worker = this.makeWorker();
      if (!this.worker) return;
      this.worker.onmessage = (e: MessageEvent<LayoutReply>) => this.onReply(e.data);
    }
    // a checkpoint node and its recomputed nodes go as one box: the segment stays together and compact
    const input = layoutInput(v);
    this.chains = input.chains;
    const req: LayoutRequest = { id: ++this.id, nodes: input.nodes, edges: input.edges };
    this.started = performance.now();
    this.worker.postMessage(req);
    this.clearTimers();
    this.timers.push(
      window.setTimeout(() => { if (this.started) this.busy(true); }, LAYOUT_SLOW_MS),
      window.setTimeout(() => { if (this.started) this.cancel("layout took too long: kept the incremental placement"); }, LAYOUT_GIVE_UP_MS),
    );
  }

  private makeWorker(): Worker | null {
    try {
      if (!EMBEDDED) return new Worker("layout-worker.js");
      // the exported page loads no file: the worker's source is inlined in the page (rtxviz/export/html.py)
      const assets = JSON.parse(document.getElementById("rtxviz-assets")?.textContent ?? "{}") as Record<string, string>;
      const src = assets["layout-worker.js"];
      if (!src) return null;
      return new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
    } catch (e) {
      this.status(`no layout worker (${String(e)}): incremental placement only`);
      return null;
    }
  }

  private clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
  }

  private busy(on: boolean): void {
    $("#layout-busy").hidden = !on;
  }

  /** Stop a running layout (the cancel button, a timeout, or a newer request): the worker is terminated, the
   * incremental placement stays; the same structure is not laid out again unless it changes. */
  cancel(why: string): void {
    this.clearTimers();
    this.busy(false);
    if (!this.started) return;
    this.started = 0;
    this.id++;
    this.worker?.terminate();
    this.worker = null;
    this.metrics.layoutsCancelled++;
    if (why) this.status(why);
  }

  private onReply(r: LayoutReply): void {
    if (r.id !== this.id) return;
    this.started = 0;
    this.clearTimers();
    this.busy(false);
    if (!r.ok || !r.pos) return;
    const v = this.visible();
    if (!v || structureSig(v) !== this.sig) {
      // the structure changed while the worker ran (a group opened, "expand all"): these positions are for
      // another graph; the incremental placement stays, and the next quiet moment asks again
      this.sig = "";
      return;
    }
    this.metrics.layoutMs = r.ms;
    this.metrics.layouts++;
    document.body.dataset.layouts = String(this.metrics.layouts); // for tests and benchmarks: a full layout landed
    const pos = expandLayout(r.pos, this.chains);
    document.body.dataset.layoutItems = String(Object.keys(pos).length); // ... and for how many items
    this.landed(pos);
  }
}
