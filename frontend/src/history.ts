// Which step is shown and how far into it: following the newest events (live), the step picker (older steps are
// fetched), the timeline's scrubber and play/pause.
import { $, clear, h } from "./dom";
import type { RunEvent } from "./generated/events";
import type { RunModel, StepGraph, StepRecord } from "./state";

const SPEEDS = [0.25, 1, 4, 16];
const BASE_RATE = 12; // events per second at 1x

export interface HistoryHooks {
  draw(): void;
  /** The shown structure changed: draw even without new events. */
  invalidate(): void;
  queueFrame(): void;
  stopTeaching(): void;
  /** Every event of an older step, from the server (or the exported page). */
  fetchStep(step: number): Promise<RunEvent[]>;
}

export class History {
  model: RunModel | null = null;
  /** The shown step's key, and its graph (the whole step, or its first `cursor` events when not live). */
  key: string | null = null;
  graph: StepGraph | null = null;
  live = true; // follow the newest events
  /** The shown step replayed a cached graph (so recorded no nodes): the step picked, and the step whose recorded
   * graph is drawn in its place. */
  replayed: { step: number; from: number } | null = null;
  /** The step picked in the step picker (what the empty-canvas note talks about), when not live. */
  picked: number | null = null;
  cursor = 0; // events of the shown step applied (when not live)
  playing = false;
  private speed = 1;
  private playTimer: number | null = null;

  constructor(private hooks: HistoryHooks) {
    const slider = $("#scrub") as HTMLInputElement;
    slider.addEventListener("input", () => { this.setPlaying(false); this.seek(Number(slider.value)); });
    $("#live-btn").addEventListener("click", () => this.goLive());
    $("#play-btn").addEventListener("click", () => this.setPlaying(!this.playing));
    const speed = $("#speed") as HTMLSelectElement;
    for (const s of SPEEDS) speed.append(h("option", { value: String(s) }, `${s}×`));
    speed.value = "1";
    speed.addEventListener("change", () => { this.speed = Number(speed.value); });
    const stepSel = $("#step-select") as HTMLSelectElement;
    stepSel.addEventListener("change", () => void this.pickStep(stepSel.value));
  }

  /** The exported page has no live stream: "live" is its latest step. */
  exported(): void {
    $("#live-btn").textContent = "latest step";
  }

  /** A new run: nothing shown yet, following it live. */
  reset(model: RunModel): void {
    this.model = model;
    this.key = null;
    this.graph = null;
    this.live = true;
    this.replayed = null;
    this.picked = null;
  }

  record(): StepRecord | undefined {
    return this.key && this.model ? this.model.record(this.key) : undefined;
  }

  /** When live, show the newest step that has a graph (else the newest step), all of it. */
  follow(): void {
    const model = this.model;
    if (!this.live || !model) return;
    const key = model.latestWithNodes() ?? model.latestKey();
    if (!key) return;
    const rec = model.record(key)!;
    if (key !== this.key) this.hooks.invalidate();
    this.key = key;
    this.graph = rec.graph;
    this.cursor = rec.events.length;
  }

  /** The previous step's graph, drawn faintly under a step that is still streaming in. */
  ghost(): StepGraph | null {
    const model = this.model;
    if (!model || !this.live || !this.key) return null;
    const rec = model.record(this.key);
    if (!rec || rec.complete) return null;
    const i = model.order.indexOf(this.key);
    for (let j = i - 1; j >= 0; j--) {
      const g = model.record(model.order[j])!.graph;
      if (g.nodes.size) return g;
    }
    return null;
  }

  /** Show the shown step as it was after its first `count` events. */
  seek(count: number): void {
    if (!this.model || !this.key) return;
    this.live = false;
    const rec = this.model.record(this.key);
    if (!rec) return;
    this.cursor = Math.max(0, Math.min(count, rec.events.length));
    this.graph = this.model.replay(this.key, this.cursor);
    this.hooks.draw();
  }

