// The app: runs list, one run's live stream, the graph view, timeline, inspector and teaching mode.
import { Api, Stream, type RunInfo, type WsMessage } from "./api";
import { $, clear, h } from "./dom";
import { computeVisible, type VItem, type ViewChoices, type Visible } from "./groups";
import { renderInspector, renderLegend, renderTeach } from "./panels";
import { Placement, expandLayout, layoutInput, structureSig } from "./place";
import { RunModel, cacheBadgeText, type StepGraph } from "./state";
import type { RunEvent } from "./generated/events";
import { GraphView, svgDocument } from "./view";
import type { LayoutReply, LayoutRequest } from "./worker";

const params = new URLSearchParams(location.search);
/** Set by the self-contained HTML export (rtxviz/export/html.py): the run is in the page, there is no server. */
const EMBEDDED = (window as unknown as { RTXVIZ_EMBEDDED?: boolean }).RTXVIZ_EMBEDDED === true;
const LAYOUT_SLOW_MS = 400; // a layout still running after this shows its cancel button
const LAYOUT_GIVE_UP_MS = 8000; // and is abandoned after this (the incremental placement stays)
const LAYOUT_BUDGET = Number(params.get("layout_budget") ?? 300); // dagre only up to this many visible items
const SPEEDS = [0.25, 1, 4, 16];
const BASE_RATE = 12; // events per second at 1x

interface Metrics {
  drawnSeq: number;
  frames: number;
  latencies: number[]; // ms from an event's emission (ev.t) to the frame that drew it
  firstRenderMs: number | null;
  layoutMs: number | null;
  layouts: number;
  layoutsCancelled: number;
  drawLog: [number, number][]; // (performance.now(), last seq drawn) per frame that drew something
}

class App {
  api = new Api();
  runs: RunInfo[] = [];
  runId: string | null = null;
  runName = "";
  replayUntil = 0; // the stored events of a recorded run arrive in chunks: draw once they are all in
  lastDraw = 0;
  userPicked = false;
  model: RunModel | null = null;
  stream: Stream | null = null;
  lobby: Stream | null = null;
  pending: RunEvent[] = [];
  frameQueued = false;
  choices: ViewChoices = { budget: Number(params.get("budget") ?? 300), expanded: new Set(), collapsed: new Set() };
  place = new Placement();
  view: GraphView;
  visible: Visible | null = null;
  shown: StepGraph | null = null;
  shownKey: string | null = null;
  live = true; // follow the newest events
  cursor = 0; // events of the shown step applied (when not live)
  playing = false;
  speed = 1;
  playTimer: number | null = null;
  teach = false;
  teachIndex = 0;
  selected: string | null = null;
  worker: Worker | null = null;
  layoutId = 0;
  layoutSig = "";
  layoutStarted = 0;
  layoutTimers: number[] = [];
  layoutChains = new Map<string, { vid: string; row: number }[]>();
  embeddedEvents: RunEvent[] = [];
  fitted = false;
  structureDirty = true;
  quietTimer: number | null = null;
  startedAt = performance.now();
  metrics: Metrics = { drawnSeq: 0, frames: 0, latencies: [], firstRenderMs: null, layoutMs: null, layouts: 0, layoutsCancelled: 0, drawLog: [] };

  constructor() {
    this.view = new GraphView($("#graph-wrap"));
    this.view.onSelect = (vid) => this.select(vid);
    this.view.onToggle = (it) => this.toggle(it);
    renderLegend($("#legend"));
    this.bindControls();
    (window as unknown as { __rtxviz: App }).__rtxviz = this;
  }

  // -- runs --------------------------------------------------------------------------------------------------
  async start(): Promise<void> {
    if (EMBEDDED) { this.startEmbedded(); return; }
    try {
      this.runs = await this.api.runs();
    } catch (e) {
      this.status(`cannot list runs: ${String(e)}`);
      return;
    }
    this.renderRuns();
    const wanted = params.get("run");
    if (wanted) { this.userPicked = true; this.open(wanted); } else this.pickDefault();
    this.lobby = new Stream(() => this.api.wsUrl("/api/ws"), (m) => this.onLobby(m), () => {}, () => 0);
  }

