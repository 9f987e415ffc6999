// Node search and filter: a query matched against each node's op name, module path, leaf name and key; the
// matches are highlighted on the graph (the rest dimmed, or hidden by the filter), and Enter / the arrow keys
// walk through them, selecting and centring each. A match inside a collapsed group marks the group.
import { $ } from "./dom";
import type { GNode, StepGraph } from "./state";

/** The nodes of `g` that `query` matches, in recording order: every whitespace-separated word of the query must
 * occur (case-insensitively) in the node's op, module path, leaf name or key. An empty query matches nothing.
 *
 * matchNodes(g, "fc matmul") -> the matmul recorded in module model.fc
 */
export function matchNodes(g: StepGraph, query: string, among?: Iterable<GNode>): GNode[] {
  const words = query.toLowerCase().split(/\s+/).filter((w) => w.length > 0);
  if (!words.length) return [];
  const out: GNode[] = [];
  for (const n of among ?? g.nodes.values()) {
    const hay = searchText(n);
    if (words.every((w) => hay.includes(w))) out.push(n);
  }
  return out;
}

// a node's op, module, name and key never change once recorded: its search text is built once
const texts = new WeakMap<GNode, string>();

/** What a node is searched by, lower-cased: op, module path, leaf name, key (one string, fields apart). */
export function searchText(n: GNode): string {
  let t = texts.get(n);
  if (t === undefined) {
    t = `${n.op}\u0001${n.module ?? ""}\u0001${n.name ?? ""}\u0001${n.key}`.toLowerCase();
    texts.set(n, t);
  }
  return t;
}

/** What the search needs of the page: the shown graph, where a node is on screen, and how to select/centre it. */
export interface SearchHooks {
  graph(): StepGraph | null;
  /** The visible id that shows a node key (its group when collapsed). */
  vidOf(key: string): string;
  /** Mark these visible ids as matches (null: no search; everything drawn normally). */
  mark(vids: Set<string> | null, filter: boolean): void;
  /** Select a visible id and centre the view on it. */
  go(vid: string): void;
}

export class Search {
  /** The matching visible ids, in recording order of their first matching node (a group counts once). */
  matches: string[] = [];
  /** The position in `matches` that Enter/arrows reached (-1: none yet). */
  current = -1;
  private query = "";
  /** The last match: on which graph (and its structure), for which words, what it found. */
  private last: { g: StepGraph; version: number; words: string; nodes: GNode[] } | null = null;
  private readonly input = $("#search") as HTMLInputElement;
  private readonly filter = $("#search-filter") as HTMLInputElement;
  private readonly count = $("#search-count");

  constructor(private hooks: SearchHooks) {
    this.input.addEventListener("input", () => this.set(this.input.value));
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === "ArrowDown") {
        e.preventDefault();
        this.step(e.key === "Enter" && e.shiftKey ? -1 : 1);
      } else if (e.key === "ArrowUp") {
        e.preventDefault();
        this.step(-1);
      } else if (e.key === "Escape") {
        this.input.value = "";
        this.set("");
      }
    });
    this.filter.addEventListener("change", () => this.refresh());
  }

  /** A new query: match, mark, count (the selection and the view stay until Enter/arrows move them). */
  set(query: string): void {
    this.query = query;
    this.current = -1;
    this.refresh();
  }

  /** Match the query again against the shown graph (a new step, groups opened or closed). */
  refresh(): void {
    const g = this.hooks.graph();
    const words = this.query.trim();
    if (g && !words) this.warm(g);
    if (!g || !words) {
      this.matches = [];
      this.hooks.mark(null, false);
      this.count.textContent = "";
      this.count.dataset.count = "";
      return;
    }
    const vids = new Set<string>();
    // a query that extends the last one (a keystroke typed) matches a subset of its matches: each old word is a
    // word of the new query or the start of one, and a word that contains the longer contains the shorter
    const last = this.last;
    const narrower = !!last && last.g === g && last.version === g.structureVersion && words.startsWith(last.words);
    const nodes = matchNodes(g, words, narrower ? last!.nodes : undefined);
    this.last = { g, version: g.structureVersion, words, nodes };
    for (const n of nodes) vids.add(this.hooks.vidOf(n.key));
    this.matches = [...vids];
    if (this.current >= this.matches.length) this.current = -1;
    this.hooks.mark(vids, this.filter.checked);
    this.showCount(nodes.length);
  }

  /** The graph whose search texts are built (or being built) in idle time. */
  private warmed: { g: StepGraph; version: number } | null = null;

  /** Build the shown graph's search texts while the page is idle, so the first keystroke does not pay for them
   * (5,000 nodes: about a third of that keystroke's handler). Nothing changes on screen; a query typed before
   * the idle callback runs builds what it needs itself, as before. */
  private warm(g: StepGraph): void {
    if (this.warmed && this.warmed.g === g && this.warmed.version === g.structureVersion) return;
    this.warmed = { g, version: g.structureVersion };
    const idle = (globalThis as { requestIdleCallback?: (cb: () => void) => number }).requestIdleCallback;
    const build = (): void => { for (const n of g.nodes.values()) searchText(n); };
    if (idle) idle(build); else setTimeout(build, 0);
  }

  /** Move to the next (+1) or previous (-1) match, wrapping around; select and centre it. */
  step(dir: 1 | -1): void {
    if (!this.matches.length) return;
    const n = this.matches.length;
    this.current = this.current < 0 ? (dir > 0 ? 0 : n - 1) : (this.current + dir + n) % n;
    this.hooks.go(this.matches[this.current]);
    this.showCount(null);
  }

  private showCount(nodes: number | null): void {
    if (nodes !== null) this.count.dataset.nodes = String(nodes);
    const total = this.matches.length;
    const at = this.current >= 0 ? `${this.current + 1}/${total}` : `${total}`;
    this.count.textContent = total ? `${at} match${total === 1 ? "" : "es"}` : "no match";
    this.count.dataset.count = String(total);
  }
}
