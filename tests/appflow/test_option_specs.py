"""Option specs: each task's declared option types and bounds, as `describe_app` hands them to forms, are the ones its
checks enforce."""

from __future__ import annotations

import math

import pytest

from appflow.apps import check_app_option_values, describe_app
from appflow.option_specs import OptionSpec
from appflow.task import TASKS


@pytest.mark.parametrize("spec, good, bad, fragment", [
    (OptionSpec("int", 1, 64), [1, 64], [0, 65, 2.0, True, "3"], "an integer in [1, 64]"),
    (OptionSpec("float", 0, 120, low_open=True), [0.02, 120], [0, -1, 120.5, math.nan, math.inf], "in (0, 120]"),
    (OptionSpec("float", 0, 1, auto=True), [None, 0, 1], [1.01, "0.5", 10 ** 400], "in [0, 1]"),
    (OptionSpec("float"), [0, -2.5, 10 ** 300], [10 ** 400, -10 ** 400, math.nan], "must be a number"),
    (OptionSpec("bool"), [True, False], [1, None], "true or false"),
    (OptionSpec("choice", choices=("a", "b")), ["a", "b"], ["c", None], "one of 'a', 'b'"),
    (OptionSpec("text"), ["", "x"], [None, 3], "a string"),
])
def test_a_spec_takes_its_range_and_refuses_the_rest_naming_it(spec, good, bad, fragment):
    for value in good:
        assert spec.check("opt", value) is value
    for value in bad:
        with pytest.raises(ValueError, match="opt must be") as error:
            spec.check("opt", value)
        assert fragment in str(error.value)


def test_an_unknown_kind_and_a_spec_for_no_option_are_refused():
    from appflow.task import Task, register_task

    with pytest.raises(ValueError, match="kind must be one of"):
        OptionSpec("number")

    class Stray(Task):
        name = "stray_spec_task"
        outputs = {"text": "text"}
        main_output = "text"
        options = {"a": 1}
        option_specs = {"b": OptionSpec("int")}

    with pytest.raises(ValueError, match=r"option_specs \['b'\] are not options"):
        register_task(Stray)


def test_the_video_apps_specs_are_its_checks_bounds():
    from mixkit.io.video import MAX_FPS
    from pipelines.text_to_video import MAX_FRAMES, MAX_SIDE

    specs = describe_app("text_to_video_generation")["option_specs"]
    assert specs["num_frames"] | {"choices": []} == {"kind": "int", "low": 1, "high": MAX_FRAMES, "step": 1,
                                                      "choices": [], "auto": False, "low_open": False,
                                                      "label": "Frames"}
    assert (specs["fps"]["low"], specs["fps"]["high"], specs["fps"]["low_open"]) == (0, MAX_FPS, True)
    assert specs["width"]["auto"] and specs["width"]["high"] == MAX_SIDE
    assert "generator" not in specs  # a torch.Generator has no form widget
    check_app_option_values("text_to_video_generation", {"num_frames": MAX_FRAMES})
    with pytest.raises(ValueError, match=f"num_frames must be an integer in \\[1, {MAX_FRAMES}\\]"):
        check_app_option_values("text_to_video_generation", {"num_frames": MAX_FRAMES + 1})


def test_the_sd_apps_specs_cover_the_txt2img_options_with_generation_limits():
    from pipelines.params import CLIP_SKIP_MAX, SEED_MAX, GenerationLimits

    limits = GenerationLimits()
    description = describe_app("text2image_generation")
    specs = description["option_specs"]
    assert list(specs) == [name for name in description["options"] if name != "loras"]  # in option order
    assert (specs["steps"]["high"], specs["steps"]["auto"]) == (limits.max_steps, True)
    assert specs["clip_skip"]["high"] == CLIP_SKIP_MAX
    assert (specs["seed"]["kind"], specs["seed"]["low"], specs["seed"]["high"]) == ("seed", -1, SEED_MAX)
    assert specs["batch_size"]["high"] == limits.max_batch_size and "DPM++ 2M" in specs["sampler"]["choices"]
    assert "Karras" in specs["schedule_type"]["choices"]


