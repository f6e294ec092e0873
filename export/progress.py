"""What ``export-model`` shows while it works.

An export's stages report through a :data:`~rnnx.export.stages.Log`: a callable taking one line, the start of a
stage. :class:`Progress` is the CLI's log. On a terminal it keeps the running stage on one line with its elapsed
time (a ticker thread redraws it while a long call such as ``torch.export`` runs; the line cut to the terminal's
width), closes each stage with its time when the next begins (a stage under :data:`SHOWN_SECONDS` without it), and
draws a bar where a stage walks over items (a checkpoint's tensors as they load, the parity check's decode steps).
Off a terminal (a pipe, a file, CI) it prints the stage lines alone, as plain ``- stage`` lines: no times, bars or
carriage returns.

A stage that walks over items reports through :func:`counter` (a known total) or :func:`tracker` (a total learnt on
the way): a bar when the log is a :class:`Progress`, a no-op for any other log, so an API caller's ``log=print``
keeps working.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Optional, TextIO

#: Seconds between redraws of the running stage on a terminal.
TICK_SECONDS = 0.25

#: Characters of the progress bar.
BAR_WIDTH = 24

#: A stage that ends sooner than this many seconds (a line that states a fact, such as the model's size) is closed
#: without its time.
SHOWN_SECONDS = 0.1


def format_seconds(seconds: float) -> str:
    """``4.2 s``, ``1 min 05 s``: a stage's time as the progress line prints it."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[######------] 12/64``: ``done`` of ``total`` as a bar of ``width`` characters."""
    filled = 0 if total <= 0 else min(width, done * width // total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


class Progress:
    """The CLI's log (see the module docstring). ``live``: draw on one line with times and bars (default: whether
    ``stream`` is a terminal). ``clock``: seconds, for tests. Use as a context manager, or call :meth:`close` to
    end the last stage."""

    def __init__(
        self, stream: Optional[TextIO] = None, live: Optional[bool] = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.live = bool(getattr(self.stream, "isatty", lambda: False)()) if live is None else live
        self.clock = clock
        self._lock = threading.Lock()
        self._stage: Optional[str] = None
        self._started = 0.0
        self._items: Optional[tuple[int, int, str]] = None  # (done, total, what) of the running bar
        self._width = 0  # characters drawn on the live line
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None
        self.times: list[tuple[str, float]] = []  # (stage, seconds) of every ended stage

    def __call__(self, message: str) -> None:
        """A stage begins: ends the running one (with its time, on a terminal) and shows ``message``."""
        with self._lock:
            self._end_stage()
            self._stage, self._started, self._items = message, self.clock(), None
            if self.live:
                self._draw()
                self._start_ticker()
            else:
                self.stream.write(f"- {message}\n")
                self.stream.flush()

    def items(self, total: int, what: str) -> Callable[[int], None]:
        """Starts a bar over ``total`` ``what`` in the running stage; returns ``advance(n)``, which counts ``n``
        more done."""
        with self._lock:
            self._items = (0, total, what)
            self._draw()

        def advance(n: int = 1) -> None:
            with self._lock:
                if self._items is not None:
                    done, total_, what_ = self._items
                    self._items = (min(done + n, total_), total_, what_)
                    self._draw()

        return advance

    def close(self, failed: bool = False) -> None:
        """Ends the running stage (its time printed on a terminal; ``failed``: as failed) and stops the ticker."""
        with self._lock:
            self._end_stage(failed)
            self._stage = None
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
            self._ticker = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        self.close(failed=kind is not None)

    def _line(self) -> str:
        """The live line: the stage (cut to fit the terminal's width), its bar and its time so far."""
        tail = f"  {format_seconds(self.clock() - self._started)}"
        if self._items is not None:
            done, total, what = self._items
            tail = f"  {bar(done, total)} {what}" + tail
        width = shutil.get_terminal_size().columns - 1
        room = width - len(tail) - 2
        stage = self._stage if len(self._stage) <= room else self._stage[: max(room - 3, 0)] + "..."
        return f"- {stage}{tail}"[:width]  # never wider than the terminal: a wrapped line is not redrawn

    def _draw(self) -> None:
        if not self.live or self._stage is None:
            return
        line = self._line()
        self.stream.write("\r" + line + " " * max(0, self._width - len(line)))
        self.stream.flush()
        self._width = len(line)

    def _end_stage(self, failed: bool = False) -> None:
        if self._stage is None:
            return
        seconds = self.clock() - self._started
        self.times.append((self._stage, seconds))
        if self.live:
            took = f" (failed after {format_seconds(seconds)})" if failed else (
                f" ({format_seconds(seconds)})" if seconds >= SHOWN_SECONDS else "")  # fmt: skip
            line = f"- {self._stage}{took}"
            self.stream.write("\r" + line + " " * max(0, self._width - len(line)) + "\n")
            self.stream.flush()
            self._width = 0

    def _start_ticker(self) -> None:
        if self._ticker is not None:
            return
        self._stop.clear()

        def tick() -> None:
            while not self._stop.wait(TICK_SECONDS):
                with self._lock:
                    self._draw()

        self._ticker = threading.Thread(target=tick, name="rnnx-export-progress", daemon=True)
        self._ticker.start()


def counter(log: Any, total: int, what: str) -> Callable[..., None]:
    """``advance(*_)`` for a callback-driven walk (such as the parity check's ``on_step``): a bar of ``total``
    ``what`` when ``log`` is a :class:`Progress`, else a no-op."""
    if not isinstance(log, Progress):
        return lambda *_: None
    advance = log.items(total, what)
    return lambda *_: advance(1)


def tracker(log: Any, what: str) -> Callable[[int, int], None]:
    """``told(done, total)`` for a walk that learns its total as it goes (a checkpoint's tensor reads): a bar of
    ``what``, started at the first call, when ``log`` is a :class:`Progress`; else a no-op."""
    if not isinstance(log, Progress):
        return lambda done, total: None
    advance: list[Callable[[int], None]] = []
    seen = [0]

    def told(done: int, total: int) -> None:
        if not advance:
            advance.append(log.items(total, what))
        advance[0](done - seen[0])
        seen[0] = done

    return told
