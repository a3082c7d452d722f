"""A1111's Settings > Compatibility "Use old prompt editing timelines" (`use_old_scheduling`) in txt2img and hires fix.

A1111 1.10's rules (`get_learned_conditioning_prompt_schedules(prompts, base_steps, hires_steps, use_old_scheduling)`,
called by `setup_conds` with the first pass's total steps and by `calculate_hr_conds` with (first pass, hires) steps):
  new (default): N with a "." is a fraction of the steps, else a step number; in the hires pass the steps are the
                 hires steps, a fraction loses 1.0 and a step number loses the first pass's steps.
  old:           N < 1 is a fraction of the steps, N >= 1 a step number (int(N)); in the hires pass too the steps are
                 the *first pass's* and nothing is subtracted.
The step a text ends at is min(steps, int(value)); the sampler shows `before` on 0-based steps 0..end.
`get_conds_with_caching` writes "Old prompt editing timelines: True" only when the option is on and the old and new
schedules of the pass's prompts differ.
"""

import pytest

import pipelines.base
from pipelines.hires import HiresFix

KEY = "Old prompt editing timelines: True"


def _record_plans(monkeypatch) -> list:
    plans = []
    original = pipelines.base.run_sampler
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: plans.append(request.plan) or original(request))
    return plans


def _words(plan, steps: int) -> list[str]:
    return [plan.texts_at(step)[0].split()[1] for step in range(steps + 1)]


@pytest.mark.parametrize("when, new, old", [
    # 4 steps. "1.0": new reads a fraction (4 * 1.0 = step 4: never switches); old reads step 1.
    ("1.0", ["red"] * 5, ["red"] * 2 + ["blue"] * 3),
    # "0.5": both read a fraction, 4 * 0.5 = step 2
    ("0.5", ["red"] * 3 + ["blue"] * 2, ["red"] * 3 + ["blue"] * 2),
    # "2": both read step 2
    ("2", ["red"] * 3 + ["blue"] * 2, ["red"] * 3 + ["blue"] * 2),
    # "2.5": new reads a fraction (4 * 2.5 = 10, capped at step 4); old reads step int(2.5) = 2
    ("2.5", ["red"] * 5, ["red"] * 3 + ["blue"] * 2),
])
def test_txt2img_switch_steps(sd1_pipe, monkeypatch, when, new, old):
    plans = _record_plans(monkeypatch)
    results = [sd1_pipe(prompt=f"a [red:blue:{when}] circle", steps=4, width=64, height=64, seed=1,
                                     sampler="Euler", use_old_scheduling=flag) for flag in (False, True)]
    assert [_words(plan, 4) for plan in plans] == [new, old]
    assert KEY not in results[0].infotexts[0]
    # written only when the option changed the schedule
    assert (KEY in results[1].infotexts[0]) == (new != old)


@pytest.mark.parametrize("when, new, old", [
    # hires pass: first pass 4 steps, hires 6. new: (0.5 - 1) * 6 < 1, "b" throughout; old: 0.5 * 4 (the first
    # pass's steps) = step 2, then the hires steps past 4 keep the last text
    ("0.5", ["blue"] * 7, ["red"] * 3 + ["blue"] * 4),
    # new: (1.5 - 1) * 6 = step 3; old: step int(1.5) = 1
    ("1.5", ["red"] * 4 + ["blue"] * 3, ["red"] * 2 + ["blue"] * 5),
    # new: 6 - 4 = step 2; old: step 6 capped at the first pass's 4 steps, so the schedule ends in "red" and the
    # hires steps past 4 keep it: it never switches
    ("6", ["red"] * 3 + ["blue"] * 4, ["red"] * 7),
])
def test_hires_pass_switch_steps(sd1_pipe, monkeypatch, when, new, old):
    plans = _record_plans(monkeypatch)
    for flag in (False, True):
        result = HiresFix(sd1_pipe)(prompt=f"a [red:blue:{when}] circle", steps=4, width=64, height=64, hr_scale=2,
                                    hr_second_pass_steps=6, denoising_strength=0.99, seed=1, sampler="Euler",
                                    use_old_scheduling=flag)
        assert (KEY in result.infotexts[0]) == flag
    assert [_words(plan, 6) for plan in plans[1::2]] == [new, old]


def test_hires_key_is_written_whenever_the_old_counting_differs(sd1_pipe):
    # No prompt editing at all: the old timelines count the hires pass in the first pass's 4 steps, the new ones in
    # its own; A1111 compares the schedules ([[4, text]] vs [[6, text]]), so the key is written with 6 hires steps
    # and not with 4.
    def infotext(hires_steps: int) -> str:
        return HiresFix(sd1_pipe)(prompt="a circle", steps=4, width=64, height=64, hr_scale=2,
                                  hr_second_pass_steps=hires_steps, denoising_strength=0.5, seed=1, sampler="Euler",
                                  use_old_scheduling=True).infotexts[0]

    assert KEY in infotext(6)
    assert KEY not in infotext(4)


def test_use_old_scheduling_must_be_a_bool(sd1_pipe):
    with pytest.raises(TypeError, match="use_old_scheduling must be True or False"):
        sd1_pipe(prompt="a", steps=1, width=64, height=64, use_old_scheduling="yes")
