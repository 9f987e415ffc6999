// Build: bundles the app and the layout worker with esbuild into rtxviz/web/static/ (served at / by the server),
// copies index.html and style.css. `--tests` instead bundles test/*.test.ts for `node --test`.
// Run through `npm run build` / `npm test`, which first generate src/generated/ (gen.mjs) and type-check (tsc).
import { build } from "esbuild";
import { cpSync, mkdirSync, readdirSync, rmSync } from "node:fs";
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
  const common = { bundle: true, minify: true, sourcemap: false, target: ["chrome110", "firefox110", "safari16"], logLevel: "warning", legalComments: "linked" };
  await build({ ...common, entryPoints: [join(here, "src", "main.ts")], outfile: join(out, "app.js"), format: "iife" });
  await build({ ...common, entryPoints: [join(here, "src", "worker.ts")], outfile: join(out, "layout-worker.js"), format: "iife" });
  cpSync(join(here, "index.html"), join(out, "index.html"));
  cpSync(join(here, "style.css"), join(out, "style.css"));
  console.log(`built into ${out}`);
}