  goLive(): void {
    this.live = true;
    this.replayed = null;
    this.picked = null;
    this.setPlaying(false);
    this.hooks.stopTeaching();
    ($("#step-select") as HTMLSelectElement).value = "live";
    this.hooks.invalidate();
    this.hooks.queueFrame();
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
      const rec = this.key ? this.model?.record(this.key) : undefined;
      if (!rec || this.cursor >= rec.events.length) { this.setPlaying(false); return; }
      this.seek(this.cursor + k);
    }, 50);
  }

  /** Show a step as the step picker does (a deep link's step). */
  showStep(step: number): void {
    void this.pickStep(String(step));
  }

  private async pickStep(value: string): Promise<void> {
    if (value === "live" || !this.model) { this.goLive(); return; }
    const step = Number(value);
    let key = String(step);
    if (!this.model.record(key)) {
      const evs = await this.hooks.fetchStep(step);
      key = this.model.loadStep(step, evs);
    }
    this.live = false;
    this.picked = step;
    this.replayed = null;
    const source = this.model.replaySource(key);
    if (source && source.step !== null) {
      // the replay recorded nothing: draw the capture it ran, marked as replayed
      this.replayed = { step, from: source.step };
      key = String(source.step);
    }
    this.key = key;
    const rec = this.model.record(key)!;
    this.cursor = rec.events.length;
    this.graph = rec.graph;
    this.hooks.invalidate();
    this.hooks.draw();
  }

  /** The timeline under the graph: the scrubber and its label. */
  render(): void {
    const rec = this.record();
    const n = rec ? rec.events.length : 0;
    const slider = $("#scrub") as HTMLInputElement;
    slider.max = String(n);
    slider.value = String(this.live ? n : this.cursor);
    const ev = rec && this.cursor > 0 ? rec.events[Math.min(this.cursor, n) - 1] : undefined;
    $("#scrub-label").textContent = `${this.live ? n : this.cursor} / ${n} events${ev ? ` · last: ${ev.kind}` : ""}`;
    $("#live-btn").classList.toggle("on", this.live);
  }

  /** The step picker's options (the newest 300 steps), rebuilt when a step was added. Steps the emitter did not
   * sample are listed, disabled, as such: picking one would show nothing. */
  renderPicker(g: StepGraph, exported: boolean): void {
    const model = this.model;
    if (!model) return;
    const sel = $("#step-select") as HTMLSelectElement;
    const steps = model.allSteps.filter((s): s is number => s !== null).slice(-300);
    if (sel.dataset.n !== String(model.allSteps.length)) {
      sel.dataset.n = String(model.allSteps.length);
      clear(sel);
      // the exported page has no live stream: its "newest" is the last step it holds
      sel.append(h("option", { value: "live" }, exported ? "latest step" : "newest (live)"));
      for (const s of steps.reverse()) {
        const off = model.unsampled.has(s);
        sel.append(h("option", { value: String(s), disabled: off }, off ? `step ${s} · not sampled` : `step ${s}`));
      }
    }
    // while scrubbing or replaying, the picker names the step shown, not "newest (live)"
    const want = this.live ? "live" : String(this.replayed?.step ?? this.picked ?? g.step ?? "live");
    if (sel.value !== want && [...sel.options].some((o) => o.value === want)) sel.value = want;
  }

  /** What the canvas says when it has nothing to draw (null: it has something). */
  emptyNote(g: StepGraph | null, shownItems: number): string | null {
    if (shownItems) return null;
    const model = this.model;
    const step = this.picked ?? g?.step ?? null;
    if (step === null || !model) return "no graph recorded yet";
    if (model.unsampled.has(step)) {
      const k = model.sampleEvery;
      return `step ${step} was not sampled: the run records the graph of every ${ordinal(k)} step`;
    }
    if (g && g.cache.hits) return `step ${step} replayed a cached graph recorded in a step this page no longer holds`;
    return `step ${step}: no graph recorded yet`;
  }
}

/** 2 -> "2nd", 3 -> "3rd", 11 -> "11th". */
export function ordinal(k: number): string {
  const t = k % 100;
  const suffix = t >= 11 && t <= 13 ? "th" : ["th", "st", "nd", "rd"][k % 10] ?? "th";
  return `${k}${suffix}`;
}
