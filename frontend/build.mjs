// Build: bundles the app and the layout worker with esbuild into rtxviz/web/static/ (served at / by the server),
// copies index.html and style.css; then the notebook widget (src/widget.ts) into rtxviz/notebook/static/widget.js,
// one ES module carrying the page with app.js, style.css and the worker inlined (the frame it mounts). `--tests` instead bundles test/*.test.ts for `node --test`.
// Run through `npm run build` / `npm test`, which first generate src/generated/ (gen.mjs) and type-check (tsc).
import { build } from "esbuild";
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tests = process.argv.includes("--tests");

if (tests) {
  const out = join(here, ".test-build");
  rmSync(out, { recursive: true, force: true });
  const entries = readdirSync(join(here, "test")).filter((f) => f.endsWith(".test.ts")).map((f) => join(here, "test", f));
  await build({ entryPoints: entries, outdir: out, bundle: true, platform: "node", format: "esm", outExtension: { ".js": ".mjs" }, logLevel: "warning" });
} else {
  const out = join(here, "..", "rtxviz", "web", "static");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const common = { bundle: true, minify: !process.env.RTXVIZ_NO_MINIFY, sourcemap: false, target: ["chrome110", "firefox110", "safari16"], logLevel: "warning", legalComments: "linked" };
  await build({ ...common, entryPoints: [join(here, "src", "main.ts")], outfile: join(out, "app.js"), format: "iife" });
  await build({ ...common, entryPoints: [join(here, "src", "worker.ts")], outfile: join(out, "layout-worker.js"), format: "iife" });
  cpSync(join(here, "index.html"), join(out, "index.html"));
  cpSync(join(here, "style.css"), join(out, "style.css"));
  console.log(`built into ${out}`);
  const nbOut = join(here, "..", "rtxviz", "notebook", "static");
  rmSync(nbOut, { recursive: true, force: true });
  mkdirSync(nbOut, { recursive: true });
  const frame = frameHtml((f) => readFileSync(join(out, f), "utf8"));
  await build({ ...common, entryPoints: [join(here, "src", "widget.ts")], outfile: join(nbOut, "widget.js"), format: "esm",
    define: { RTXVIZ_FRAME_HTML: JSON.stringify(frame) } });
  console.log(`built into ${nbOut}`);
}

/** The widget frame's page: index.html with its CSP opened to inline scripts (the frame loads no file), the
 * stylesheet and app inlined, the layout worker's source in the assets block (as rtxviz/export/html.py does),
 * and __RTXVIZ_RUN_JSON__ where src/widget.ts puts the run's first events. */
function frameHtml(read) {
  const inline = (code) => code.replace(/<\/script/gi, "<\\/script").replace(/<!--/g, "<\\!--");
  const json = (obj) => JSON.stringify(obj).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026");
  const csp = "default-src 'none'; script-src 'unsafe-inline' blob:; worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:; connect-src 'none'";
  // a cell is narrower than a browser window: narrower side panels
  const fit = "main { grid-template-columns: 170px 1fr 270px; } html, body { height: 100%; }";
  let html = readFileSync(join(here, "index.html"), "utf8");
  const swap = (pattern, text) => {
    if (!pattern.test(html)) throw new Error(`build: index.html has no ${pattern}: the widget frame cannot be made`);
    html = html.replace(pattern, () => text);
  };
  swap(/<meta http-equiv="Content-Security-Policy"[^>]*>/i, `<meta http-equiv="Content-Security-Policy" content="${csp}">`);
  swap(/<link rel="stylesheet" href="style.css">/i, `<style>${read("style.css")}\n${fit}</style>`);
  swap(/<script src="app.js"><\/script>/i,
    "<script>window.RTXVIZ_EMBEDDED = true; window.RTXVIZ_HOSTED = true;</script>\n" +
    '<script type="application/json" id="rtxviz-run">__RTXVIZ_RUN_JSON__</script>\n' +
    `<script type="application/json" id="rtxviz-assets">${json({ "layout-worker.js": read("layout-worker.js") })}</script>\n` +
    `<script>${inline(read("app.js"))}</script>`);
  return html;
}
