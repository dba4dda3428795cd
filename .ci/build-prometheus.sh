#!/usr/bin/env bash
# Builds Prometheus 3 (its Go module github.com/prometheus/prometheus is versioned v0.3MM.P for
# Prometheus 3.MM.P) from the Go module proxy for the OTLP end-to-end tests (Debian's
# Prometheus 2.42 has no OTLP receiver), and prints the binary's path. Built with the
# remove_all_sd tag (no service-discovery plugins: the tests use static targets and OTLP
# pushes) and without the embedded web UI (the builtinassets tag): only the API is used.
# Cached under ~/.cache/gpu-otel-agent, keyed by a hash of this script and the Go version.
set -euo pipefail
MODULE_VERSION=v0.316.0  # Prometheus 3.16.0
command -v go >/dev/null || { echo "go is not installed" >&2; exit 3; }
key="$( (cat "$0"; go version) | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-otel-agent"
binary="$cache/prometheus-$key/prometheus"
if [ ! -x "$binary" ]; then
    mkdir -p "$(dirname "$binary")"
    release="3.${MODULE_VERSION#v0.3}"
    GOBIN="$(dirname "$binary")/bin" go install -trimpath -tags remove_all_sd \
        -ldflags="-s -w -X github.com/prometheus/common/version.Version=${release}" \
        "github.com/prometheus/prometheus/cmd/prometheus@$MODULE_VERSION" >&2
    mv "$(dirname "$binary")/bin/prometheus" "$binary"
    rmdir "$(dirname "$binary")/bin"
fi
echo "$binary"
