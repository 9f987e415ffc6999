"""Build hooks: wheels and sdists carry the built viewer (rtxviz/web/static), so pip users need no Node; and the
C files (rtxviz/_native.c: the fused memory passes of a watched run; rtxviz/_eventcheck.c: the server's check of
events) are compiled when a C compiler is there. They are
optional: without them numpy and pydantic do the same work, slower.

Everything else about the package is in pyproject.toml.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


#: the built page and the notebook widget: folders of data, declared as packages so setuptools ships them instead of
#: warning that each "is absent from the packages configuration"
STATIC_PACKAGES = ("rtxviz.web.static", "rtxviz.notebook.static")


class BuildPyWithViewer(build_py):
    """Build the viewer (`npm ci && npm run build` in frontend/) when its output is missing.

    The build first generates the viewer's event types and gradient classes with scripts/gen_frontend.py, under
    this interpreter (PYTHON): in a pip build that is the build environment's, which has pydantic and numpy from
    pyproject.toml's build-system requires."""

    def run(self) -> None:
        built = [ROOT / "rtxviz" / "web" / "static" / "index.html",
                 ROOT / "rtxviz" / "notebook" / "static" / "widget.js"]
        if not all(path.exists() for path in built):  # the page, and the notebook widget the same build makes
            frontend = ROOT / "frontend"
            if not (frontend / "package.json").exists():
                raise SystemExit("rtxviz: the viewer is not built and frontend/ is missing; build from a checkout")
            if shutil.which("npm") is None:
                raise SystemExit("rtxviz: building the viewer needs Node.js >= 20 with npm (or run `make frontend` "
                                 "on a machine that has it, then build the wheel)")
            if not (ROOT / "scripts" / "gen_frontend.py").exists():
                raise SystemExit("rtxviz: the viewer is not built and scripts/gen_frontend.py is missing; build from "
                                 "a checkout")
            env = {**os.environ, "PYTHON": sys.executable}
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=frontend, check=True)
            subprocess.run(["npm", "run", "build"], cwd=frontend, check=True, env=env)
        # built just now, after setuptools looked for packages: declare the folder, so that its files ship as the
        # package's data instead of setuptools warning that the folder "would be ignored"
        for package in STATIC_PACKAGES:
            if self.packages is not None and package not in self.packages:
                self.packages.append(package)
                self.package_data.setdefault(package, ["*", "**/*"])
        super().run()


NATIVE = Extension(
    "rtxviz._native", ["rtxviz/_native.c"],
    extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
    optional=True,  # no compiler: the package still installs, and numpy does the work
)

# the server's copy-free check of decoded events (rtxviz/event_specs.py); without it pydantic checks every event
EVENT_CHECK = Extension(
    "rtxviz._eventcheck", ["rtxviz/_eventcheck.c"],
    extra_compile_args=[] if sys.platform == "win32" else ["-O2"],
    optional=True,
)

setup(cmdclass={"build_py": BuildPyWithViewer}, ext_modules=[NATIVE, EVENT_CHECK])
