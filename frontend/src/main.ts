// The viewer page: its parts, each with one concern, wired together. Nothing here but the wiring, opening a run
// and one draw of everything the shown step affects.
import { Api, type RunInfo } from "./api";
import { $ } from "./dom";
import { EMBEDDED, HOSTED } from "./env";
import { RunFeed } from "./feed";
import { Frames } from "./frames";
import { GraphPane } from "./graph";
import type { VItem } from "./groups";
import { Header } from "./header";
import { History } from "./history";
import { Inspector } from "./inspector";
import { LessonPanel, lessonOf } from "./lesson";
import { renderMarkdown } from "./markdown";
import { newMetrics } from "./metrics";
import { renderLegend } from "./panels";
import { RunList } from "./runs";
import { LinkFollower } from "./deeplink";
import { PathToggles } from "./paths";
import { SavedToggle } from "./saved";
import { Search } from "./search";
import { RunModel } from "./state";
import { Teacher } from "./teach";
import { NormHistory } from "./normhistory";
import { DiffPanel } from "./diff";

const api = new Api();
const metrics = newMetrics();
const header = new Header();
const feed = new RunFeed(api);
const shown = () => history.graph;
const history: History = new History({
  draw, invalidate: () => { pane.dirty = true; }, queueFrame: () => frames.queue(), stopTeaching: () => teach.set(false),
  fetchStep: (step) => feed.stepEvents(runs.current ?? "", step),
});
const pane: GraphPane = new GraphPane(metrics, {
  graph: shown, draw, status: (t) => header.status(t),
  title: () => `${history.model?.name || header.runName} · step ${history.graph?.step ?? "—"}`,
});
const inspector = new Inspector(pane, shown, toggle);
const teach: Teacher = new Teacher(history, pane, inspector, draw);
const frames: Frames = new Frames(metrics, {
  model: () => history.model, follow: () => history.follow(), dirty: () => pane.dirty, draw,
});
const runs = new RunList(api, open);
const search = new Search({
  graph: shown, vidOf: (key) => pane.vidOf(key), mark: (vids, filter) => pane.view.mark(vids, filter),
  go: (vid) => { inspector.select(vid); pane.centreOn(vid); },
});
const lesson = new LessonPanel(runs, api);
const saved = new SavedToggle({ graph: shown, show: (bytesOf) => { pane.view.savedBytesOf = bytesOf; pane.redraw(); } });

const link = new LinkFollower(location.hash, {
  run: () => runs.current, shownStep: () => history.graph?.step ?? null,
  has: (key) => history.graph?.nodes.has(key) ?? false,
  showStep: (step) => history.showStep(step),
  reveal: (key) => {
    const vid = pane.vidOf(key);
    if (!pane.item(vid)) return false;
    inspector.select(vid);
    pane.centreOn(vid);
    return true;
  },
});
inspector.onSelect = (vid) => {
  paths.refresh();
  if (link.pending || HOSTED) return; // the link being followed stays in the URL; a notebook frame has no URL
  LinkFollower.write({ run: EMBEDDED ? null : runs.current, step: history.graph?.step ?? null,
    node: pane.item(vid)?.node?.key ?? vid });
};
const paths = new PathToggles({
  graph: shown, vidOf: (key) => pane.vidOf(key),
  selectedKeys: () => {
    const it = inspector.selected ? pane.item(inspector.selected) : null;
    return it ? (it.node ? [it.node.key] : it.members.map((m) => m.key)) : null;
  },
  mark: (src, down, up) => pane.view.markPaths(src, down, up),
});
const normHistory = new NormHistory({
  fetch: (name) => (EMBEDDED ? null : api.history(runs.current ?? "", name)),
  model: () => history.model,
  ready: (name) => { if (inspector.selected && pane.item(inspector.selected)?.node?.key === name) inspector.render(); },
});
inspector.extra = (el, it) => {
  if (it?.node) normHistory.render(el, it.node.key, history.replayed?.step ?? history.picked ?? history.graph?.step ?? null);
};
const diff = new DiffPanel({
  model: () => history.model, shownStep: () => history.replayed?.step ?? history.picked ?? history.graph?.step ?? null,
  stepEvents: (step) => feed.stepEvents(runs.current ?? "", step), showStep: (step) => history.showStep(step),
  vidOf: (key) => pane.vidOf(key), mark: (m) => pane.view.markDiff(m), select: (key) => inspector.selectKey(key),
});
pane.view.onSelect = (vid) => inspector.select(vid);
pane.view.onToggle = toggle;
header.onAlert = (key) => inspector.selectKey(key);
renderLegend($("#legend"));
// for the benchmarks and the browser tests
(window as unknown as { __rtxviz: unknown }).__rtxviz = { metrics, view: pane.view, runs, history, pane, inspector, teach,
  renderMarkdown, search, link, paths, saved, diff, normHistory };

/** Draw the shown step and everything that depends on it. */
function draw(): void {
  const g = history.graph;
  if (!g) return;
  pane.view.replayed = history.replayed !== null;
  const v = pane.draw(g, history.ghost(), inspector.selected);
  header.render(history.model!, v, g, history.live, pane.choices.budget, history.replayed);
  pane.note(history.emptyNote(g, v.items.size));
  history.renderPicker(g, EMBEDDED);
  lesson.render(lessonOf(history.model?.lesson));
  history.render();
  if (inspector.selected) inspector.render();
  search.refresh(); // a new step or other groups: the same query, matched again
  paths.refresh();
  saved.refresh();
  diff.refresh();
  teach.render(g);
  pane.layout.schedule(v);
  link.follow();
}

function open(runId: string): void {
  runs.current = runId;
  // an exported run keeps every step (nothing to fetch); the notebook's frame keeps recent steps (feed.ts)
  const model = new RunModel(EMBEDDED && !HOSTED ? Infinity : 4);
  history.reset(model);
  normHistory.reset();
  diff.toggle(false);
  frames.reset();
  pane.reset();
  inspector.selected = null;
  teach.set(false);
  runs.render();
  feed.open(runId, () => model.lastSeq, {
    hello: (name, lastSeq) => {
      header.runName = name;
      frames.replayUntil = lastSeq;
      header.title(history.model);
    },
    events: (evs, until) => frames.push(evs, until),
    status: (text) => header.status(text),
  });
}

/** Open a group or unfold blocks (double-click, or the inspector's button). */
function toggle(it: VItem): void {
  pane.expand(it);
  inspector.selected = null;
  pane.dirty = true;
  draw();
}

/** The exported page: one run, its events read from the page itself; no WebSocket, no /api. */
function startExported(): void {
  document.body.classList.add("embedded");
  history.exported();
  let run: RunInfo;
  try {
    run = feed.readExported();
  } catch (e) {
    header.status(`cannot read the exported run: ${String(e)}`);
    return;
  }
  header.runName = run.name || run.id;
  runs.only(run);
  header.status(HOSTED ? "notebook view (no server)" : "exported run (no server)");
}

if (EMBEDDED) startExported(); else void runs.start((t) => header.status(t), link.run);
