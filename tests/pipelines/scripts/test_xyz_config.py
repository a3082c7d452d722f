"""X/Y/Z plot's script_args: A1111's slots read into a checked config (pipelines/scripts/xyz_config.py)."""

import pytest

from pipelines.scripts.xyz_axes import axes_for
from pipelines.scripts.xyz_config import ARG_NAMES, MAX_CELLS, parse_script_args, script_args_info, xyz_config


def test_a1111_indexes_mean_a1111_axes():
    txt2img = [axis.label for axis in axes_for("txt2img")]
    img2img = [axis.label for axis in axes_for("img2img")]
    assert txt2img[:12] == ["Nothing", "Seed", "Var. seed", "Var. strength", "Steps", "Hires steps", "CFG Scale",
                            "Prompt S/R", "Prompt order", "Sampler", "Hires sampler", "Checkpoint name"]
    assert img2img[:11] == ["Nothing", "Seed", "Var. seed", "Var. strength", "Steps", "CFG Scale", "Image CFG Scale",
                            "Prompt S/R", "Prompt order", "Sampler", "Checkpoint name"]
    config = parse_script_args([4, "10,20", [], 6, "5-7 (+1)", []], "txt2img")
    assert (config.x.label, config.x.values) == ("Steps", (10, 20))
    assert (config.y.label, config.y.values) == ("CFG Scale", (5.0, 6.0, 7.0))
    assert config.z.is_nothing and config.cell_count == 6


def test_defaults_fill_left_out_slots_and_labels_work_in_any_case():
    config = parse_script_args(["steps", "1-3"])
    assert config.x.values == (1, 2, 3) and config.y.is_nothing and config.draw_legend is True
    assert config.margin_size == 0 and not config.include_lone_images


def test_dropdown_axis_reads_the_dropdown_unless_csv_mode():
    config = parse_script_args(["Sampler", "", ["Euler a", "DPM++ 2M"]])
    assert config.x.values == ("Euler a", "DPM++ 2M")
    assert config.x.text == "Euler a,DPM++ 2M"
    config = parse_script_args(["Sampler", "Euler", ["Euler a"], *[None] * 6, True, False, False, False, False,
                                False, False, 0, True])
    assert config.x.values == ("Euler",)


def test_prompt_order_makes_permutations():
    config = parse_script_args(["Prompt order", "cat, dog"])
    assert config.x.values == (("cat", "dog"), ("dog", "cat"))
    assert config.x.labels() == ["cat, dog", "dog, cat"]


def test_labels_follow_a1111_formats():
    config = xyz_config(("Steps", "10"), ("Sampler", "Euler a"), ("Prompt S/R", "cat,dog"))
    assert config.x.labels() == ["Steps: 10"]
    assert config.y.labels() == ["Euler a"]
    assert config.z.labels() == ["cat", "dog"]


@pytest.mark.parametrize("args, message", [
    (["Steps", ""], "script_args x_values: the 'Steps' axis has no values"),
    (["Steps", "ten"], "script_args x_values: Steps takes whole numbers: 'ten'"),
    ([99, "1"], "script_args x_type: axis index 99 is out of range"),
    (["Colour", "1"], "script_args x_type: unknown txt2img axis type 'Colour'"),
    (["Token merging ratio high-res", "half"], "script_args x_values: Token merging ratio high-res takes numbers"),
    (["Hires upscaler", "Nope"], "script_args x_values: 'Nope' is not a valid 'Hires upscaler' value"),
    (["Steps", "1", [], "Nothing", "", [], "Nothing", "", [], "yes"], "script_args draw_legend: must be true or false"),
    (["Steps", "1", *[None] * 14, 501], "script_args margin_size: must be a whole number of pixels 0-500"),
    (["Steps", "1-1001"], f"more than {MAX_CELLS}"),
    (["Prompt order", "a,b,c,d,e,f,g"], "5,040 orders"),
    # counted before any factorial: 200,000! took a second, and its 973,000 digits failed to print
    (["Prompt order", ",".join(map(str, range(200_000)))], "200000 values make billions of orders"),
    (["Steps", "1", *[None] * 14, 10 ** 400], "margin_size: must be a whole number"),  # was an OverflowError
    (["Steps", "1", *[None] * 14, float("nan")], "margin_size: must be a whole number"),
    (list(range(len(ARG_NAMES) + 1)), "at most 18 values"),
])
def test_bad_script_args_name_the_slot(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_script_args(args)


def test_img2img_only_axis_is_refused_for_txt2img_by_label():
    with pytest.raises(ValueError, match="unknown txt2img axis type 'Cond. Image Mask Weight'"):
        parse_script_args(["Cond. Image Mask Weight", "0.5"], "txt2img")
    assert parse_script_args(["Cond. Image Mask Weight", "0.5"], "img2img").x.values == (0.5,)


def test_script_args_info_has_a1111_slots_in_order():
    args = script_args_info("txt2img")
    assert len(args) == len(ARG_NAMES)
    assert [arg.label for arg in args[:3]] == ["X type", "X values", "X values"]
    assert args[0].default == "Seed" and args[3].default == "Nothing"
    assert args[0].choices == [axis.label for axis in axes_for("txt2img")]
    assert (args[16].label, args[16].minimum, args[16].maximum, args[16].step) == ("Grid margins (px)", 0, 500, 2)
