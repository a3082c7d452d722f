"""Prompt matrix: A1111's combinations, batches and seeds, and the labelled grid on the tiny SD 1.x model
(pipelines/scripts/prompt_matrix.py)."""

import numpy as np
import pytest

from pipelines.control import GenerationControl
from pipelines.grid_annotations import INACTIVE_COLOR
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import prompt_matrix
from pipelines.scripts.prompt_matrix import PromptMatrixConfig

TINY = dict(prompt="a cat|red|blue", width=64, height=64, steps=1, seed=5, subseed=100, sampler="Euler")


def test_combinations_follow_the_bits_of_their_number():
    assert prompt_matrix.matrix_prompts("a cat|red|blue") == ["a cat", "a cat, red", "a cat, blue",
                                                              "a cat, red, blue"]
    assert prompt_matrix.matrix_prompts("a cat|red|blue|hat", put_at_start=True, delimiter=" ")[:4] + \
        prompt_matrix.matrix_prompts("a cat|red|blue|hat", put_at_start=True, delimiter=" ")[-1:] == [
            "a cat", "red a cat", "blue a cat", "red blue a cat", "red blue hat a cat"]


def test_parts_are_stripped_of_spaces_and_commas_but_the_first_is_kept_as_written():
    assert prompt_matrix.matrix_prompts("a cat , | red,| ,blue ") == ["a cat , ", "a cat , , red", "a cat , , blue",
                                                                    "a cat , , red, blue"]
    assert prompt_matrix.matrix_prompts("no parts") == ["no parts"]


def test_batches_keep_the_batch_size_and_cover_every_combination():
    params = Txt2ImgParams(**{**TINY, "batch_size": 3, "batch_count": 7})
    batches = prompt_matrix.plan_batches(params, PromptMatrixConfig())
    assert [batch.params.prompt for batch in batches] == [["a cat", "a cat, red", "a cat, blue"],
                                                          ["a cat, red, blue"]]
    assert [(b.params.batch_size, b.params.batch_count, b.params.seed) for b in batches] == [(3, 1, -1), (1, 1, -1)]
    assert [batch.seeds for batch in batches] == [(5, 5, 5), (5,)]
    assert [batch.params.subseed for batch in batches] == [100, 103]
    different = prompt_matrix.plan_batches(params, PromptMatrixConfig(different_seeds=True))
    assert [batch.seeds for batch in different] == [(5, 6, 7), (8,)]


def test_the_negative_prompt_can_be_the_matrix():
    params = Txt2ImgParams(**{**TINY, "prompt": "a cat", "negative_prompt": "blurry|dark"})
    [batch, second] = prompt_matrix.plan_batches(params, PromptMatrixConfig(prompt_type="negative"))
    assert (batch.params.prompt, batch.params.negative_prompt, second.params.negative_prompt) == (
        "a cat", ["blurry"], ["blurry, dark"])


def test_script_args_in_a1111_order_with_defaults():
    assert prompt_matrix.parse_script_args([]) == PromptMatrixConfig()
    assert prompt_matrix.parse_script_args([True, 1, "Negative", "space", 10.0]) == PromptMatrixConfig(
        True, True, "negative", "space", 10)
    assert prompt_matrix.parse_script_args([None, None, None, None, 4]).margin_size == 4


@pytest.mark.parametrize("args, message", [
    ([False, False, "both"], "script_args prompt_type: must be one of 'positive', 'negative', got 'both'"),
    ([False, False, "positive", "tab"], "variations_delimiter: must be one of 'comma', 'space'"),
    (["yes"], "script_args put_at_start: must be true or false"),
    ([False, False, "positive", "comma", 501], "margin_size: must be a whole number of pixels 0-500"),
    ([False, False, "positive", "comma", 10 ** 400], "margin_size: must be a whole number"),  # was OverflowError
    ([False] * 6, "at most 5 values: [put_at_start, different_seeds, prompt_type, variations_delimiter, margin_size]"),
])
def test_bad_script_args_name_the_slot(args, message):
    with pytest.raises(ValueError) as error:
        prompt_matrix.parse_script_args(args)
    assert message in str(error.value)


def test_the_count_is_capped_and_a_prompt_per_image_refused():
    ten = Txt2ImgParams(**{**TINY, "prompt": "x" + "|p" * 10})
    with pytest.raises(ValueError, match=r"10 optional '\|' parts, making 2\^10 = 1,024 images; the most is 9"):
        prompt_matrix.plan_batches(ten, PromptMatrixConfig())
    with pytest.raises(ValueError, match="one prompt for the call"):
        prompt_matrix.plan_batches(Txt2ImgParams(**{**TINY, "prompt": ["a|b"]}), PromptMatrixConfig())
    big = Txt2ImgParams(**{**TINY, "prompt": "x" + "|p" * 9, "width": 1024, "height": 1024})
    with pytest.raises(ValueError, match="about 537 megapixels, more than 200"):
        prompt_matrix.plan_batches(big, PromptMatrixConfig())


