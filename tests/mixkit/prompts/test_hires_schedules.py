"""Hires-fix prompt schedules: A1111 v1.10's offsets in `get_learned_conditioning_prompt_schedules(prompts,
base_steps, hires_steps, use_old_scheduling)` (its `calculate_hr_conds` passes the first pass's and the hires
pass's total steps): integers lose the base steps, fractions lose 1.0, in the hires pass."""

import random

import pytest

from mixkit.prompts import build_conditioning_plan, get_learned_conditioning_prompt_schedules
from tests.mixkit.prompts.a1111_prompt_reference import a1111_schedules


def hires(prompt, base, hires_steps):
    return get_learned_conditioning_prompt_schedules([prompt], base, hires_steps)[0]


def test_a1111_doctests():
    # prompt_parser.py docstring: g = lambda p: get_learned_conditioning_prompt_schedules([p], 10, 10)[0]
    assert hires("a [b:.5] c", 10, 10) == [[10, "a b c"]]
    assert hires("a [b:1.5] c", 10, 10) == [[5, "a  c"], [10, "a b c"]]


@pytest.mark.parametrize("prompt, expected", [
    ("a [red:blue:0.5] circle", [[10, "a blue circle"]]),  # switched during the first pass: blue throughout
    ("a [red:blue:10] circle", [[10, "a blue circle"]]),  # step 10 of 20 lies in the first pass
    ("a [red:blue:1.5] circle", [[5, "a red circle"], [10, "a blue circle"]]),  # hires-only edit, half-way
    ("a [red:blue:25] circle", [[5, "a red circle"], [10, "a blue circle"]]),  # base 20 + 5
    ("a [red:blue:1.0] circle", [[10, "a blue circle"]]),
    ("a [red:blue:99] circle", [[10, "a red circle"]]),
])
def test_the_hunt_table_base_20_hires_10(prompt, expected):
    assert hires(prompt, 20, 10) == expected
    assert a1111_schedules([prompt], 20, 10)[0] == expected


def test_old_scheduling_has_no_offsets():
    # use_old_scheduling: below 1 a fraction, else a step number; hires steps count but no offsets
    assert get_learned_conditioning_prompt_schedules(["[a:b:0.5]", "[a:b:3]", "[a:b:1.5]"], 10, 4, True) == \
        a1111_schedules(["[a:b:0.5]", "[a:b:3]", "[a:b:1.5]"], 10, 4, True) == \
        [[[5, "a"], [10, "b"]], [[3, "a"], [10, "b"]], [[1, "a"], [10, "b"]]]


def _random_prompt(rng: random.Random, depth: int = 0) -> str:
    words = ["cat", "dog", "(red:1.2)", "[blue]", " ", "a, b", "\\[x\\]"]
    numbers = ["0", "1", "3", "7", "12", "20", "25", "-2", "0.5", ".25", "1.0", "1.5", "1.75", "2.5", "0.99", "1e1"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.35 and depth < 2:
            before = _random_prompt(rng, depth + 1) if rng.random() < 0.8 else ""
            after = _random_prompt(rng, depth + 1)
            head = f"{before}:" if before or rng.random() < 0.5 else ""
            parts.append(f"[{head}{after}:{rng.choice(numbers)}]")
        elif kind < 0.45 and depth < 2:
            parts.append("[" + "|".join(_random_prompt(rng, depth + 1) for _ in range(rng.randint(2, 3))) + "]")
        else:
            parts.append(rng.choice(words))
    return "".join(parts)


@pytest.mark.parametrize("base, hires_steps", [(1, 1), (3, 5), (10, 10), (20, 10), (20, 7), (40, 20), (6, 40)])
def test_many_prompts_match_the_a1111_restatement(base, hires_steps):
    rng = random.Random(base * 1000 + hires_steps)
    prompts = [_random_prompt(rng) for _ in range(150)]
    for old in (False, True):
        assert get_learned_conditioning_prompt_schedules(prompts, base, hires_steps, old) == \
            a1111_schedules(prompts, base, hires_steps, old)
    assert get_learned_conditioning_prompt_schedules(prompts, base) == a1111_schedules(prompts, base)


@pytest.mark.parametrize("args, error, message", [
    ((["a"], 10, 0), ValueError, "hires_steps must be an int >= 1"),
    ((["a"], 0, 5), ValueError, "base_steps must be an int >= 1"),
    ((["a"], 10, 5, "yes"), TypeError, "use_old_scheduling"),
])
def test_bad_arguments_are_named(args, error, message):
    with pytest.raises(error, match=message):
        get_learned_conditioning_prompt_schedules(*args)


def test_a_conditioning_plan_for_a_hires_pass(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["a [red:blue:1.5] circle", "a [red:blue:0.5] circle"],
                                   ["[ugly:bad:6]", ""], 4, first_pass_steps=4)
    # step s (0-based) uses the first entry whose end >= s; "1.5" -> (1.5 - 1) * 4 = 2, "6" -> 6 - 4 = 2
    assert [plan.texts_at(s)[:3] for s in (0, 2, 3)] == [
        ("a red circle", "a blue circle", "ugly"),
        ("a red circle", "a blue circle", "ugly"),
        ("a blue circle", "a blue circle", "bad"),
    ]
    first = build_conditioning_plan(sd1_encoder, ["a [red:blue:1.5] circle"], [""], 4)
    assert {first.texts_at(s)[0] for s in range(5)} == {"a red circle"}  # "1.5" never switches in a first pass