  /** The exported page: one run, its events read from the page itself; no WebSocket, no /api. */
  private startEmbedded(): void {
    document.body.classList.add("embedded");
    $("#live-btn").textContent = "latest step";
    let data: { run?: RunInfo; events?: RunEvent[] };
    try {
      data = JSON.parse($("#rtxviz-run").textContent ?? "") as { run?: RunInfo; events?: RunEvent[] };
    } catch (e) {
      this.status(`cannot read the exported run: ${String(e)}`);
      return;
    }
    const events = Array.isArray(data.events) ? data.events : [];
    const run: RunInfo = { id: "exported", name: "exported run", ...(data.run ?? {}) };
    run.n_events = events.length;
    this.runs = [run];
    this.runName = run.name || run.id;
    this.embeddedEvents = events;
    this.userPicked = true;
    this.open(run.id);
    this.status("exported run (no server)");
  }

  private pickDefault(): void {
    if (this.userPicked) return;
    const live = this.runs.find((r) => r.status === "running");
    const pick = live ?? this.runs[0];
    if (pick && pick.id !== this.runId) this.open(pick.id);
  }

  private onLobby(m: WsMessage): void {
    if (m.type === "hello" && m.runs) {
      this.runs = m.runs;
      // a run that started between the REST list and this socket's hello is only in the hello: follow it
      this.renderRuns();
      this.pickDefault();
      return;
    } else if (m.type === "runs") {
      const i = this.runs.findIndex((r) => r.id === m.run.id);
      if (i >= 0) this.runs[i] = m.run; else this.runs.unshift(m.run);
      this.runs.sort((a, b) => (b.created ?? 0) - (a.created ?? 0));
      // a new live run takes over the view unless the user chose one
      if (i < 0 && m.run.status === "running") this.pickDefault();
    }
    this.renderRuns();
    if (!this.runId) this.pickDefault();
  }

  renderRuns(): void {
    const ul = $("#runs");
    clear(ul);
    if (!this.runs.length) ul.append(h("li", { class: "muted" }, "No runs yet. Start one with rtxviz.events.watch(url)."));
    for (const r of this.runs) {
      const li = h("li", { class: `run${r.id === this.runId ? " current" : ""} status-${r.status ?? "?"}`, "data-run": r.id },
        h("span", { class: "dot" }), h("span", { class: "run-name" }, r.name || r.id),
        h("span", { class: "run-meta" }, `${r.status === "running" ? "live" : r.status ?? ""} · ${r.n_events ?? 0} events`));
      if (!EMBEDDED) li.addEventListener("click", () => { this.userPicked = true; this.open(r.id); });
      ul.append(li);
    }
  }

  open(runId: string): void {
    this.stream?.close();
    this.runId = runId;
    this.model = new RunModel(EMBEDDED ? Infinity : 4); // an exported run keeps every step: nothing to fetch
    this.pending = [];
    this.place = new Placement();
    this.shown = null;
    this.shownKey = null;
    this.visible = null;
    this.fitted = false;
    this.layoutSig = "";
    this.selected = null;
    this.live = true;
    this.setTeach(false);
    this.renderRuns();
    if (EMBEDDED) {
      this.replayUntil = this.embeddedEvents.reduce((m, e) => Math.max(m, e.seq ?? 0), 0);
      $("#run-title").textContent = this.runName;
      this.pending = this.embeddedEvents.slice();
      this.queueFrame();
      return;
    }
    const u = new URL(location.href);
    u.searchParams.set("run", runId);
    history.replaceState(null, "", u.toString());
    const model = this.model;
    this.stream = new Stream(
      (after) => this.api.wsUrl(`/api/runs/${encodeURIComponent(runId)}/ws`, { after }),
      (m) => this.onRunMessage(m),
      (st, why) => this.status(st === "open" ? "connected" : `disconnected (${why ?? ""}), retrying`),
      () => model.lastSeq,
    );
  }

  private onRunMessage(m: WsMessage): void {
    if (m.type === "hello" && m.run) {
      this.runName = m.run.name || m.run.id;
      this.replayUntil = m.last_seq ?? 0;
      $("#run-title").textContent = this.model?.name || this.runName;
      return;
    }
    if (m.type !== "events") return;
    for (const ev of m.events) this.pending.push(ev);
    this.queueFrame();
  }

