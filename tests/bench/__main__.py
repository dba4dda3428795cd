"""Entry point of ``python -m tests.bench`` (see tests/bench/cli.py)."""

from __future__ import annotations

from tests.bench.cli import main

raise SystemExit(main())
