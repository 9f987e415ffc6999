// The visible graph: a step's nodes grouped by module path, groups collapsed or expanded, runs of identical
// numbered blocks folded ("layers · Block × 12"), all within a budget of visible items. Pure data.
import type { GNode, StepGraph } from "./state";
import type { Stats } from "./generated/events";

export type ItemType = "node" | "group" | "fold";

export interface VItem {
  vid: string;
  type: ItemType;
  node: GNode | null; // for type "node"
  path: string | null; // group path, or fold's parent path
  label: string;
  count: number; // graph nodes represented
  members: GNode[]; // for groups and folds
  ghost: boolean; // carried over from the previous step, not yet seen in this one
  order: number; // first appearance (placement order)
  foldRange: [number, number] | null;
  /** A recomputed node's checkpoint item (visible id): placed beside it, inside its segment. */
  anchor?: string | null;
}

export interface VEdge {
  from: string;
  to: string;
  grad: Stats | null; // gradient that flowed along the edge (largest norm when edges merge)
  count: number;
  ghost: boolean;
  /** The edge feeds a node recomputed in backward (drawn faint: the same values as in forward). */
  recompute?: boolean;
}

export interface Visible {
  items: Map<string, VItem>;
  edges: VEdge[];
  total: number; // graph nodes in the step
  groups: Map<string, GroupInfo>;
  rep: Map<string, string>; // graph node key -> the visible id that shows it
}

export interface GroupInfo {
  path: string;
  parent: string | null;
  size: number; // nodes inside, at any depth
  children: Set<string>; // child group paths
  direct: number; // nodes directly in it
  sig: string; // structural signature (for folding)
}

export interface ViewChoices {
  budget: number;
  expanded: Set<string>; // by the user (group paths and fold ids)
  collapsed: Set<string>; // by the user
}

const FOLD_MIN = 3;

function parentOf(path: string): string | null {
  const i = path.lastIndexOf(".");
  return i < 0 ? null : path.slice(0, i);
}

/** The group tree of a set of nodes (each node counts toward every prefix of its group path). */
export function buildGroups(nodes: Iterable<GNode>): Map<string, GroupInfo> {
  return groupTree(nodes).groups;
}

/** buildGroups, and how many of the nodes have no group (drawn at the top level). */
function groupTree(nodes: Iterable<GNode>): { groups: Map<string, GroupInfo>; topLevel: number } {
  const groups = new Map<string, GroupInfo>();
  const get = (path: string): GroupInfo => {
    let g = groups.get(path);
    if (!g) {
      const parent = parentOf(path);
      g = { path, parent, size: 0, children: new Set(), direct: 0, sig: "" };
      groups.set(path, g);
      if (parent !== null) get(parent).children.add(path);
    }
    return g;
  };
  // per group, how many of each op it holds directly (its signature sorts the distinct ops, a few dozen, not
  // every node's); added up the tree once at the end, so a node costs one count, not one per ancestor
  const direct = new Map<GroupInfo, Map<string, number>>();
  let topLevel = 0;
  // nodes come in recording order, so runs of them share a module: the last group looked up is reused
  let lastPath: string | null = null;
  let last: GroupInfo | null = null;
  let lastOps: Map<string, number> | null = null;
  for (const n of nodes) {
    if (!n.group) { topLevel++; continue; }
    if (n.group !== lastPath || !last || !lastOps) {
      lastPath = n.group;
      last = get(n.group);
      lastOps = direct.get(last) ?? null;
      if (!lastOps) direct.set(last, (lastOps = new Map()));
    }
    last.direct++;
    lastOps.set(n.op, (lastOps.get(n.op) ?? 0) + 1);
  }
  const ops = new Map<GroupInfo, Map<string, number>>();
  for (const [g0, counts] of direct) {
    let here = 0;
    for (const k of counts.values()) here += k;
    for (let g: GInfoOrNull = g0; g; g = g.parent !== null ? groups.get(g.parent)! : null) {
      g.size += here;
      let to = ops.get(g);
      if (!to) ops.set(g, (to = new Map()));
      for (const [op, k] of counts) to.set(op, (to.get(op) ?? 0) + k);
    }
  }
  for (const [g, counts] of ops) {
    g.sig = `${g.size}:${[...counts].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([op, k]) => `${op}*${k}`).join(",")}`;
  }
  return { groups, topLevel };
}
type GInfoOrNull = GroupInfo | null;

