// The inspector's history section: the selected value's gradient norm (and, for a parameter, its update/weight
// ratio) over every recorded step, as sparklines with the shown step marked. The numbers come from the server's
// per-step summaries (GET /api/runs/{id}/history); the exported page, which has no server and holds every step,
// reads them from its own steps. Fetched once per value and again when newer steps have arrived.
import type { HistoryData } from "./api";
import { clear, h } from "./dom";
import { asCore } from "./generated/events";
import type { RunModel } from "./state";
import { sparkline } from "./sparkline";

export interface NormHistoryHooks {
  /** The server's history of a value, or null where there is no server (then `model` is read). */
  fetch(name: string): Promise<HistoryData> | null;
  model(): RunModel | null;
  /** The value is still the one inspected: draw its history now. */
  ready(name: string): void;
}

interface Entry {
  data: HistoryData | null;
  /** The newest step the page knew of when it asked. */
  upto: number | null;
  pending: boolean;
  error: string | null;
}

const WIDTH = 270, HEIGHT = 42;

/** A value's history from the steps a page holds (the exported page holds them all), as the server keeps it
 * (rtxviz/store/history.py): a node's gradient norm; for a parameter its optimizer_step's gradient norm and
 * update/weight ratio where the step has one. */
export function heldHistory(model: RunModel, key: string): HistoryData {
  const out: HistoryData = { steps: [], grad_norm: [], update_ratio: [], nonfinite: [] };
  const recs = model.order.map((k) => model.record(k)!).filter((r) => typeof r.step === "number");
  recs.sort((a, b) => a.step! - b.step!);
  const leafName = key.startsWith("L:") ? key.slice(2) : null;
  for (const r of recs) {
    const g = r.graph.nodes.get(key)?.grad;
    let norm = g ? g.norm ?? null : null, ratio: number | null = null;
    if (leafName !== null) {
      for (const ev of r.events) {
        const core = asCore(ev);
        if (core?.kind !== "optimizer_step") continue;
        for (const p of core.params ?? []) {
          const name = model.leaves.get(p.leaf)?.name ?? p.name;
          if (name !== leafName) continue;
          norm = typeof p.grad_norm === "number" ? p.grad_norm : norm;
          ratio = typeof p.update_ratio === "number" ? p.update_ratio : ratio;
        }
      }
    }
    if (!g && ratio === null) continue;
    out.steps.push(r.step!);
    out.grad_norm.push(norm);
    out.update_ratio.push(ratio);
    out.nonfinite.push(g && (g.nan ?? 0) + (g.inf ?? 0) > 0 ? 1 : 0);
  }
  return out;
}

export class NormHistory {
  private cache = new Map<string, Entry>();

  constructor(private hooks: NormHistoryHooks) {}

  /** Another run: nothing of the last one is kept. */
  reset(): void {
    this.cache.clear();
  }

  private newest(): number | null {
    const steps = this.hooks.model()?.allSteps ?? [];
    for (let i = steps.length - 1; i >= 0; i--) if (typeof steps[i] === "number") return steps[i];
    return null;
  }

  /** Append the history section of value `key` to `el` (the inspector), the shown step `current` marked. */
  render(el: HTMLElement, key: string, current: number | null): void {
    const box = h("div", { class: "norm-history", "data-key": key });
    el.append(box);
    const newest = this.newest();
    let e = this.cache.get(key);
    if (!e || (!e.pending && e.upto !== newest)) e = this.load(key, newest, e);
    if (e.data) this.draw(box, e.data, current);
    else box.append(h("div", { class: "muted" }, e.error ? `history: ${e.error}` : "history: loading…"));
  }

  private load(key: string, newest: number | null, old: Entry | undefined): Entry {
    const e: Entry = { data: old?.data ?? null, upto: newest, pending: true, error: null };
    this.cache.set(key, e);
    const p = this.hooks.fetch(key);
    const model = this.hooks.model();
    if (!p) {
      e.data = model ? heldHistory(model, key) : null;
      e.pending = false;
      return e;
    }
    p.then((d) => { e.data = d; }, (err: unknown) => { e.error = String(err); })
      .finally(() => { e.pending = false; this.hooks.ready(key); });
    return e;
  }

  private draw(box: HTMLElement, d: HistoryData, current: number | null): void {
    clear(box);
    const n = d.steps.length;
    box.dataset.n = String(n);
    if (!n) {
      box.append(h("div", { class: "muted" }, "history: no gradient recorded for this value in any step"));
      return;
    }
    const bad = d.nonfinite.filter((x) => x).length;
    box.append(h("div", { class: "stats-title" }, `history over ${n} step${n === 1 ? "" : "s"} (${d.steps[0]} … ${d.steps[n - 1]})` +
      (bad ? ` · NaN/Inf in ${bad}` : "")));
    box.append(h("div", { class: "spark-label" }, "‖grad‖"));
    const grad = sparkline({ steps: d.steps, values: d.grad_norm, nonfinite: d.nonfinite },
      { width: WIDTH, height: HEIGHT, current, label: "‖grad‖" });
    grad.classList.add("spark-grad");
    box.append(grad);
    if (d.update_ratio.some((v) => v !== null)) {
      box.append(h("div", { class: "spark-label" }, "update / weight"));
      const ratio = sparkline({ steps: d.steps, values: d.update_ratio },
        { width: WIDTH, height: HEIGHT, current, label: "update/weight" });
      ratio.classList.add("spark-ratio");
      box.append(ratio);
    }
    box.dataset.drawn = String(performance.now());
  }
}
