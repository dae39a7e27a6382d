"""The bench code's one stop mechanism: stop_point, and StepTally that reports a loop's steps in
batches and passes a stop point after each batch."""

import pytest

from kit.bench.context import StepTally, stop_point


def test_stop_point_raises_only_when_a_stop_was_requested():
    stop_point(lambda: False)
    with pytest.raises(KeyboardInterrupt, match="stop requested"):
        stop_point(lambda: True)


def test_the_tally_reports_every_n_steps_and_the_rest_on_flush():
    reported: list[int] = []
    tally = StepTally(reported.append, lambda: False, every=4)
    for _ in range(10):
        tally.step()
    assert reported == [4, 4]
    tally.flush()
    tally.flush()  # nothing left: nothing reported
    assert reported == [4, 4, 2]


def test_the_tally_hears_a_stop_request_at_its_next_report_after_reporting_the_steps_done():
    reported: list[int] = []
    asked: list[int] = []
    stop = {"now": False}

    def should_stop() -> bool:
        asked.append(sum(reported))
        return stop["now"]

    tally = StepTally(reported.append, should_stop, every=3)
    for _ in range(3):
        tally.step()
    stop["now"] = True
    tally.step()
    tally.step()  # not asked between reports
    with pytest.raises(KeyboardInterrupt):
        tally.step()
    assert reported == [3, 3]  # the steps done are reported before the stop
    assert asked == [3, 6]
