// The runs list: what the server has (REST, then the lobby WebSocket), and which run to open: the one the user
// clicked or ?run= named, else the newest live one (a new live run takes over until the user picks one).
// On a class server a teacher's list shows whose run is whose and filters by student (?student= keeps the
// choice); a student's token lists only the student's own runs (the server sees to that).
import { Stream, type Api, type RunInfo, type WsMessage } from "./api";
import { $, clear, h } from "./dom";
import { EMBEDDED, params } from "./env";
import { EVERYONE, byOwner, ownerLabel, owners, showsOwners, type Me } from "./owners";

export class RunList {
  runs: RunInfo[] = [];
  /** The open run. */
  current: string | null = null;
  private userPicked = false;
  private lobby: Stream | null = null;
  /** Who the page's token is (null: the exported page, or a server without /api/me). */
  private me: Me | null = null;
  /** The student whose runs a teacher's list shows (EVERYONE: all). */
  private ownerFilter: string = params.get("student") ?? EVERYONE;

  constructor(private api: Api, private open: (runId: string) => void) {}

  /** Served by `rtxviz serve`: list the runs, open one, then follow the lobby socket. */
  async start(status: (text: string) => void, linked: string | null = null): Promise<void> {
    try {
      this.runs = await this.api.runs();
      this.me = await this.api.me().catch(() => null);
    } catch (e) {
      status(`cannot list runs: ${String(e)}`);
      return;
    }
    this.render();
    const wanted = params.get("run") ?? linked; // ?run=, else a deep link's run (deeplink.ts)
    if (wanted) this.pick(wanted); else this.pickDefault();
    this.lobby = new Stream(() => this.api.wsUrl("/api/ws"), (m) => this.onLobby(m), () => {}, () => 0);
  }

  /** The exported page: its one run. */
  only(run: RunInfo): void {
    this.runs = [run];
    this.pick(run.id);
  }

  /** The user's choice (a click, ?run=): it stays open whatever starts later. */
  pick(runId: string): void {
    this.userPicked = true;
    this.open(runId);
  }

  /** The runs the list shows: a teacher's filter by student applied. */
  private visible(): RunInfo[] {
    return showsOwners(this.me, this.runs) ? byOwner(this.runs, this.ownerFilter) : this.runs;
  }

  private pickDefault(): void {
    if (this.userPicked) return;
    const shown = this.visible();
    const live = shown.find((r) => r.status === "running");
    const pick = live ?? shown[0];
    if (pick && pick.id !== this.current) this.open(pick.id);
  }

  private onLobby(m: WsMessage): void {
    if (m.type === "hello" && m.runs) {
      this.runs = m.runs;
      // a run that started between the REST list and this socket's hello is only in the hello: follow it
      this.render();
      this.pickDefault();
      return;
    } else if (m.type === "runs") {
      const i = this.runs.findIndex((r) => r.id === m.run.id);
      if (i >= 0) this.runs[i] = m.run; else this.runs.unshift(m.run);
      this.runs.sort((a, b) => (b.created ?? 0) - (a.created ?? 0));
      // a new live run takes over the view unless the user chose one
      if (i < 0 && m.run.status === "running") this.pickDefault();
    }
    this.render();
    if (!this.current) this.pickDefault();
  }

  /** The teacher's filter: one option per student who has a run (shown only when the list shows owners). */
  private renderFilter(withOwners: boolean): void {
    const select = document.querySelector<HTMLSelectElement>("#owner-filter");
    const who = document.querySelector<HTMLElement>("#whoami");
    if (who) {
      who.hidden = !this.me?.name;
      who.textContent = this.me?.name ? `signed in as ${this.me.name}${this.me.teacher ? " (teacher)" : ""}` : "";
    }
    if (!select) return;
    select.hidden = !withOwners;
    if (!withOwners) return;
    const names = owners(this.runs);
    if (this.ownerFilter !== EVERYONE && !names.includes(this.ownerFilter)) names.push(this.ownerFilter);
    const wanted = [EVERYONE, ...names];
    const have = Array.from(select.options, (o) => o.value);
    if (have.join("\n") !== wanted.join("\n")) {
      clear(select);
      for (const name of wanted) select.append(h("option", { value: name }, name === EVERYONE ? "every student" : name));
    }
    select.value = this.ownerFilter;
    if (!select.dataset.bound) {
      select.dataset.bound = "1";
      select.addEventListener("change", () => {
        this.ownerFilter = select.value;
        const u = new URL(location.href);
        if (this.ownerFilter === EVERYONE) u.searchParams.delete("student"); else u.searchParams.set("student", this.ownerFilter);
        history.replaceState(null, "", u.toString());
        this.render();
      });
    }
  }

  render(): void {
    const ul = $("#runs");
    clear(ul);
    const withOwners = showsOwners(this.me, this.runs);
    this.renderFilter(withOwners);
    const shown = this.visible();
    if (!this.runs.length) ul.append(h("li", { class: "muted" }, "No runs yet. Start one with rtxviz.events.watch(url)."));
    else if (!shown.length) ul.append(h("li", { class: "muted" }, `No runs of ${this.ownerFilter} yet.`));
    for (const r of shown) {
      const li = h("li", { class: `run${r.id === this.current ? " current" : ""} status-${r.status ?? "?"}`, "data-run": r.id },
        h("span", { class: "dot" }), h("span", { class: "run-name" }, r.name || r.id),
        withOwners ? h("span", { class: "run-owner", "data-owner": r.owner ?? "" }, ownerLabel(r)) : null,
        h("span", { class: "run-meta" }, `${r.status === "running" ? "live" : r.status ?? ""} · ${r.n_events ?? 0} events`));
      if (!EMBEDDED) li.addEventListener("click", () => this.pick(r.id));
      ul.append(li);
    }
  }
}
