// Paths through the graph from the selection: its path to the loss (what it feeds that reaches a backward root)
// and its inputs' cone (everything it was computed from). Toggled in the inspector; drawn by view.ts's marks.
import { $ } from "./dom";
import type { StepGraph } from "./state";

/** Keys of the nodes `from` feeds, at any distance, that reach a backward root (the loss), `from` excluded; when
 * the step has no root yet (no backward), every node it feeds.
 *
 * For x -> matmul -> add -> sum (the root) with add -> exp on the side: pathToLoss(g, ["matmul"]) = {add, sum}
 */
export function pathToLoss(g: StepGraph, from: Iterable<string>): Set<string> {
  const consumers = new Map<string, string[]>();
  const roots: string[] = [];
  for (const n of g.nodes.values()) {
    if (n.isRoot) roots.push(n.key);
    for (const k of n.inputs) {
      if (!k) continue;
      let l = consumers.get(k);
      if (!l) consumers.set(k, (l = []));
      l.push(n.key);
    }
  }
  const start = [...from];
  const down = reach(start, (k) => consumers.get(k) ?? []);
  if (!roots.length) return down;
  const feedsLoss = reach(roots, (k) => g.nodes.get(k)?.inputs ?? []);
  for (const r of roots) feedsLoss.add(r);
  for (const k of down) if (!feedsLoss.has(k)) down.delete(k);
  return down;
}

/** Keys of everything `from` was computed from, at any distance, `from` excluded. */
export function inputsCone(g: StepGraph, from: Iterable<string>): Set<string> {
  return reach([...from], (k) => g.nodes.get(k)?.inputs ?? []);
}

/** What `next` reaches from `start` (breadth first, iterative: graphs are thousands of nodes deep), `start`
 * itself excluded unless reached again. */
function reach(start: string[], next: (k: string) => readonly string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...start];
  for (let i = 0; i < queue.length; i++) {
    for (const k of next(queue[i])) {
      if (!k || seen.has(k)) continue;
      seen.add(k);
      queue.push(k);
    }
  }
  return seen;
}

/** What the path toggles need of the page. */
export interface PathHooks {
  graph(): StepGraph | null;
  /** The node keys the selection stands for (a group: its members), or null when nothing is selected. */
  selectedKeys(): string[] | null;
  vidOf(key: string): string;
  /** Mark the visible ids on the path to the loss and in the inputs' cone (null: no path shown). */
  mark(source: Set<string> | null, down: Set<string> | null, up: Set<string> | null): void;
}

export class PathToggles {
  private readonly down = $("#path-down") as HTMLInputElement;
  private readonly up = $("#path-up") as HTMLInputElement;

  constructor(private hooks: PathHooks) {
    this.down.addEventListener("change", () => this.refresh());
    this.up.addEventListener("change", () => this.refresh());
  }

  /** Compute the paths of the selection again (another selection, another step, groups opened). */
  refresh(): void {
    const g = this.hooks.graph();
    const keys = this.hooks.selectedKeys();
    if (!g || !keys || (!this.down.checked && !this.up.checked)) {
      this.hooks.mark(null, null, null);
      return;
    }
    const vids = (ks: Iterable<string>) => new Set([...ks].map((k) => this.hooks.vidOf(k)));
    const src = vids(keys);
    const down = this.down.checked ? vids(pathToLoss(g, keys)) : null;
    const up = this.up.checked ? vids(inputsCone(g, keys)) : null;
    this.hooks.mark(src, down, up);
  }
}
