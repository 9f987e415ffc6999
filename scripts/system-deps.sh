#!/usr/bin/env bash
# System packages the tests need beyond Python: graphviz's `dot` (SVG rendering) and Chromium (browser tests).
# Installs them with apt when missing (as root, or through sudo); otherwise says what to install.
set -euo pipefail
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "rtxviz: please install ${missing[*]} (e.g. brew install graphviz chromium); the tests that need them skip" >&2
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
