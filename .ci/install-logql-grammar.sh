#!/usr/bin/env bash
# Installs Grafana's LogQL grammar (@grafana/lezer-logql, Apache-2.0; tests/tools/logql) from
# npm for the dashboards' LogQL syntax check, and prints the directory holding check.mjs.
# Cached under ~/.cache/gpu-otel-agent, keyed by a hash of the package files.
set -euo pipefail
tool="$(cd "$(dirname "$0")/../tests/tools/logql" && pwd)"
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 3; }
key="$(cat "$tool/package.json" "$tool/package-lock.json" "$tool/check.mjs" "$0" \
    | sha256sum | cut -c1-16)"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-otel-agent/logql-$key"
if [ ! -e "$dir/node_modules/@grafana/lezer-logql/package.json" ]; then
    mkdir -p "$dir"
    cp "$tool/package.json" "$tool/package-lock.json" "$tool/check.mjs" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
echo "$dir"
