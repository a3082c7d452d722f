"""The hires-fix second pass schedules prompts as A1111 v1.10's `calculate_hr_conds`:
`get_learned_conditioning_prompt_schedules(prompts, firstpass_steps, hires total_steps)`, i.e. integers lose the
first pass's steps and fractions lose 1.0 (the report's table: base 20, hires 10)."""

import pytest

import pipelines.base
from pipelines.hires import HiresFix


@pytest.mark.parametrize("prompt, first_pass, hires_pass", [
    ("a [red:blue:0.5] circle", ["red"] * 3 + ["blue"] * 2, ["blue"] * 5),
    ("a [red:blue:1.5] circle", ["red"] * 5, ["red"] * 3 + ["blue"] * 2),
    ("a [red:blue:6] circle", ["red"] * 5, ["red"] * 3 + ["blue"] * 2),  # 6 - 4 first-pass steps = step 2
    ("a [red:blue:3] circle", ["red"] * 4 + ["blue"], ["blue"] * 5),
])
def test_the_second_pass_continues_the_schedule(sd1_pipe, monkeypatch, prompt, first_pass, hires_pass):
    plans = []
    original = pipelines.base.run_sampler
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: plans.append(request.plan) or original(request))
    HiresFix(sd1_pipe)(prompt=prompt, steps=4, width=64, height=64, hr_scale=2, hr_second_pass_steps=4,
                       denoising_strength=0.99, seed=1, sampler="Euler")
    first, second = plans
    assert [first.texts_at(step)[0] for step in range(5)] == [f"a {word} circle" for word in first_pass]
    assert [second.texts_at(step)[0] for step in range(5)] == [f"a {word} circle" for word in hires_pass]


def test_hires_prompts_run_in_the_second_pass_and_are_recorded(sd1_pipe, monkeypatch):
    # A1111 1.10: hr_prompt "" is the prompt; the hires conds come from hr_prompts with the hires offsets; the
    # infotext gets "Hires prompt" / "Hires negative prompt" when they differ from the image's prompts.
    plans = []
    original = pipelines.base.run_sampler
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: plans.append(request.plan) or original(request))
    result = HiresFix(sd1_pipe)(prompt="a red circle", negative_prompt="ugly", hr_prompt="a [red:blue:1.5] square",
                                hr_negative_prompt="blurry", steps=4, width=64, height=64, hr_scale=2,
                                hr_second_pass_steps=4, denoising_strength=0.5, seed=1, sampler="Euler")
    first, second = plans
    assert first.texts_at(0) == ("a red circle", "ugly")
    assert [second.texts_at(step) for step in (0, 3)] == [("a red square", "blurry"), ("a blue square", "blurry")]
    assert 'Hires prompt: "a [red:blue:1.5] square"' in result.infotexts[0] or \
        "Hires prompt: a [red:blue:1.5] square" in result.infotexts[0]
    assert "Hires negative prompt: blurry" in result.infotexts[0]
    same = HiresFix(sd1_pipe)(prompt="a", hr_prompt="a", steps=1, width=64, height=64, hr_scale=1,
                              denoising_strength=0.5, seed=1, sampler="Euler")
    assert "Hires prompt" not in same.infotexts[0]


def test_a_hires_prompt_must_be_a_string(sd1_pipe):
    with pytest.raises(TypeError, match="hr_prompt must be a string"):
        HiresFix(sd1_pipe)(prompt="a", hr_prompt=["a"], steps=1, width=64, height=64)
