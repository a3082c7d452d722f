"""A1111's "Token merging ratio high-res" (`token_merging_ratio_hr`): ToMe in the hires pass only, the model's own
ToMe put back after it (also on failure), the infotext's `Token merging ratio hr`, and bad ratios refused early."""

import pytest

from pipelines.approx.labels import OptimizationLabels, model_labels
from pipelines.approx.tome_switch import set_token_merging
from pipelines.approx.tome_unet import token_merging_state
from pipelines.hires import HiresFix, _FirstPass, _SecondPass
from pipelines.infotext import parse_infotext

from .unet_spy import fail_if_called

BASE = dict(prompt="a castle", seed=21, width=32, height=32, steps=2, sampler="Euler", hr_scale=2.0,
            hr_upscaler="Latent", hr_second_pass_steps=2, denoising_strength=0.6)


@pytest.fixture(scope="module")
def hires(sd1_pipe):
    return HiresFix(sd1_pipe)


def ratio_during_passes(monkeypatch, unet) -> list:
    """(pass, ToMe ratio on the UNet while that pass runs) for every pass called."""
    seen = []
    for cls, name in ((_FirstPass, "first"), (_SecondPass, "second")):
        original = cls.__call__

        def spy(self, params, _original=original, _name=name, **kwargs):
            state = token_merging_state(unet)
            seen.append((_name, None if state is None else state.settings.ratio))
            return _original(self, params, **kwargs)

        monkeypatch.setattr(cls, "__call__", spy)
    return seen


def test_the_hires_pass_runs_with_the_ratio_and_the_first_pass_without(hires, monkeypatch):
    seen = ratio_during_passes(monkeypatch, hires.model.unet)
    plain = hires(**BASE)
    merged = hires(**BASE, token_merging_ratio_hr=0.5)
    assert seen == [("first", None), ("second", None), ("first", None), ("second", 0.5)]
    # the model is left as it was: no ToMe installed, no ToMe label
    assert token_merging_state(hires.model.unet) is None and model_labels(hires.model) == OptimizationLabels()
    assert plain.images[0].tobytes() != merged.images[0].tobytes()
    written = parse_infotext(merged.infotexts[0], defaults=False)
    assert written["Token merging ratio hr"] == "0.5" and "Token merging ratio" not in written
    assert "Token merging ratio hr" not in plain.infotexts[0]
    # the merged hires pass left nothing behind: the next call without it makes the same image again
    assert hires(**BASE).images[0].tobytes() == plain.images[0].tobytes()


def test_a_model_running_tome_gets_its_own_ratio_back_and_0_means_the_first_passs(hires, monkeypatch):
    seen = ratio_during_passes(monkeypatch, hires.model.unet)
    set_token_merging(hires, 0.25)
    try:
        own = hires(**BASE)
        other = hires(**BASE, token_merging_ratio_hr=0.5)
        assert seen == [("first", 0.25), ("second", 0.25), ("first", 0.25), ("second", 0.5)]
        assert token_merging_state(hires.model.unet).settings.ratio == 0.25
        assert model_labels(hires.model).tome == 0.25
        # A1111's get_token_merging_ratio(for_hr=True) falls back to the first pass's ratio, and writes it
        assert parse_infotext(own.infotexts[0], defaults=False)["Token merging ratio hr"] == "0.25"
        written = parse_infotext(other.infotexts[0], defaults=False)
        assert (written["Token merging ratio"], written["Token merging ratio hr"]) == ("0.25", "0.5")
    finally:
        set_token_merging(hires, 0)


def test_a_failing_hires_pass_leaves_the_model_unpatched(hires, monkeypatch):
    def fail(self, params, **kwargs):
        assert token_merging_state(hires.model.unet).settings.ratio == 0.5
        raise RuntimeError("out of memory")

    monkeypatch.setattr(_SecondPass, "__call__", fail)
    with pytest.raises(RuntimeError, match="out of memory"):
        hires(**BASE, token_merging_ratio_hr=0.5)
    assert token_merging_state(hires.model.unet) is None and model_labels(hires.model) == OptimizationLabels()


@pytest.mark.parametrize("ratio, message", [
    (0.8, r"token_merging_ratio_hr .*: ToMe ratio must be a number in \[0, 0.75\].*got 0.8"),
    (-0.1, r"ToMe ratio must be a number in \[0, 0.75\]"),
    ("0.5", r"ToMe ratio must be a number"),
    (True, r"ToMe ratio must be a number"),
])
def test_bad_ratios_are_refused_before_any_pass(hires, monkeypatch, ratio, message):
    fail_if_called(monkeypatch, hires.model.unet)
    with pytest.raises(ValueError, match=message):
        hires(**BASE, token_merging_ratio_hr=ratio)
