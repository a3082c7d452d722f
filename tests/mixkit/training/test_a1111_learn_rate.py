"""A1111's stepped learning rate: the same rate at every step as its LearnScheduleIterator, and its end."""

from __future__ import annotations

import pytest

from mixkit.training.a1111_learn_rate import RatePhase, parse_learn_rate, rate_at, schedule_end


def test_pairs_become_phases():
    assert parse_learn_rate("5e-5:100, 5e-6:1500") == [RatePhase(5e-5, 100), RatePhase(5e-6, 1500)]
    assert parse_learn_rate("0.001") == [RatePhase(0.001, None)]
    assert parse_learn_rate("1e-3:10, 1e-4:-1") == [RatePhase(1e-3, 10), RatePhase(1e-4, None)]


def test_each_step_has_the_rate_of_the_first_phase_not_yet_ended():
    phases = parse_learn_rate("5e-5:100, 5e-6:1500")
    assert [rate_at(phases, step) for step in (0, 99, 100, 1499)] == [5e-5, 5e-5, 5e-6, 5e-6]
    assert rate_at(phases, 1500) is None and schedule_end(phases) == 1500  # A1111 stops there


def test_a_last_rate_without_a_step_runs_to_the_end():
    phases = parse_learn_rate("1e-3:10, 1e-4")
    assert rate_at(phases, 9) == 1e-3 and rate_at(phases, 10_000_000) == 1e-4 and schedule_end(phases) is None


@pytest.mark.parametrize("text, message", [
    ("", "A1111's learn rate text"),
    ("fast", "'fast' is not 'rate' or 'rate:step'"),
    ("1e-3:ten", "'1e-3:ten' is not"),
    ("1e-3:1.5", "'1e-3:1.5' is not"),
    ("0:100", "must be a positive number"),
    ("nan:100", "must be a positive number"),
    ("1e-3:0", "must be positive (or -1: to the end)"),
    ("1e-3:100, 1e-4:50", "steps must increase"),
    ("1e-3, 1e-4:50", "pairs after it would never apply"),
])
def test_bad_text_is_refused_naming_the_pair(text, message):
    with pytest.raises(ValueError) as error:
        parse_learn_rate(text)
    assert message in str(error.value)
