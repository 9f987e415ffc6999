// The runs list: what the server has (REST, then the lobby WebSocket), and which run to open: the one the user
// clicked or ?run= named, else the newest live one (a new live run takes over until the user picks one).
import { Stream, type Api, type RunInfo, type WsMessage } from "./api";
import { $, clear, h } from "./dom";
import { EMBEDDED, params } from "./env";

export class RunList {
  runs: RunInfo[] = [];
  /** The open run. */
  current: string | null = null;
  private userPicked = false;
  private lobby: Stream | null = null;

  constructor(private api: Api, private open: (runId: string) => void) {}

  /** Served by `rtxviz serve`: list the runs, open one, then follow the lobby socket. */
  async start(status: (text: string) => void, linked: string | null = null): Promise<void> {
    try {
      this.runs = await this.api.runs();
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

  private pickDefault(): void {
    if (this.userPicked) return;
    const live = this.runs.find((r) => r.status === "running");
    const pick = live ?? this.runs[0];
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

  render(): void {
    const ul = $("#runs");
    clear(ul);
    if (!this.runs.length) ul.append(h("li", { class: "muted" }, "No runs yet. Start one with rtxviz.events.watch(url)."));
    for (const r of this.runs) {
      const li = h("li", { class: `run${r.id === this.current ? " current" : ""} status-${r.status ?? "?"}`, "data-run": r.id },
        h("span", { class: "dot" }), h("span", { class: "run-name" }, r.name || r.id),
        h("span", { class: "run-meta" }, `${r.status === "running" ? "live" : r.status ?? ""} · ${r.n_events ?? 0} events`));
      if (!EMBEDDED) li.addEventListener("click", () => this.pick(r.id));
      ul.append(li);
    }
  }
}
