// The lesson panel: the text of the lesson a run belongs to (its `lesson` event, sent by `rtxviz lesson`),
// beside the graph, and the button to the next lesson: its run when the server has one, its file in an
// exported course, else the command that starts it.
import { $, clear, h } from "./dom";
import { EMBEDDED } from "./env";
import { renderMarkdown } from "./markdown";
import type { RunList } from "./runs";

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

  constructor(private runs: RunList) {}

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
    btn.addEventListener("click", () => {
      const found = this.runs.runs.find((r) => r.name === runName);
      if (found) { this.runs.pick(found.id); return; }
      $("#lesson-hint").textContent = `Start it with: rtxviz lesson ${next.name}`;
    });
    nav.append(btn, h("div", { id: "lesson-hint", class: "muted" }, run ? "" : `(not run yet: rtxviz lesson ${next.name})`));
  }
}
