"""The live screen of ``gpu-agent top``, on blessed (imported here only, by this command).

blessed does the terminal work: terminfo capabilities, the alternate screen, cbreak mode, key
decoding (arrows, Escape, resize-safe size queries) and ``NO_COLOR``. This module maps the
renderer's style names onto it and turns keys into :class:`Options` changes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import Any

from gpu_otel_agent.local.client import LocalClientError
from gpu_otel_agent.top.render import Line, Options, render
from gpu_otel_agent.top.source import Source
from gpu_otel_agent.top.view import SORTS, Filter, Frame, Model

KEY_POLL_S = 0.2  # how soon a key or a resize shows, between refreshes


def _styles(term: Any, colour: bool) -> dict[str, Callable[[str], str]]:
    plain: Callable[[str], str] = str
    return {
        "": plain,
        "title": term.bold_reverse,
        "header": term.reverse,
        "bold": term.bold,
        "dim": term.dim,
        "ok": term.green if colour else plain,
        "warn": term.yellow if colour else term.bold,
        "error": term.bold_red if colour else term.bold_reverse,
    }


def _terminal() -> Any:
    """blessed's Terminal, with ``NO_COLOR`` meaning what no-color.org says: no colour.

    blessed takes it to mean no styling at all, which would also take the cursor movement a
    full screen is drawn with; so it does not see the variable, and :func:`_styles` leaves the
    colours out instead."""
    # blessed asks the terminal about itself at start (XTGETTCAP, bounded by a DA1 reply); a
    # terminal that answers neither (a serial console, some multiplexers) would hold the first
    # screen for blessed's default of 5 s.
    os.environ.setdefault("BLESSED_QUERY_TIMEOUT_SECONDS", "1")
    import blessed  # lazily: the agent itself never loads a terminal library

    saved = os.environ.pop("NO_COLOR", None)
    try:
        return blessed.Terminal()
    finally:
        if saved is not None:
            os.environ["NO_COLOR"] = saved


def _draw(term: Any, lines: list[Line], styles: dict[str, Callable[[str], str]]) -> None:
    out = [term.home]
    for row, line in enumerate(lines[:term.height]):
        out.append(term.move_yx(row, 0))
        out.extend(styles.get(style, str)(text) for text, style in line)
        out.append(term.clear_eol)
    out.append(term.clear_eos)
    print("".join(out), end="", flush=True)


def _key(options: Options, key: Any) -> tuple[Options, bool]:
    """The options after ``key``, and whether to quit."""
    if options.prompt is not None:
        if key.name == "KEY_ENTER" or str(key) in ("\n", "\r"):
            try:
                return replace(options, filter=Filter.parse(options.prompt), prompt=None,
                               status=""), False
            except ValueError as error:
                return replace(options, prompt=None, status=str(error)), False
        if key.name == "KEY_ESCAPE" or str(key) == "\x1b":
            return replace(options, filter=Filter(), prompt=None, status=""), False
        if key.name in ("KEY_BACKSPACE", "KEY_DELETE") or str(key) in ("\x7f", "\b"):
            return replace(options, prompt=options.prompt[:-1]), False
        if not key.is_sequence and str(key).isprintable():
            return replace(options, prompt=options.prompt + str(key)), False
        return options, False
    text = str(key)
    if text in ("q", "Q") or text == "\x03":
        return options, True
    if text == "s":
        return replace(options, sort=SORTS[(SORTS.index(options.sort) + 1) % len(SORTS)]), False
    if text in ("p", " "):
        return replace(options, paused=not options.paused), False
    if text == "/":
        return replace(options, prompt=str(options.filter)), False
    if key.name == "KEY_ESCAPE" or text == "\x1b":
        return replace(options, filter=Filter(), status=""), False
    return options, False


def _refresh(source: Source, model: Model, options: Options,
             frame: Frame | None) -> tuple[Options, Frame | None]:
    """A new frame; on a lost connection the last one stays, with the reason in the status."""
    try:
        frame = model.update(source.snapshot(), source.events(model.last_seq))
    except LocalClientError as error:
        return replace(options, status=f"lost the agent: {error}"), frame
    return (replace(options, status="") if options.status.startswith("lost") else options), frame


def run(source: Source, model: Model, options: Options, interval: float) -> int:
    term = _terminal()
    styles = _styles(term, colour=not os.environ.get("NO_COLOR"))
    resized = False

    def on_resize(signum: int, frame: FrameType | None) -> None:
        nonlocal resized
        resized = True

    previous = signal.signal(signal.SIGWINCH, on_resize)
    next_read = 0.0
    frame = model.frame
    dirty = True
    try:
        with term.fullscreen(), term.cbreak(), term.hidden_cursor():
            while True:
                now = time.monotonic()
                if now >= next_read:
                    next_read = now + interval
                    if not options.paused:
                        options, frame = _refresh(source, model, options, frame)
                        dirty = True
                if resized:
                    resized = False
                    print(term.clear, end="", flush=True)
                    dirty = True
                if dirty and frame is not None:
                    _draw(term, render(frame, options, term.width, term.height), styles)
                    dirty = False
                key = term.inkey(timeout=KEY_POLL_S)
                if key:
                    options, done = _key(options, key)
                    if done:
                        return 0
                    dirty = True
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGWINCH, previous)
