// The header: run title, counts, graph-cache badges, and the connection status; and the alerts list.
import { $, clear, h } from "./dom";
import type { Visible } from "./groups";
import { gradClass } from "./colors";
import { EXPLODING, VANISHING } from "./generated/summary";
import { cacheBadgeText, type RunModel, type StepGraph } from "./state";

export class Header {
  /** The run's name as the server (or the exported page) gives it; the run_start event's name wins. */
  runName = "";
  /** An alert was clicked: the key of the node it is about. */
  onAlert: (key: string) => void = () => {};

  status(text: string): void {
    $("#conn").textContent = text;
  }

  title(model: RunModel | null): void {
    $("#run-title").textContent = model?.name || this.runName;
  }

  render(model: RunModel, v: Visible, g: StepGraph, live: boolean, budget: number,
    replayed: { step: number; from: number } | null = null): void {
    this.title(model);
    const step = replayed ? `step ${replayed.step} (replayed the graph of step ${replayed.from})` : `step ${g.step ?? "—"}`;
    $("#counts").textContent =
      `${step} · ${v.total} nodes · ${v.items.size} shown (budget ${budget}) · backward: ${g.backward}`;
    $("#counts").dataset.total = String(v.total);
    $("#counts").dataset.visible = String(v.items.size);
    const t = model.totals;
    const badge = $("#cache-badge");
    const last = live ? t.last ?? g.cache.last : g.cache.last;
    badge.textContent = last === "hit" ? "graph cache: HIT (replayed)" : last === "miss" ? "graph cache: MISS (recorded)" :
      last === "evict" ? "graph cache: evicted" : "graph cache: —";
    badge.className = `cache-badge cache-${last ?? "none"}`;
    badge.dataset.state = last ?? "none";
    const gb = $("#graph-badge");
    gb.hidden = last !== "hit" && last !== "miss";
    gb.textContent = cacheBadgeText(live ? model.lastCache : null, last, g.step);
    gb.dataset.state = last ?? "none";
    if (replayed) {
      gb.hidden = false;
      gb.dataset.state = "hit";
      gb.textContent = `↻ step ${replayed.step} replayed the graph recorded in step ${replayed.from}: drawn as recorded ` +
        `there, with step ${replayed.from}'s gradients (a replay records no nodes)`;
    }
    $("#cache-counters").textContent = `hits ${t.hits} · misses ${t.misses} · evictions ${t.evictions}`;
    const al = $("#alerts");
    clear(al);
    for (const a of g.anomalies.slice(0, 8)) {
      const cls = a.reason === "error" ? "error" : a.origin ? "origin" : "";
      const li = h("li", { class: cls }, `${a.reason === "error" ? "error in backward" : a.phase}: ${a.message || a.op}`);
      if (a.key) li.addEventListener("click", () => this.onAlert(a.key!));
      al.append(li);
    }
    for (const line of gradAlerts(g)) al.append(h("li", { class: `grad-alert ${line.cls}` }, line.text));
    if (model.dropped) al.append(h("li", { class: "dropped" }, `${model.dropped} events dropped by the emitter`));
  }
}

/** Vanishing and exploding gradients of a step, one line per class: how many nodes and the first few modules (a
 * collapsed group hides them otherwise; NaN/Inf are listed by their anomaly events). */
export function gradAlerts(g: StepGraph): { cls: string; text: string }[] {
  const found = new Map<string, string[]>();
  for (const n of g.nodes.values()) {
    const c = gradClass(n.grad);
    if (c !== "vanishing" && c !== "exploding") continue;
    let l = found.get(c);
    if (!l) found.set(c, (l = []));
    l.push(n.module ?? n.name ?? n.op);
  }
  const out: { cls: string; text: string }[] = [];
  for (const c of ["exploding", "vanishing"]) {
    const l = found.get(c);
    if (!l) continue;
    const where = [...new Set(l)];
    const more = where.length > 3 ? `, … (${where.length} modules)` : "";
    const limit = c === "vanishing" ? `‖grad‖ < ${VANISHING}` : `‖grad‖ > ${EXPLODING}`;
    out.push({ cls: c, text: `${l.length} ${c} gradient${l.length === 1 ? "" : "s"} (${limit}): ${where.slice(0, 3).join(", ")}${more}` });
  }
  return out;
}