/** Runs of >= FOLD_MIN sibling groups named by consecutive integers with the same structure. Returns fold id per
 * member group path, and the fold's [first, last] index. */
export function findFolds(groups: Map<string, GroupInfo>): Map<string, { id: string; range: [number, number]; n: number }> {
  const out = new Map<string, { id: string; range: [number, number]; n: number }>();
  const byParent = new Map<string, { idx: number; path: string; sig: string }[]>();
  for (const g of groups.values()) {
    const last = g.parent === null ? g.path : g.path.slice(g.parent.length + 1);
    if (!/^\d+$/.test(last)) continue;
    const p = g.parent ?? "";
    let list = byParent.get(p);
    if (!list) byParent.set(p, (list = []));
    list.push({ idx: Number(last), path: g.path, sig: g.sig });
  }
  for (const [parent, list] of byParent) {
    list.sort((a, b) => a.idx - b.idx);
    let i = 0;
    while (i < list.length) {
      let j = i;
      while (j + 1 < list.length && list[j + 1].sig === list[i].sig && list[j + 1].idx === list[j].idx + 1) j++;
      const n = j - i + 1;
      if (n >= FOLD_MIN) {
        const range: [number, number] = [list[i].idx, list[j].idx];
        const id = `F:${parent}[${range[0]}-${range[1]}]`;
        for (let k = i; k <= j; k++) out.set(list[k].path, { id, range, n });
      }
      i = j + 1;
    }
  }
  return out;
}

/** Which groups are collapsed: the user's choices first, then (when the graph is over budget) collapse from the top
 * and expand the largest groups greedily while the visible count stays within the budget. */
export function planCollapse(
  groups: Map<string, GroupInfo>,
  folds: Map<string, { id: string; n: number }>,
  topLevelNodes: number,
  total: number,
  choices: ViewChoices,
): { collapsed: Set<string>; folded: Set<string> } {
  const collapsed = new Set<string>();
  const folded = new Set<string>();
  const foldIds = new Set<string>();
  for (const f of folds.values()) foldIds.add(f.id);
  if (total <= choices.budget) {
    for (const p of choices.collapsed) if (groups.has(p)) collapsed.add(p);
    for (const id of foldIds) if (choices.collapsed.has(id)) folded.add(id);
    // folds only apply to collapsed blocks
    return { collapsed, folded };
  }
  // visible units of an expanded group: its direct nodes plus one per child group (or per fold)
  const unitsOf = (g: GroupInfo): number => {
    let units = g.direct;
    const seen = new Set<string>();
    for (const c of g.children) {
      const f = folds.get(c);
      if (f && !choices.expanded.has(f.id)) {
        if (!seen.has(f.id)) units++;
        seen.add(f.id);
      } else units++;
    }
    return units;
  };
  const tops = [...groups.values()].filter((g) => g.parent === null);
  for (const g of groups.values()) collapsed.add(g.path);
  for (const id of foldIds) folded.add(id);
  let visible = topLevelNodes + tops.length;
  // expand: user-expanded first, then single-child chains, then largest first
  const queue: GroupInfo[] = [...tops];
  const expand = (g: GroupInfo): void => {
    collapsed.delete(g.path);
    const f = folds.get(g.path);
    if (f) folded.delete(f.id);
    for (const c of g.children) queue.push(groups.get(c)!);
  };
  while (queue.length) {
    queue.sort((a, b) => {
      const ua = choices.expanded.has(a.path) ? 1 : 0;
      const ub = choices.expanded.has(b.path) ? 1 : 0;
      return ub - ua || b.size - a.size;
    });
    const g = queue.shift()!;
    if (choices.collapsed.has(g.path)) continue;
    const f = folds.get(g.path);
    if (f && folded.has(f.id) && !choices.expanded.has(g.path)) continue; // stays inside its fold
    const cost = unitsOf(g) - 1;
    if (choices.expanded.has(g.path) || visible + cost <= choices.budget) {
      visible += cost;
      expand(g);
    }
  }
  for (const id of foldIds) if (choices.expanded.has(id)) folded.delete(id);
  return { collapsed, folded };
}

const groupLabel = (path: string): string => path;

