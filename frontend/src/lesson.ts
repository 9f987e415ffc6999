// The lesson panel: the text of the lesson a run belongs to (its `lesson` event, sent by `rtxviz lesson`),
// beside the graph, and the button to the next lesson: its run when the server has one, else it asks the
// lesson runner to start it (`rtxviz lesson` serving the page), its file in an exported course, else the command.
import { $, clear, h } from "./dom";
import { EMBEDDED } from "./env";
import { renderMarkdown } from "./markdown";
import type { Api } from "./api";
import type { RunList } from "./runs";

const LESSON_START_WAIT_MS = 60_000; // a lesson's run starts streaming within this after the runner takes it

/** Ask the server's lesson runner to run lesson `name` (POST /api/lessons/start, JSON: not a form a foreign page
 * could send without CORS letting it). */
export function startLesson(api: Api, name: string): Promise<Response> {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (api.token) headers.Authorization = `Bearer ${api.token}`;
  return fetch("/api/lessons/start", { method: "POST", headers, body: JSON.stringify({ name }) });
}

export interface LessonInfo {
  name: string;
  title: string;
  number: number;
  text: string;
  next: { name: string; title: string } | null;
}

/** The lesson of a run's `lesson` event (free fields), or null (a run that is no lesson, or a malformed one). */
export function lessonOf(ev: unknown): LessonInfo | null {
  const l = (ev && typeof ev === "object" ? ev : null) as Record<string, unknown> | null;
  if (!l || typeof l.text !== "string" || typeof l.title !== "string") return null;
  const n = l.next as Record<string, unknown> | null;
  return {
    name: String(l.name ?? ""), title: l.title, number: typeof l.number === "number" ? l.number : 0, text: l.text,
    next: n && typeof n.name === "string" && typeof n.title === "string" ? { name: n.name, title: n.title } : null,
  };
}

export class LessonPanel {
  private shown: string | null = null;

  constructor(private runs: RunList, private api: Api) {}

  render(lesson: LessonInfo | null): void {
    const box = $("#lesson");
    box.hidden = !lesson;
    const key = lesson ? `${lesson.name}|${this.runs.runs.length}` : null;
    if (!lesson || key === this.shown) return;
    this.shown = key;
    $("#lesson-title").textContent = `Lesson ${lesson.number}: ${lesson.title}`;
    const body = $("#lesson-body");
    clear(body);
    // the file's own "# Title" line is the panel's title already
    body.append(...renderMarkdown(lesson.text.replace(/^# [^\n]*\n/, "")));
    const nav = $("#lesson-next");
    clear(nav);
    if (!lesson.next) {
      nav.append(h("span", { class: "muted" }, "The last lesson."));
      return;
    }
    const next = lesson.next;
    const runName = `lesson ${lesson.number + 1}: ${next.title}`;
    if (EMBEDDED) {
      // an exported course: one file per lesson, named by number and name (rtxviz lesson --export)
      const file = `${String(lesson.number + 1).padStart(2, "0")}-${next.name}.html`;
      nav.append(h("a", { class: "lesson-next-btn", href: file }, `next: ${next.title} ▶`));
      return;
    }
    const run = this.runs.runs.find((r) => r.name === runName);
    const btn = h("button", { type: "button", class: "lesson-next-btn" }, `next: ${next.title} ▶`);
    btn.addEventListener("click", () => void this.next(next.name, runName));
    nav.append(btn, h("div", { id: "lesson-hint", class: "muted" }, run ? "" : "(not run yet: the button starts it)"));
  }

  /** Open the next lesson's run, starting it first when it was not run yet: `rtxviz lesson` serves the page with
   * a route that queues it (cli/lesson_runner.py); a server without one (rtxviz serve) answers 404, and the
   * hint gives the command instead. */
  private async next(name: string, runName: string): Promise<void> {
    const hint = () => $("#lesson-hint");
    const found = () => this.runs.runs.find((r) => r.name === runName);
    const run = found();
    if (run) { this.runs.pick(run.id); return; }
    hint().textContent = "starting it…";
    let r: Response;
    try {
      r = await startLesson(this.api, name);
    } catch (e) {
      hint().textContent = `could not ask the server to start it (${String(e)}): rtxviz lesson ${name}`;
      return;
    }
    if (!r.ok) {
      hint().textContent = r.status === 404 || r.status === 405
        ? `This server runs no lessons (rtxviz serve). Start it with: rtxviz lesson ${name}`
        : `the server did not start it (${r.status} ${await r.text()}): rtxviz lesson ${name}`;
      return;
    }
    // its run appears in the runs list (the lobby socket) once the runner starts streaming it
    const deadline = performance.now() + LESSON_START_WAIT_MS;
    const poll = (): void => {
      const got = found();
      if (got) { this.runs.pick(got.id); return; }
      if (performance.now() > deadline) { hint().textContent = `it did not start within ${LESSON_START_WAIT_MS / 1000} s`; return; }
      window.setTimeout(poll, 100);
    };
    poll();
  }
}
