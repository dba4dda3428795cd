#!/usr/bin/env bash
# Builds the collector of otel-config/otelcol-builder.yaml with Go from the module proxy and
# prints the binary's path. Cached: the binary is kept under ~/.cache/gpu-otel-agent, keyed by
# a hash of the manifest, this script and the Go version, so a second run only hashes; a
# rebuild after a manifest change reuses Go's own module and build caches.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$repo/otel-config/otelcol-builder.yaml"
command -v go >/dev/null || { echo "go is not installed" >&2; exit 3; }
# The builder of the manifest's release: the version of its OTLP receiver (a core module).
version="$(sed -n 's|.*go.opentelemetry.io/collector/receiver/otlpreceiver \(v[0-9.]*\).*|\1|p' \
    "$manifest")"
key="$( (cat "$manifest" "$0"; go version) | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-otel-agent"
binary="$cache/otelcol-gpu-$key/otelcol-gpu"
if [ ! -x "$binary" ]; then
    mkdir -p "$cache"
    work="$(mktemp -d "$cache/otelcol-build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    (
        cd "$work"
        # The builder writes the sources and go.mod, then runs `go mod tidy`, which fails:
        # the proxy lacks some modules that only the components' own tests import. Hence
        # our own `go mod tidy -e` (go on past those), then the build of what is imported.
        go run "go.opentelemetry.io/collector/cmd/builder@$version" --config "$manifest" \
            --skip-compilation >builder.log 2>&1 || true
        [ -f otelcol-gpu/go.mod ] && [ -f otelcol-gpu/components.go ] \
            || { cat builder.log >&2; exit 1; }
        cd otelcol-gpu
        go mod tidy -e >tidy.log 2>&1 || { cat tidy.log >&2; exit 1; }
        go build -trimpath -ldflags="-s -w" -o otelcol-gpu .
    ) >&2
    mkdir -p "$(dirname "$binary")"
    mv "$work/otelcol-gpu/otelcol-gpu" "$binary.tmp"
    mv "$binary.tmp" "$binary"
fi
echo "$binary"