def test_the_grid_cap_counts_the_hires_size():
    from pipelines.hires import HiresParams

    # 512 images of 512x512 are 134 MP; hires x2 makes them 1024x1024: 537 MP
    small = dict(TINY, prompt="x" + "|p" * 9, width=512, height=512)
    prompt_matrix.plan_batches(Txt2ImgParams(**small), PromptMatrixConfig())
    with pytest.raises(ValueError, match="about 537 megapixels, more than 200"):
        prompt_matrix.plan_batches(HiresParams(**small, hr_scale=2.0), PromptMatrixConfig())


def _pixels(image):
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_matrix_runs_every_combination_and_labels_the_grid(sd1_pipe):
    steps = []
    params = Txt2ImgParams(**{**TINY, "batch_size": 3})
    result = prompt_matrix.run(sd1_pipe, params, PromptMatrixConfig(),
                               callback=lambda state: steps.append((state.batch_index, state.batch_count)))
    grid, *images = result.images
    assert result.index_of_first_image == 1 and len(images) == 4 and len(result.samples.images) == 4
    assert [parse_infotext(text)["Prompt"] for text in result.infotexts[1:]] == [
        "a cat", "a cat, red", "a cat, blue", "a cat, red, blue"]
    assert result.seeds == [5] * 5 and result.infotexts[0] == result.infotexts[1]
    assert sorted(set(steps)) == [(0, 2), (1, 2)]
    # 2 columns (red off / on) and 2 rows (blue off / on), no margin: the rows' labels pad 3/4 of a cell on the left
    assert grid.width == 48 + 2 * 64 and grid.height > 2 * 64
    top = grid.height - 128
    assert _pixels(grid.crop((48 + 64 * 1, top, 48 + 64 * 2, grid.height - 64))).tolist() == \
        _pixels(images[1]).tolist()  # "a cat, red" is column 1 of row 0
    column_off, column_on = (_pixels(grid.crop((48 + 64 * c, 0, 48 + 64 * (c + 1), top))) for c in (0, 1))
    # "red" struck through in grey over column 0 (its line is solid grey; nothing darker), drawn dark over column 1
    assert (column_off == INACTIVE_COLOR).all(axis=-1).any() and column_off.min() == INACTIVE_COLOR[0]
    assert column_on.min() < 100 and not (column_on == INACTIVE_COLOR).all(axis=-1).any()
    # the same seed for every image: the batch's second image is the lone call's "a cat, red" at seed 5
    alone = sd1_pipe(Txt2ImgParams(**{**TINY, "prompt": "a cat, red"})).images[0]
    assert np.abs(_pixels(alone) - _pixels(images[1])).max() <= 1


def test_different_seeds_and_margins(sd1_pipe):
    config = PromptMatrixConfig(different_seeds=True, margin_size=10, variations_delimiter="space")
    result = prompt_matrix.run(sd1_pipe, Txt2ImgParams(**{**TINY, "prompt": "a cat|red"}), config)
    assert result.seeds[1:] == [5, 6]
    assert [parse_infotext(text)["Seed"] for text in result.infotexts[1:]] == ["5", "6"]
    assert parse_infotext(result.infotexts[2])["Prompt"] == "a cat red"
    assert result.images[0].width == 2 * 64 + 10  # one row of labels only: no left pad


def test_interrupt_keeps_the_done_batches_and_leaves_blank_cells(sd1_pipe):
    control = GenerationControl()
    result = prompt_matrix.run(sd1_pipe, Txt2ImgParams(**{**TINY, "prompt": "a cat|red", "batch_size": 1}),
                               PromptMatrixConfig(), callback=lambda state: control.interrupt(), control=control)
    assert result.interrupted and len(result.samples.images) == 1 and len(result.images) == 2
    top = result.images[0].height - 64
    assert result.images[0].crop((64, top, 128, top + 64)).getbbox() is None  # black: never generated


def test_matrix_runs_through_hires_fix(sd1_pipe):
    from pipelines.hires import HiresFix, HiresParams

    params = HiresParams(**{**TINY, "prompt": "a cat|red", "width": 32, "height": 32, "batch_size": 2},
                         hr_scale=2.0, hr_second_pass_steps=1, denoising_strength=0.5, hr_upscaler="Latent")
    result = prompt_matrix.run(HiresFix(sd1_pipe), params, PromptMatrixConfig())
    assert [image.size for image in result.images[1:]] == [(64, 64)] * 2 and result.images[0].width == 128
    read = [parse_infotext(text) for text in result.infotexts[1:]]
    assert [(r["Prompt"], r["Seed"], r["Hires upscale"]) for r in read] == [("a cat", "5", "2"),
                                                                           ("a cat, red", "5", "2")]
