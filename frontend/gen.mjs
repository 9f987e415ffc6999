// Generates src/generated/ (the event types and the gradient classes) from the Python that defines them, with
// ../scripts/gen_frontend.py. The interpreter: $PYTHON, else the repo's .venv, else python3 (it needs pydantic
// and numpy). `npm run build`, `npm run typecheck` and `npm test` run this first.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const venv = [join(root, ".venv", "bin", "python"), join(root, ".venv", "Scripts", "python.exe")].find((p) => existsSync(p));
const python = process.env.PYTHON || venv || "python3";
const r = spawnSync(python, [join(root, "scripts", "gen_frontend.py"), ...process.argv.slice(2)], { stdio: "inherit" });
if (r.error) {
  console.error(`gen.mjs: cannot run ${python} (${r.error.message}); set PYTHON to an interpreter with pydantic and numpy`);
  process.exit(1);
}
process.exit(r.status ?? 1);
