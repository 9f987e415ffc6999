// The header: run title, counts, graph-cache badges, and the connection status; and the alerts list.
import { $, clear, h } from "./dom";
import type { Visible } from "./groups";
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

  render(model: RunModel, v: Visible, g: StepGraph, live: boolean, budget: number): void {
    this.title(model);
    $("#counts").textContent =
      `step ${g.step ?? "—"} · ${v.total} nodes · ${v.items.size} shown (budget ${budget}) · backward: ${g.backward}`;
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
    $("#cache-counters").textContent = `hits ${t.hits} · misses ${t.misses} · evictions ${t.evictions}`;
    const al = $("#alerts");
    clear(al);
    for (const a of g.anomalies.slice(0, 8)) {
      const cls = a.reason === "error" ? "error" : a.origin ? "origin" : "";
      const li = h("li", { class: cls }, `${a.reason === "error" ? "error in backward" : a.phase}: ${a.message || a.op}`);
      if (a.key) li.addEventListener("click", () => this.onAlert(a.key!));
      al.append(li);
    }
    if (model.dropped) al.append(h("li", { class: "dropped" }, `${model.dropped} events dropped by the emitter`));
  }
}
