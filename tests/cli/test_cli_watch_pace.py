"""`dxts watch`'s rate and ETA per member, from its successive readings."""

from __future__ import annotations

from dxts.cli.workgraphs import Pace


def test_no_rate_before_two_readings() -> None:
    pace = Pace()
    pace.add(0.0, 0)
    assert pace.text(10) == ""


def test_the_rate_and_the_time_left_at_it() -> None:
    pace = Pace()
    pace.add(0.0, 0)
    pace.add(60.0, 12)
    assert pace.text(42) == "12.0/min, ETA 2m30s"
    pace.add(120.0, 24)
    assert pace.text(24 + 12 * 90) == "12.0/min, ETA 1h30m"


def test_a_member_whose_inputs_do_not_settle_is_idle() -> None:
    pace = Pace()
    pace.add(0.0, 5)
    pace.add(10.0, 5)
    assert pace.text(10) == "idle"
    assert pace.text(5) == ""  # done: nothing to wait for
