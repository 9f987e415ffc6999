// Lesson text: a small Markdown subset (headings, paragraphs, "- " lists, ``` code blocks, `code`, **bold**,
// *emphasis*) turned into DOM nodes. Every piece of the text goes in as a text node: markup in a lesson file
// (`<script>`, `<img onerror=...>`) shows as those characters, never as elements.
import { h } from "./dom";

/** Inline spans of one line: `code`, **bold**, *emphasis*; the rest plain text. */
export function inline(text: string): Node[] {
  const out: Node[] = [];
  const re = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push(document.createTextNode(text.slice(last, m.index)));
    if (m[1] !== undefined) out.push(h("code", {}, m[1]));
    else if (m[2] !== undefined) out.push(h("strong", {}, m[2]));
    else out.push(h("em", {}, m[3]));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

/** The blocks of a Markdown text as elements (h3/h4 for headings: the panel has its own title). */
export function renderMarkdown(text: string): HTMLElement[] {
  const out: HTMLElement[] = [];
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let para: string[] = [];
  let list: HTMLElement | null = null;
  const flush = () => {
    if (para.length) out.push(h("p", {}, ...inline(para.join(" "))));
    para = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      const code: string[] = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      out.push(h("pre", { class: "lesson-code" }, code.join("\n")));
      continue;
    }
    const head = /^(#{1,3})\s+(.*)$/.exec(line);
    if (head) {
      flush();
      out.push(h(head[1].length === 1 ? "h3" : "h4", {}, ...inline(head[2])));
      continue;
    }
    const item = /^\s*[-*]\s+(.*)$/.exec(line);
    if (item) {
      if (para.length) { out.push(h("p", {}, ...inline(para.join(" ")))); para = []; }
      if (!list) { list = h("ul", {}); out.push(list); }
      list.append(h("li", {}, ...inline(item[1])));
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    if (list) list = null;
    para.push(line.trim());
  }
  flush();
  return out;
}
