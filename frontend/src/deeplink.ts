// A deep link to a node: the URL's fragment names the run, the step and the node
// (`#run=<id>&step=<n>&node=<key>`). Selecting a node writes it (replacing the history entry, not adding one);
// opening such a URL opens the run, shows the step and, once the node is drawn, selects and centres it.

export interface DeepLink {
  run: string | null;
  step: number | null;
  node: string | null;
}

/** The link a URL fragment carries (fields absent or malformed are null).
 *
 * parseLink("#run=r1&step=3&node=model.fc%7Cadd%7C1") -> { run: "r1", step: 3, node: "model.fc|add|1" }
 */
export function parseLink(hash: string): DeepLink {
  const p = new URLSearchParams(hash.replace(/^#/, ""));
  const step = p.get("step");
  const n = step !== null && /^-?\d+$/.test(step) ? Number(step) : null;
  return { run: p.get("run") || null, step: n, node: p.get("node") || null };
}

/** The fragment for a link (what parseLink reads back). */
export function linkHash(link: DeepLink): string {
  const p = new URLSearchParams();
  if (link.run !== null) p.set("run", link.run);
  if (link.step !== null) p.set("step", String(link.step));
  if (link.node !== null) p.set("node", link.node);
  return "#" + p.toString();
}

/** What following a link needs of the page. */
export interface LinkHooks {
  /** The open run's id, and the shown step's number and whether it holds a node key. */
  run(): string | null;
  shownStep(): number | null;
  has(key: string): boolean;
  /** Show a step (the step picker's choice). */
  showStep(step: number): void;
  /** Select a node key and centre the view on it; false when it is not drawn yet. */
  reveal(key: string): boolean;
}

export class LinkFollower {
  /** The link the page was opened with, until it has been followed (or the user chose another run). */
  pending: DeepLink | null;
  private stepAsked = false;

  constructor(hash: string, private hooks: LinkHooks) {
    const l = parseLink(hash);
    this.pending = l.run !== null || l.step !== null || l.node !== null ? l : null;
  }

  /** The run to open first (the link's), or null. */
  get run(): string | null {
    return this.pending?.run ?? null;
  }

  /** After every draw: move the page one more step toward the link (the step, then the node once drawn). */
  follow(): void {
    const l = this.pending;
    if (!l) return;
    if (l.run !== null && this.hooks.run() !== l.run) { this.pending = null; return; } // another run was opened
    if (l.step !== null && this.hooks.shownStep() !== l.step) {
      if (!this.stepAsked) {
        this.stepAsked = true;
        this.hooks.showStep(l.step);
      }
      return;
    }
    if (l.node === null) { this.pending = null; return; }
    if (this.hooks.has(l.node) && this.hooks.reveal(l.node)) this.pending = null;
  }

  /** The URL's fragment now names this selection (no new history entry: Back leaves the page, as before). */
  static write(link: DeepLink): void {
    const hash = linkHash(link);
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }
}