  queueFrame(): void {
    if (this.frameQueued) return;
    this.frameQueued = true;
    requestAnimationFrame(() => this.frame());
  }

  // -- the frame: apply what arrived, redraw what changed ---------------------------------------------------
  private frame(): void {
    this.frameQueued = false;
    const model = this.model;
    if (!model) return;
    const batch = this.pending;
    this.pending = [];
    let maxSeq = this.metrics.drawnSeq;
    for (const ev of batch) {
      model.apply(ev);
      if (typeof ev.seq === "number" && ev.seq > maxSeq) maxSeq = ev.seq;
    }
    if (this.live) {
      const key = model.latestWithNodes() ?? model.latestKey();
      if (key) {
        const rec = model.record(key)!;
        if (key !== this.shownKey) this.structureDirty = true;
        this.shownKey = key;
        this.shown = rec.graph;
        this.cursor = rec.events.length;
      }
    }
    const catchingUp = model.lastSeq < this.replayUntil && performance.now() - this.lastDraw < 1000;
    if ((batch.length || this.structureDirty) && !catchingUp) {
      this.draw();
      this.lastDraw = performance.now();
    }
    this.metrics.frames++;
    this.metrics.drawnSeq = maxSeq;
    if (batch.length) {
      const log = this.metrics.drawLog;
      log.push([performance.now(), maxSeq]);
      if (log.length > 5000) log.splice(0, log.length - 5000);
      const now = Date.now() / 1000;
      const lat = this.metrics.latencies;
      for (const ev of batch) if (typeof ev.t === "number") lat.push((now - ev.t) * 1000);
      if (lat.length > 20000) lat.splice(0, lat.length - 20000);
    }
  }

  /** The previous step's graph, drawn faintly under a step that is still streaming in. */
  private ghost(): StepGraph | null {
    const model = this.model;
    if (!model || !this.live || !this.shownKey) return null;
    const rec = model.record(this.shownKey);
    if (!rec || rec.complete) return null;
    const i = model.order.indexOf(this.shownKey);
    for (let j = i - 1; j >= 0; j--) {
      const g = model.record(model.order[j])!.graph;
      if (g.nodes.size) return g;
    }
    return null;
  }

  draw(): void {
    const g = this.shown;
    if (!g) return;
    const v = computeVisible(g, this.choices, this.ghost());
    this.visible = v;
    this.place.place(v);
    this.view.selected = this.selected;
    this.view.render(v, this.place, g);
    this.structureDirty = false;
    if (!this.fitted && v.items.size) {
      this.view.fit(this.place.bounds(v));
      this.fitted = true;
    }
    if (this.metrics.firstRenderMs === null && v.items.size) this.metrics.firstRenderMs = performance.now() - this.startedAt;
    this.renderHeader(v, g);
    this.renderTimeline();
    if (this.selected) this.renderInspector();
    if (this.teach) renderTeach($("#teach-body"), this.model?.record(this.shownKey ?? "")?.graph ?? g, this.teachIndex);
    this.scheduleLayout(v);
  }

  // -- full layout in the worker, when the structure settles and is small enough ---------------------------
  private scheduleLayout(v: Visible): void {
    if (v.items.size > LAYOUT_BUDGET || v.items.size < 2) return;
    if (this.quietTimer !== null) clearTimeout(this.quietTimer);
    this.quietTimer = window.setTimeout(() => this.requestLayout(), 250);
  }