/** The visible graph of `g` (plus, greyed, the previous step's nodes not yet seen again). */
export function computeVisible(g: StepGraph, choices: ViewChoices, ghost?: StepGraph | null): Visible {
  // the step's nodes, then (greyed) the previous step's not yet seen again: those from index `seenHere` on
  const all: GNode[] = [...g.nodes.values()];
  const seenHere = all.length;
  if (ghost) for (const n of ghost.nodes.values()) if (!g.nodes.has(n.key)) all.push(n);
  const { groups, topLevel } = groupTree(all);
  const folds = findFolds(groups);
  const foldById = new Map<string, { n: number; range: [number, number]; parent: string }>();
  for (const [path, f] of folds) foldById.set(f.id, { n: f.n, range: f.range, parent: parentOf(path) ?? "" });
  const { collapsed, folded } = planCollapse(groups, folds, topLevel, all.length, choices);
  // representative of a group path: the outermost collapsed/folded prefix
  const repCache = new Map<string, string | null>();
  const repOfGroup = (path: string): string | null => {
    if (repCache.has(path)) return repCache.get(path)!;
    const parent = parentOf(path);
    let rep = parent !== null ? repOfGroup(parent) : null;
    if (rep === null) {
      const f = folds.get(path);
      if (f && folded.has(f.id) && collapsed.has(path)) rep = f.id;
      else if (collapsed.has(path)) rep = `G:${path}`;
    }
    repCache.set(path, rep);
    return rep;
  };
  const items = new Map<string, VItem>();
  const repOf = new Map<string, string>();
  let order = 0;
  let lastGroup: string | null = null;
  let lastRep: string | null = null;
  for (let i = 0; i < all.length; i++) {
    const n = all[i], gh = i >= seenHere;
    if (n.group && n.group !== lastGroup) { lastGroup = n.group; lastRep = repOfGroup(n.group); }
    const r = n.group ? lastRep : null;
    const vid = r ?? n.key;
    repOf.set(n.key, vid);
    let it = items.get(vid);
    if (!it) {
      if (r === null) {
        it = { vid, type: "node", node: n, path: null, label: n.op, count: 1, members: [], ghost: gh, order: order++, foldRange: null };
      } else if (r.startsWith("F:")) {
        const f = foldById.get(r)!;
        const last = f.parent.slice(f.parent.lastIndexOf(".") + 1) || f.parent;
        it = {
          vid, type: "fold", node: null, path: f.parent, label: `${last} · Block × ${f.n}`, count: 0, members: [],
          ghost: gh, order: order++, foldRange: f.range,
        };
      } else {
        const path = r.slice(2);
        it = { vid, type: "group", node: null, path, label: groupLabel(path), count: 0, members: [], ghost: gh, order: order++, foldRange: null };
      }
      items.set(vid, it);
    }
    if (it.type !== "node") {
      it.count++;
      it.members.push(n);
      if (!gh) it.ghost = false;
    }
  }
  for (const it of items.values()) {
    const a = it.node?.anchor;
    if (a) {
      const r = repOf.get(a);
      if (r && r !== it.vid) it.anchor = r;
    }
  }
  const edgeMap = new Map<string, VEdge>();
  for (let j = 0; j < all.length; j++) {
    const n = all[j], gh = j >= seenHere;
    const to = repOf.get(n.key)!;
    for (let i = 0; i < n.inputs.length; i++) {
      const src = n.inputs[i];
      if (!src) continue;
      const from = repOf.get(src);
      if (!from || from === to) continue;
      const id = `${from}\u0000${to}`;
      const grad = n.inGrads ? n.inGrads[i] ?? null : null;
      let e = edgeMap.get(id);
      if (!e) {
        e = { from, to, grad, count: 0, ghost: gh, recompute: n.recomputed };
        edgeMap.set(id, e);
      } else if (grad && (!e.grad || worse(grad, e.grad))) e.grad = grad;
      if (!gh) e.ghost = false;
      if (!n.recomputed) e.recompute = false;
      e.count++;
    }
  }
  return { items, edges: [...edgeMap.values()], total: g.nodes.size, groups, rep: repOf };
}

/** Is a "more alarming" than b (NaN/Inf beats any norm; then the larger norm)? */
function worse(a: Stats, b: Stats): boolean {
  const bad = (s: Stats) => (s.nan ?? 0) + (s.inf ?? 0) > 0 || s.norm === null;
  if (bad(a) !== bad(b)) return bad(a);
  return (a.norm ?? 0) > (b.norm ?? 0);
}