def test_inpainting_options_are_checked_by_their_specs():
    specs = describe_app("mask_guided_inpainting")["option_specs"]
    assert specs["mask_blur"]["high"] == 64 and specs["inpainting_fill"]["choices"] == [
        "original", "fill", "latent noise", "latent nothing"]
    with pytest.raises(ValueError, match=r"step 'inpaint': mask_blur must be an integer in \[0, 64\], got 65"):
        check_app_option_values("mask_guided_inpainting", {"mask_blur": 65})
    with pytest.raises(ValueError, match=r"denoising_strength must be a number in \[0, 1\]"):
        check_app_option_values("mask_guided_inpainting", {"denoising_strength": 1.5})


def test_the_audio_apps_length_is_auto_and_open_at_zero():
    from pipelines.text_to_audio import MAX_AUDIO_SECONDS

    spec = describe_app("music_generation")["option_specs"]["audio_length_in_s"]
    assert (spec["low"], spec["high"], spec["auto"], spec["low_open"]) == (0, MAX_AUDIO_SECONDS, True, True)
    check_app_option_values("music_generation", {"audio_length_in_s": 0.02})
    with pytest.raises(ValueError, match="audio_length_in_s"):
        check_app_option_values("music_generation", {"audio_length_in_s": 0})


def test_an_option_the_app_does_not_have_is_refused_naming_its_options():
    with pytest.raises(TypeError, match=r"has no option\(s\) \['num_frames'\]; its options are"):
        check_app_option_values("music_generation", {"num_frames": 2})


def test_every_registered_tasks_specs_name_its_options_and_fit_its_defaults():
    for name in TASKS.names():
        task = TASKS.get(name)
        for option, spec in task.option_specs.items():
            default = task.options[option]
            if spec.kind == "choice" and default is not None and spec.choices:
                assert default in spec.choice_values(), (name, option)
            elif default is not None or not spec.auto:
                spec.check(option, default)


@pytest.mark.parametrize("app, options, fragment", [
    ("image2text_generation", {"num_beams": 65}, r"num_beams must be an integer in \[1, 64\]"),
    ("image2text_generation", {"top_p": 10 ** 400}, r"top_p must be None or a number in \(0, 1\]"),
    ("image2image_text_guided_upscaling", {"cfg_scale": 10 ** 400}, r"cfg_scale must be a number in \["),
    ("image2text_generation", {"top_p": 0}, r"top_p must be None or a number in \(0, 1\]"),
    ("image2image_text_guided_upscaling", {"tile_size": 4}, r"tile_size must be an integer >= 8"),
    ("qrcode_art", {"guidance_end": 1.5}, r"guidance_end must be a number in \[0.0, 1.0\]"),
    ("openset_det_sam", {"box_threshold": 2}, r"box_threshold must be a number in \[0, 1\]"),
    ("dialog_image_editing", {"dilate": 300}, r"dilate \(pixels\) must be an integer in \[0, 256\]"),
])
def test_other_apps_checks_refuse_outside_their_declared_bounds(app, options, fragment):
    (name, value), = options.items()
    spec = describe_app(app)["option_specs"][name]
    assert spec["kind"] in ("int", "float")
    with pytest.raises(ValueError, match=fragment):
        check_app_option_values(app, options)


def test_app_option_values_are_checked_under_every_spelling_a_run_takes():
    """A request's options arrive as given (diffusers' names, PaddleMIX's `generate_kwargs` dict); the check before
    queueing reads them as the run does, so a bad value under another spelling is refused too."""
    with pytest.raises(ValueError, match=r"step 'inpaint': denoising_strength must be a number in \[0, 1\]"):
        check_app_option_values("mask_guided_inpainting", {"strength": 1.5})
    with pytest.raises(ValueError, match="step 'caption'.*top_k must be None or an integer"):
        check_app_option_values("image2text_generation", {"generate_kwargs": {"top_k": "x"}})
    with pytest.raises(TypeError, match="both in generate_kwargs and as keywords"):
        check_app_option_values("image2text_generation", {"top_k": 2, "generate_kwargs": {"top_k": 3}})
    check_app_option_values("image2text_generation", {"generate_kwargs": {"max_length": 8}, "num_beams": 2})