  private requestLayout(): void {
    const v = this.visible;
    if (!v) return;
    const sig = structureSig(v);
    if (sig === this.layoutSig) return;
    this.layoutSig = sig;
    if (this.worker && this.layoutStarted) this.cancelLayout(""); // a newer structure replaces a running layout
    if (!this.worker) {
      this.worker = this.makeWorker();
      if (!this.worker) return;
      this.worker.onmessage = (e: MessageEvent<LayoutReply>) => this.onLayout(e.data);
    }
    // a checkpoint node and its recomputed nodes go as one box: the segment stays together and compact
    const input = layoutInput(v);
    this.layoutChains = input.chains;
    const req: LayoutRequest = { id: ++this.layoutId, nodes: input.nodes, edges: input.edges };
    this.layoutStarted = performance.now();
    this.worker.postMessage(req);
    this.clearLayoutTimers();
    this.layoutTimers.push(
      window.setTimeout(() => { if (this.layoutStarted) this.showLayoutBusy(true); }, LAYOUT_SLOW_MS),
      window.setTimeout(() => { if (this.layoutStarted) this.cancelLayout("layout took too long: kept the incremental placement"); }, LAYOUT_GIVE_UP_MS),
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

  private clearLayoutTimers(): void {
    for (const t of this.layoutTimers) clearTimeout(t);
    this.layoutTimers = [];
  }

  private showLayoutBusy(on: boolean): void {
    $("#layout-busy").hidden = !on;
  }

  /** Stop a running layout (the cancel button, a timeout, or a newer request): the worker is terminated, the
   * incremental placement stays; the same structure is not laid out again unless it changes. */
  cancelLayout(why: string): void {
    this.clearLayoutTimers();
    this.showLayoutBusy(false);
    if (!this.layoutStarted) return;
    this.layoutStarted = 0;
    this.layoutId++;
    this.worker?.terminate();
    this.worker = null;
    this.metrics.layoutsCancelled++;
    if (why) this.status(why);
  }

  private onLayout(r: LayoutReply): void {
    if (r.id !== this.layoutId) return;
    this.layoutStarted = 0;
    this.clearLayoutTimers();
    this.showLayoutBusy(false);
    if (r.id !== this.layoutId || !r.ok || !r.pos) return;
    this.metrics.layoutMs = r.ms;
    this.metrics.layouts++;
    document.body.dataset.layouts = String(this.metrics.layouts); // for tests and benchmarks: a full layout landed
    this.place.adopt(expandLayout(r.pos, this.layoutChains));
    if (this.visible && this.shown) {
      this.view.render(this.visible, this.place, this.shown);
      if (this.metrics.layouts === 1) this.view.fit(this.place.bounds(this.visible));
    }
  }

  // -- header: counts, cache badge, anomalies ----------------------------------------------------------------
  private renderHeader(v: Visible, g: StepGraph): void {
    const model = this.model!;
    $("#run-title").textContent = model.name || this.runName;
    $("#counts").textContent =
      `step ${g.step ?? "—"} · ${v.total} nodes · ${v.items.size} shown (budget ${this.choices.budget}) · backward: ${g.backward}`;
    $("#counts").dataset.total = String(v.total);
    $("#counts").dataset.visible = String(v.items.size);
    const t = model.totals;
    const badge = $("#cache-badge");
    const last = this.live ? t.last ?? g.cache.last : g.cache.last;
    badge.textContent = last === "hit" ? "graph cache: HIT (replayed)" : last === "miss" ? "graph cache: MISS (recorded)" :
      last === "evict" ? "graph cache: evicted" : "graph cache: —";
    badge.className = `cache-badge cache-${last ?? "none"}`;
    badge.dataset.state = last ?? "none";
    const gb = $("#graph-badge");
    gb.hidden = last !== "hit" && last !== "miss";
    gb.textContent = cacheBadgeText(this.live ? model.lastCache : null, last, g.step);
    gb.dataset.state = last ?? "none";
    $("#cache-counters").textContent = `hits ${t.hits} · misses ${t.misses} · evictions ${t.evictions}`;
    const al = $("#alerts");
    clear(al);
    for (const a of g.anomalies.slice(0, 8)) {
      const li = h("li", { class: a.origin ? "origin" : "" }, `${a.phase}: ${a.message || a.op}`);
      if (a.key) li.addEventListener("click", () => this.selectKey(a.key!));
      al.append(li);
    }
    if (model.dropped) al.append(h("li", { class: "dropped" }, `${model.dropped} events dropped by the emitter`));
    const sel = $("#step-select") as HTMLSelectElement;
    const steps = model.allSteps.filter((s): s is number => s !== null).slice(-300);
    if (sel.dataset.n !== String(model.allSteps.length)) {
      sel.dataset.n = String(model.allSteps.length);
      clear(sel);
      sel.append(h("option", { value: "live" }, "newest (live)"));
      for (const s of steps.reverse()) sel.append(h("option", { value: String(s) }, `step ${s}`));
      sel.value = this.live ? "live" : String(g.step ?? "live");
    }
  }

  // -- timeline ------------------------------------------------------------------------------------------
  private renderTimeline(): void {
    const rec = this.shownKey && this.model ? this.model.record(this.shownKey) : undefined;
    const n = rec ? rec.events.length : 0;
    const slider = $("#scrub") as HTMLInputElement;
    slider.max = String(n);
    slider.value = String(this.live ? n : this.cursor);
    const ev = rec && this.cursor > 0 ? rec.events[Math.min(this.cursor, n) - 1] : undefined;
    $("#scrub-label").textContent = `${this.live ? n : this.cursor} / ${n} events${ev ? ` · last: ${ev.kind}` : ""}`;
    $("#live-btn").classList.toggle("on", this.live);
  }

  seek(count: number): void {
    if (!this.model || !this.shownKey) return;
    this.live = false;
    const rec = this.model.record(this.shownKey);
    if (!rec) return;
    this.cursor = Math.max(0, Math.min(count, rec.events.length));
    this.shown = this.model.replay(this.shownKey, this.cursor);
    this.draw();
  }

  goLive(): void {
    this.live = true;
    this.setPlaying(false);
    this.setTeach(false);
    ($("#step-select") as HTMLSelectElement).value = "live";
    this.structureDirty = true;
    this.queueFrame();
  }

  setPlaying(on: boolean): void {
    this.playing = on;
    $("#play-btn").textContent = on ? "❚❚ pause" : "▶ play";
    if (this.playTimer !== null) { clearInterval(this.playTimer); this.playTimer = null; }
    if (!on) return;
    if (this.live) this.seek(0);
    let acc = 0;
    this.playTimer = window.setInterval(() => {
      acc += (BASE_RATE * this.speed) / 20;
      const k = Math.floor(acc);
      if (!k) return;
      acc -= k;
      const rec = this.shownKey ? this.model?.record(this.shownKey) : undefined;
      if (!rec || this.cursor >= rec.events.length) { this.setPlaying(false); return; }
      this.seek(this.cursor + k);
    }, 50);
  }

  // -- teaching mode -------------------------------------------------------------------------------------
  setTeach(on: boolean): void {
    this.teach = on;
    $("#teach").hidden = !on;
    $("#teach-btn").classList.toggle("on", on);
    if (!on) { this.view.focus = null; return; }
    this.setPlaying(false);
    this.teachTo(0);
  }

  teachTo(i: number): void {
    if (!this.model || !this.shownKey) return;
    const full = this.model.record(this.shownKey)?.graph;
    if (!full) return;
    const n = full.gradSteps.length;
    this.teachIndex = Math.max(0, Math.min(i, Math.max(0, n - 1)));
    if (n) {
      const st = full.gradSteps[this.teachIndex];
      this.seek(st.index + 1);
      const vid = this.visible?.rep.get(st.key) ?? st.key;
      this.view.focus = vid;
      this.selected = vid;
      this.view.selected = vid;
    } else this.seek(this.cursor);
    this.draw();
    this.renderInspector();
  }

  // -- selection, groups ---------------------------------------------------------------------------------
  select(vid: string): void {
    this.selected = vid;
    this.view.selected = vid;
    if (this.visible && this.shown) this.view.render(this.visible, this.place, this.shown);
    this.renderInspector();
  }

  selectKey(key: string): void {
    const vid = this.visible?.rep.get(key) ?? key;
    this.select(vid);
  }

  renderInspector(): void {
    const it: VItem | null = this.selected && this.visible ? this.visible.items.get(this.selected) ?? null : null;
    renderInspector($("#inspector-body"), it, this.shown, (x) => this.toggle(x), (k) => this.selectKey(k));
  }

  toggle(it: VItem): void {
    const id = it.type === "fold" ? it.vid : it.path!;
    if (it.type === "group" || it.type === "fold") {
      this.choices.collapsed.delete(id);
      this.choices.expanded.add(id);
    }
    this.selected = null;
    this.structureDirty = true;
    this.draw();
  }

  collapseAll(): void {
    this.choices.expanded.clear();
    if (this.visible) for (const p of this.visible.groups.keys()) if (!p.includes(".")) this.choices.collapsed.add(p);
    this.draw();
  }

  expandAll(): void {
    this.choices.collapsed.clear();
    if (this.visible) for (const p of this.visible.groups.keys()) this.choices.expanded.add(p);
    this.draw();
  }

  /** The shown graph as a standalone SVG file (download). */
  exportSvg(): void {
    if (!this.visible) return;
    const text = svgDocument(this.view.svg, this.place.bounds(this.visible), `${this.model?.name || this.runName} · step ${this.shown?.step ?? "—"}`);
    const a = h("a", { href: URL.createObjectURL(new Blob([text], { type: "image/svg+xml" })), download: `rtxviz-step-${this.shown?.step ?? "graph"}.svg` });
    document.body.append(a);
    a.click();
    a.remove();
  }

  status(text: string): void {
    $("#conn").textContent = text;
  }

  private bindControls(): void {
    const slider = $("#scrub") as HTMLInputElement;
    slider.addEventListener("input", () => { this.setPlaying(false); this.seek(Number(slider.value)); });
    $("#live-btn").addEventListener("click", () => this.goLive());
    $("#play-btn").addEventListener("click", () => this.setPlaying(!this.playing));
    const speed = $("#speed") as HTMLSelectElement;
    for (const s of SPEEDS) speed.append(h("option", { value: String(s) }, `${s}×`));
    speed.value = "1";
    speed.addEventListener("change", () => { this.speed = Number(speed.value); });
    $("#teach-btn").addEventListener("click", () => this.setTeach(!this.teach));
    $("#teach-prev").addEventListener("click", () => this.teachTo(this.teachIndex - 1));
    $("#teach-next").addEventListener("click", () => this.teachTo(this.teachIndex + 1));
    $("#fit-btn").addEventListener("click", () => this.visible && this.view.fit(this.place.bounds(this.visible)));
    $("#collapse-btn").addEventListener("click", () => this.collapseAll());
    $("#expand-btn").addEventListener("click", () => this.expandAll());
    $("#svg-btn").addEventListener("click", () => this.exportSvg());
    $("#layout-cancel").addEventListener("click", () => this.cancelLayout("layout cancelled: kept the incremental placement"));
    const budget = $("#budget") as HTMLSelectElement;
    for (const b of [100, 300, 1000, 5000]) budget.append(h("option", { value: String(b) }, `${b}`));
    budget.value = String(this.choices.budget);
    if (budget.value !== String(this.choices.budget)) {
      budget.append(h("option", { value: String(this.choices.budget) }, String(this.choices.budget)));
      budget.value = String(this.choices.budget);
    }
    budget.addEventListener("change", () => { this.choices.budget = Number(budget.value); this.draw(); });
    const stepSel = $("#step-select") as HTMLSelectElement;
    stepSel.addEventListener("change", () => void this.pickStep(stepSel.value));
    document.addEventListener("keydown", (e) => {
      if (!this.teach || (e.target as Element).tagName === "INPUT") return;
      if (e.key === "ArrowRight") this.teachTo(this.teachIndex + 1);
      if (e.key === "ArrowLeft") this.teachTo(this.teachIndex - 1);
    });
  }

  private async pickStep(value: string): Promise<void> {
    if (value === "live" || !this.model || !this.runId) { this.goLive(); return; }
    const step = Number(value);
    let key = String(step);
    if (!this.model.record(key)) {
      const evs = EMBEDDED ? this.embeddedEvents.filter((e) => e.step === step) : await this.api.stepEvents(this.runId, step);
      key = this.model.loadStep(step, evs);
    }
    this.live = false;
    this.shownKey = key;
    const rec = this.model.record(key)!;
    this.cursor = rec.events.length;
    this.shown = rec.graph;
    this.structureDirty = true;
    this.draw();
  }
}

const app = new App();
void app.start();
