"""export-model's progress display (rnnx.export.progress): stages with their times and bars on a terminal, plain
lines off it. The clock is a test double (a list of readings), so the times printed are known; the terminal run
of the real CLI is in test_checkpoints.py."""

from __future__ import annotations

import io

from rnnx.export.progress import Progress, bar, counter, format_seconds, tracker


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_only_the_stage_lines_are_printed() -> None:
    stream = io.StringIO()
    with Progress(stream, live=None) as log:  # a StringIO is no terminal
        log("loading")
        told = tracker(log, "tensors")
        told(1, 2), told(2, 2)
        log("parity")
        step = counter(log, 3, "decode steps")
        step(), step(), step()
    assert stream.getvalue() == "- loading\n- parity\n"
    assert [stage for stage, _ in log.times] == ["loading", "parity"]


def test_on_a_terminal_each_stage_ends_with_its_time_and_walks_draw_a_bar() -> None:
    stream, clock = io.StringIO(), Clock()
    log = Progress(stream, live=True, clock=clock)
    log("model: 5 parameters")  # a fact: ends at once, no time
    log("loading")
    told = tracker(log, "tensors")
    clock.now += 1.5
    told(3, 4)
    assert stream.getvalue().endswith("\r- loading  [##################------] 3/4 tensors  1.5 s")
    told(4, 4)
    log("parity")
    step = counter(log, 2, "decode steps")
    clock.now += 70
    step()
    step()
    log.close()
    lines = stream.getvalue().split("\n")
    finals = [line.rpartition("\r")[2].rstrip() for line in lines[:-1]]
    assert finals == ["- model: 5 parameters", "- loading (1.5 s)", "- parity (1 min 10 s)"]
    assert "[########################] 2/2 decode steps  1 min 10 s" in lines[2]
    assert log.times == [("model: 5 parameters", 0.0), ("loading", 1.5), ("parity", 70.0)]


def test_a_log_that_is_not_progress_gets_no_bar_calls() -> None:
    seen: list[str] = []
    step, told = counter(seen.append, 4, "steps"), tracker(seen.append, "tensors")
    step(), told(1, 1)
    assert seen == []


def test_the_bar_and_the_time_formats() -> None:
    assert bar(0, 4, width=8) == "[--------] 0/4"
    assert bar(3, 4, width=8) == "[######--] 3/4"
    assert bar(9, 4, width=8) == "[########] 9/4"  # never past its width
    assert bar(0, 0, width=4) == "[----] 0/0"
    assert (format_seconds(4.25), format_seconds(59.94), format_seconds(65), format_seconds(3600)) == (
        "4.2 s", "59.9 s", "1 min 05 s", "60 min 00 s"
    )  # fmt: skip


def test_a_failed_stage_is_closed_as_failed_on_a_terminal() -> None:
    stream, clock = io.StringIO(), Clock()
    try:
        with Progress(stream, live=True, clock=clock) as log:
            log("tracing")
            clock.now += 2.0
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert stream.getvalue().split("\n")[0].rpartition("\r")[2].rstrip() == "- tracing (failed after 2.0 s)"
