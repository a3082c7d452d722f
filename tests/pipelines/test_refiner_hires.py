"""A refiner with hires fix: A1111's `hires_fix_refiner_pass` picks the pass(es) the refiner finishes ("second
pass", its default, "first pass" or "both passes"), each switching at `refiner_switch_at` of its own schedule, and
the image's one infotext names the refiner (plus "Hires refiner" when the option is not its default)."""

from __future__ import annotations

import pytest
import torch

from pipelines.control import GenerationControl
from .unet_spy import recorded_calls, replaced_forward, run_base_and_refiner

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler")


def test_the_refiner_finishes_the_hires_pass_only(tiny_sdxl_dir, refiner_model):
    from pipelines.hires import HiresFix
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    hires = HiresFix(TextToImage.from_pretrained(tiny_sdxl_dir))
    result, log = run_base_and_refiner(hires, refiner_model, **SMALL, steps=4, hr_scale=1.5,
                                       denoising_strength=0.5, refiner_switch_at=0.8)
    # first pass, A1111's Euler 4 steps (t = 999, 666, 333, 0; 0 reaches 0.8 but the first pass is not refined);
    # hires pass: exactly 4 steps of an 8-step schedule, t = 428.1, 285.4, 142.7, 0 -> the refiner from 142.7
    assert [name for name, *_ in log] == ["base"] * 4 + ["base"] * 2 + ["refiner"] * 2
    assert [round(t, 1) for _, t, *_ in log[4:]] == [428.1, 285.4, 142.7, 0.0]
    values = parse_infotext(result.infotexts[0])
    assert values["Refiner"] == f"{refiner_model.name} [{refiner_model.model_hash}]"
    assert values["Refiner switch at"] == "0.8" and values["Hires upscale"] == "1.5"
    assert "Hires refiner" not in values  # A1111 writes it only for a non-default hires_fix_refiner_pass


@pytest.fixture(scope="module")
def hires(tiny_sdxl_dir):
    from pipelines.hires import HiresFix
    from pipelines.txt2img import TextToImage

    return HiresFix(TextToImage.from_pretrained(tiny_sdxl_dir))


HIRES = dict(**SMALL, steps=4, hr_scale=1.5,
                                       denoising_strength=0.5, refiner_switch_at=0.8)


def _calls(hires, refiner_model, **values):
    result, log = run_base_and_refiner(hires, refiner_model, **{**HIRES, **values})
    return result, [name for name, *_ in log]


@pytest.mark.parametrize("refiner_pass, first, second", [
    # first pass: t = 999, 666, 333, 0, the refiner from 0 ((999 - 0) / 1000 >= 0.8); hires pass: t = 428.1, 285.4,
    # 142.7, 0, the refiner from 142.7; A1111 reloads the base model between the passes (`hr_checkpoint_info`)
    ("first pass", ["base"] * 3 + ["refiner"], ["base"] * 4),
    ("both passes", ["base"] * 3 + ["refiner"], ["base"] * 2 + ["refiner"] * 2),
    ("second pass", ["base"] * 4, ["base"] * 2 + ["refiner"] * 2),
])
def test_hires_fix_refiner_pass_picks_the_passes_the_refiner_finishes(hires, refiner_model, refiner_pass, first,
                                                                        second):
    from pipelines.infotext import parse_infotext

    result, names = _calls(hires, refiner_model, hires_fix_refiner_pass=refiner_pass)
    assert names == first + second
    values = parse_infotext(result.infotexts[0])
    assert values["Refiner"] == f"{refiner_model.name} [{refiner_model.model_hash}]"
    assert values["Refiner switch at"] == "0.8"
    # A1111's apply_refiner writes the option only away from its default
    assert values.get("Hires refiner") == (None if refiner_pass == "second pass" else refiner_pass)


def test_a_first_pass_the_switch_never_reaches_writes_no_refiner_keys(hires, refiner_model):
    from pipelines.infotext import parse_infotext

    # the first pass's last call is t = 0 (ratio 0.999); the hires pass ends at 0 too: 0.9995 is reached by neither
    result, names = _calls(hires, refiner_model, hires_fix_refiner_pass="first pass", refiner_switch_at=0.9995)
    assert names == ["base"] * 8
    values = parse_infotext(result.infotexts[0])
    assert not {"Refiner", "Refiner switch at", "Hires refiner"} & set(values)
    plain = hires(**HIRES)
    assert result.images[0].tobytes() == plain.images[0].tobytes()


def test_the_refined_first_pass_is_txt2img_with_the_refiner(hires, refiner_model):
    """Interrupted after its first pass, a "first pass" hires call returns that pass's image: exactly what txt2img with
    the same refiner, seed and switch makes (same sigmas, same noise), with its infotext (no hires keys)."""
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    control = GenerationControl()

    def stop_after_the_first_pass(progress):
        if progress.pass_index == 0 and progress.step == HIRES["steps"]:
            control.interrupt()

    result = hires(**HIRES, refiner=refiner_model, hires_fix_refiner_pass="first pass",
                   callback=stop_after_the_first_pass, control=control)
    assert result.interrupted and result.images[0].size == (64, 64)
    txt2img = TextToImage.from_pipeline(hires.pipe)(**SMALL, steps=4, refiner=refiner_model, refiner_switch_at=0.8)
    assert result.images[0].tobytes() == txt2img.images[0].tobytes()
    values = parse_infotext(result.infotexts[0])
    assert values["Refiner"] == parse_infotext(txt2img.infotexts[0])["Refiner"]
    assert "Hires refiner" not in values and "Hires upscale" not in values


def test_the_hires_pass_starts_from_the_refined_first_pass(hires, refiner_model):
    """The hires pass's first call sees the same latents with "first pass" and "both passes" (both refine the first
    pass alike) and other ones with "second pass" (an unrefined first pass); the images then differ as the hires
    pass is the base model's alone or not."""
    def first_hires_input(refiner_pass):
        inputs = []
        original = hires.model.unet.forward

        def spy(sample, *args, **kwargs):
            inputs.append(sample.detach().clone())
            return original(sample, *args, **kwargs)

        with replaced_forward(hires.model.unet, spy):
            result = hires(**HIRES, refiner=refiner_model, hires_fix_refiner_pass=refiner_pass)
        hires_inputs = [sample for sample in inputs if sample.shape[-1] == 96 // 8]  # 64 px x 1.5
        return hires_inputs[0], result.images[0].tobytes()

    first_start, first_image = first_hires_input("first pass")
    both_start, both_image = first_hires_input("both passes")
    second_start, second_image = first_hires_input("second pass")
    assert torch.equal(first_start, both_start)
    assert not torch.equal(first_start, second_start)
    assert len({first_image, both_image, second_image}) == 3


@pytest.mark.parametrize("value", ["second", "Both passes", None, 1])
def test_an_unknown_hires_fix_refiner_pass_is_refused_before_sampling(hires, refiner_model, value):
    log = []
    with recorded_calls(hires.model.unet, "base", log), pytest.raises(
            ValueError, match=r"hires_fix_refiner_pass must be one of 'first pass', 'second pass', 'both passes'"):
        hires(**HIRES, refiner=refiner_model, hires_fix_refiner_pass=value)
    assert log == []
