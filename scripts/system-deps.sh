#!/usr/bin/env bash
# System packages beyond Python: graphviz's `dot` (SVG rendering, `make setup`), Chromium (browser tests,
# `make test`) and PostgreSQL (the store and web tests start a throwaway server from its initdb and pg_ctl,
# `make test`). Installs the ones named on the command line with apt when missing (as root, or through sudo);
# otherwise says what to install. Usage: system-deps.sh [graphviz] [chromium] [postgresql]
set -euo pipefail
[ $# -gt 0 ] || set -- graphviz chromium postgresql
missing=()
for want in "$@"; do
  case "$want" in
    graphviz) command -v dot >/dev/null 2>&1 || missing+=(graphviz) ;;
    chromium) [ -x /usr/bin/chromium ] || missing+=(chromium) ;;
    # Debian keeps initdb under /usr/lib/postgresql/<major>/bin, off PATH (tests/store/pgserver.py looks there)
    postgresql) compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 \
                  || missing+=(postgresql) ;;
    *) echo "system-deps: unknown package $want" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "rtxviz: please install ${missing[*]} (e.g. brew install graphviz chromium postgresql); the tests that need them skip" >&2
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "rtxviz: not root and no sudo: install ${missing[*]} with apt-get; the tests that need them skip" >&2
    exit 0
  fi
fi
echo "rtxviz: installing ${missing[*]} with apt-get"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
