// The step-to-step diff: two steps of a run side by side, what changed between them. Nodes are matched by their
// structural key (module|op|ordinal, L:<leaf name>: the same node of another step has the same key), so the diff
// says which nodes were added or removed, which changed shape, and whose gradient norm jumped (by a factor of
// `JUMP` or more either way) or became NaN/Inf. The list is in the right panel; the graph marks the same nodes.
import { fmt } from "./colors";
import { $, clear, h } from "./dom";
import type { RunEvent } from "./generated/events";
import { leafFromEvent, StepGraph, type GNode, type RunModel } from "./state";

// view.ts's shapeText (view.ts reads the page's URL at import, which the unit tests under node have not)
const shapeText = (shape: number[]): string => `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;

/** A gradient norm this many times larger (or smaller) than in the other step is a jump. */
export const JUMP = 10;

export interface NormJump {
  key: string;
  from: number | null;
  to: number | null;
  /** to / from; Infinity where NaN/Inf appeared or a zero norm became non-zero. */
  factor: number;
  /** The gradient in the later step holds NaN/Inf and did not in the earlier one. */
  nan: boolean;
}

export interface StepDiff {
  added: string[];
  removed: string[];
  reshaped: { key: string; from: number[]; to: number[] }[];
  /** Sorted: NaN appearing first, then by how far the norm moved (the larger of factor and 1/factor). */
  jumped: NormJump[];
}

const bad = (n: GNode): boolean => !!n.grad && (n.grad.nan ?? 0) + (n.grad.inf ?? 0) > 0;
const sameShape = (a: number[], b: number[]) => a.length === b.length && a.every((d, i) => d === b[i]);
const moved = (j: NormJump) => (j.nan ? Infinity : j.factor >= 1 ? j.factor : 1 / j.factor);

/** What changed from step graph `a` to step graph `b`.
 *
 * diffGraphs(a, b).jumped[0] is the node whose gradient became NaN/Inf, or whose norm moved the most. */
export function diffGraphs(a: StepGraph, b: StepGraph, jump = JUMP): StepDiff {
  const out: StepDiff = { added: [], removed: [], reshaped: [], jumped: [] };
  for (const [key, nb] of b.nodes) {
    const na = a.nodes.get(key);
    if (!na) { out.added.push(key); continue; }
    if (!sameShape(na.shape, nb.shape)) out.reshaped.push({ key, from: na.shape, to: nb.shape });
    if (!na.grad || !nb.grad) continue;
    const nan = bad(nb) && !bad(na);
    const x = na.grad.norm ?? null, y = nb.grad.norm ?? null;
    let factor = 1;
    if (nan) factor = Infinity;
    else if (x === null || y === null) continue; // NaN in both, or a number not sent
    else if (x === 0) factor = y === 0 ? 1 : Infinity;
    else factor = y / x;
    if (nan || factor >= jump || factor <= 1 / jump) out.jumped.push({ key, from: x, to: y, factor, nan });
  }
  for (const key of a.nodes.keys()) if (!b.nodes.has(key)) out.removed.push(key);
  out.jumped.sort((p, q) => moved(q) - moved(p));
  return out;
}

/** The graph of one step from its events, with the run's leaf table (a copy: the step's own leaf events join it). */
export function graphOf(model: RunModel, step: number, events: RunEvent[]): StepGraph {
  const leaves = new Map(model.leaves);
  const g = new StepGraph(step, leaves);
  for (const ev of events) {
    if (ev.kind === "leaf") {
      const l = leafFromEvent(ev as Parameters<typeof leafFromEvent>[0]);
      leaves.set(l.id, l);
    }
    g.apply(ev);
  }
  return g;
}

export interface DiffHooks {
  model(): RunModel | null;
  /** The step the graph shows. */
  shownStep(): number | null;
  /** Every event of a step (the page's, or fetched). */
  stepEvents(step: number): Promise<RunEvent[]>;
  /** Show step `step` on the graph (the diff's later step is the one drawn). */
  showStep(step: number): void;
  vidOf(key: string): string;
  /** Mark visible ids with their diff classes ("diff-added", "diff-reshaped", "diff-jumped", space-separated: a
   * group holds several kinds, a node may have changed shape and jumped); null clears. */
  mark(classes: Map<string, string> | null): void;
  select(key: string): void;
}

/** The "compare steps" panel: two step pickers, the diff's list, the marks on the graph. */
export class DiffPanel {
  private readonly box = $("#diff");
  private readonly selA = $("#diff-a") as HTMLSelectElement;
  private readonly selB = $("#diff-b") as HTMLSelectElement;
  private readonly body = $("#diff-body");
  private open = false;
  private diff: StepDiff | null = null;
  /** Bumped per comparison asked: an answer for an older one is dropped. */
  private ask = 0;

  constructor(private hooks: DiffHooks) {
    $("#diff-btn").addEventListener("click", () => this.toggle());
    $("#diff-close").addEventListener("click", () => this.toggle(false));
    this.selA.addEventListener("change", () => void this.compare());
    this.selB.addEventListener("change", () => void this.compare(true));
  }

  toggle(on = !this.open): void {
    this.open = on;
    this.box.hidden = !on;
    $("#diff-btn").classList.toggle("on", on);
    if (!on) {
      this.diff = null;
      this.hooks.mark(null);
      return;
    }
    this.fillPickers();
    void this.compare();
  }

  /** The sampled steps, newest first; B defaults to the shown step, A to the sampled step before it. `keep`: a
   * live run brought new steps, the steps picked stay picked. */
  private fillPickers(keep = false): void {
    const model = this.hooks.model();
    const all = model?.allSteps ?? [];
    this.selA.dataset.n = String(all.length);
    const steps = all.filter((s): s is number => s !== null && !model!.unsampled.has(s));
    const uniq = [...new Set(steps)].sort((x, y) => y - x);
    const was = [this.selA.value, this.selB.value];
    for (const sel of [this.selA, this.selB]) {
      clear(sel);
      for (const st of uniq) sel.append(h("option", { value: String(st) }, `step ${st}`));
    }
    if (keep) {
      [this.selA.value, this.selB.value] = was;
      return;
    }
    const shown = this.hooks.shownStep();
    const b = shown !== null && uniq.includes(shown) ? shown : uniq[0];
    const a = uniq.find((st) => b !== undefined && st < b) ?? uniq[1] ?? b;
    if (b !== undefined) this.selB.value = String(b);
    if (a !== undefined) this.selA.value = String(a);
  }

  private async compare(showB = false): Promise<void> {
    const model = this.hooks.model();
    const a = Number(this.selA.value), b = Number(this.selB.value);
    if (!model || this.selA.value === "" || this.selB.value === "") {
      clear(this.body);
      this.body.append(h("p", { class: "muted" }, "two sampled steps are needed to compare"));
      return;
    }
    const ask = ++this.ask;
    clear(this.body);
    this.body.append(h("p", { class: "muted" }, `comparing step ${a} with step ${b}…`));
    if (showB || this.hooks.shownStep() !== b) this.hooks.showStep(b);
    const [ea, eb] = await Promise.all([this.events(model, a), this.events(model, b)]);
    if (ask !== this.ask || !this.open) return;
    this.diff = diffGraphs(graphOf(model, a, ea), graphOf(model, b, eb));
    this.render(a, b);
    this.refresh();
  }

  private events(model: RunModel, step: number): Promise<RunEvent[]> {
    const rec = model.record(String(step));
    return rec && rec.complete ? Promise.resolve(rec.events) : this.hooks.stepEvents(step);
  }

  /** Mark the diff's nodes on the graph as drawn now (after a redraw, or groups opened). */
  refresh(): void {
    if (!this.open) return;
    if (this.selA.dataset.n !== String(this.hooks.model()?.allSteps.length ?? 0)) this.fillPickers(true);
    if (!this.diff) return;
    const d = this.diff;
    const m = new Map<string, string>();
    const add = (key: string, cls: string) => {
      const vid = this.hooks.vidOf(key);
      const had = m.get(vid);
      if (!had?.split(" ").includes(cls)) m.set(vid, had ? `${had} ${cls}` : cls);
    };
    for (const k of d.added) add(k, "diff-added");
    for (const r of d.reshaped) add(r.key, "diff-reshaped");
    for (const j of d.jumped) add(j.key, "diff-jumped");
    this.hooks.mark(m);
  }

  private render(a: number, b: number): void {
    const d = this.diff!;
    clear(this.body);
    const summary = h("div", { class: "diff-summary" },
      `step ${a} → ${b}: ${d.added.length} added · ${d.removed.length} removed · ${d.reshaped.length} reshaped · ` +
      `${d.jumped.length} norm${d.jumped.length === 1 ? "" : "s"} jumped (≥ ${JUMP}× or NaN)`);
    summary.dataset.added = String(d.added.length);
    summary.dataset.removed = String(d.removed.length);
    summary.dataset.reshaped = String(d.reshaped.length);
    summary.dataset.jumped = String(d.jumped.length);
    this.body.append(summary);
    const list = (title: string, cls: string, items: { key: string; text: string }[], pick: boolean) => {
      if (!items.length) return;
      const ul = h("ul", { class: `diff-list ${cls}` });
      for (const it of items.slice(0, 200)) {
        const li = h("li", { "data-key": it.key });
        const label = pick ? h("a", { href: "#" }, it.text) : h("span", {}, it.text);
        if (pick) label.addEventListener("click", (e) => { e.preventDefault(); this.hooks.select(it.key); });
        li.append(label);
        ul.append(li);
      }
      if (items.length > 200) ul.append(h("li", { class: "muted" }, `… and ${items.length - 200} more`));
      this.body.append(h("div", { class: "stats-title" }, `${title} (${items.length})`), ul);
    };
    list("norms jumped", "jumped", d.jumped.map((j) => ({
      key: j.key,
      text: `${j.key}: ${fmt(j.from)} → ${j.nan ? "NaN/Inf" : fmt(j.to)}${j.nan ? "" : ` (${j.factor === Infinity ? "from 0" : `×${fmt(j.factor, 3)}`})`}`,
    })), true);
    list("reshaped", "reshaped", d.reshaped.map((r) => ({ key: r.key, text: `${r.key}: ${shapeText(r.from)} → ${shapeText(r.to)}` })), true);
    list("added", "added", d.added.map((k) => ({ key: k, text: k })), true);
    list("removed (not in the later step)", "removed", d.removed.map((k) => ({ key: k, text: k })), false);
  }
}
