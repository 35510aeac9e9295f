"""Progress of long commands: the plain lines written when stderr is not a terminal, and the ETA's arithmetic."""

from __future__ import annotations

import io

from sweepkit.cli.progress import Progress, eta_s


def test_eta_is_the_rate_so_far_over_what_is_left():
    assert eta_s(25, 100, 10.0) == 30.0
    assert eta_s(100, 100, 10.0) == 0.0
    assert eta_s(0, 100, 10.0) is None


def test_plain_lines_off_a_terminal_first_then_periodic():
    out = io.StringIO()
    with Progress("simulating g", 10, "sims", estimate=True, stream=out, every_s=3600) as p:
        for _ in range(4):
            p.advance(3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simulating g: 3 of ~10 sims, ")   # then none within the hour
    assert p.done == 12 and p.total >= 12                     # an estimate passed is raised, never undercut
    out = io.StringIO()
    with Progress("run g", 4, "points", stream=out, every_s=0) as p:
        for _ in range(4):
            p.advance(1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("run g: 4 of 4 points") and lines[-1].endswith("ETA 0 s")
    assert "ETA" in lines[0]


def test_the_bar_on_a_terminal_draws_to_its_stream():
    out = io.StringIO()
    with Progress("run g", 4, "points", stream=out, terminal=True) as p:
        p.advance(4)
    assert "run g" in out.getvalue() and "4/4" in out.getvalue()
