"""A1111's cmdargs lines for Prompts from file or textbox (pipelines/scripts/prompt_lines.py)."""

import pytest

from pipelines.scripts.prompt_lines import OPTIONS, parse_option_line, parse_prompt_lines


def test_plain_lines_are_prompts_and_blank_lines_are_skipped_but_counted():
    jobs = parse_prompt_lines("  a cat  \n\n a dog -- with a hat\r\n")
    assert [(job.number, job.options) for job in jobs] == [(1, {"prompt": "a cat"}),
                                                           (3, {"prompt": "a dog -- with a hat"})]


def test_option_lines_take_a1111s_types():
    line = ('--prompt "a red cat" on a mat --negative_prompt blurry, dark --steps 20 --cfg_scale 7.5 --seed -1 '
            '--n_iter 2 --batch_size 3 --width 64 --height 128 --sampler_name "DPM++ 2M" --tiling TRUE '
            '--restore_faces false --subseed 4 --subseed_strength 0.25 --seed_resize_from_w 32 --seed_resize_from_h 16 '
            '--styles "one, two" --do_not_save_samples true --do_not_save_grid false --sampler_index 3 '
            '--prompt_for_display shown')
    assert parse_option_line(line) == {
        "prompt": "a red cat on a mat", "negative_prompt": "blurry, dark", "steps": 20, "cfg_scale": 7.5, "seed": -1,
        "n_iter": 2, "batch_size": 3, "width": 64, "height": 128, "sampler_name": "DPM++ 2M", "tiling": True,
        "restore_faces": False, "subseed": 4, "subseed_strength": 0.25, "seed_resize_from_w": 32,
        "seed_resize_from_h": 16, "styles": "one, two", "do_not_save_samples": True, "do_not_save_grid": False,
        "sampler_index": 3, "prompt_for_display": "shown"}


def test_the_option_list_is_a1111s():
    assert list(OPTIONS) == [
        "sd_model", "outpath_samples", "outpath_grids", "prompt_for_display", "prompt", "negative_prompt", "styles",
        "seed", "subseed_strength", "subseed", "seed_resize_from_h", "seed_resize_from_w", "sampler_index",
        "sampler_name", "batch_size", "n_iter", "steps", "cfg_scale", "width", "height", "restore_faces", "tiling",
        "do_not_save_samples", "do_not_save_grid"]


def test_sd_model_takes_one_quoted_name():
    assert parse_option_line('--sd_model "my model.safetensors [abc]" --steps 2') == {
        "sd_model": "my model.safetensors [abc]", "steps": 2}


def test_a_text_option_takes_its_first_word_even_if_it_looks_like_an_option():
    assert parse_option_line("--prompt --odd word --steps 2") == {"prompt": "--odd word", "steps": 2}


@pytest.mark.parametrize("text, message", [
    ("a cat\n--prompt x --stepz 20", "line 2: unknown option --stepz; the options are --sd_model, "),
    ("--steps twenty", "line 1: option --steps takes a whole number, got 'twenty'"),
    ("--steps 20.0", "option --steps takes a whole number, got '20.0'"),
    ("--cfg_scale high", "option --cfg_scale takes a number, got 'high'"),
    ("--tiling yes", "option --tiling takes true or false, got 'yes'"),
    ("\n\n--prompt a --steps", "line 3: option --steps needs a value (a whole number)"),
    ("--prompt \"a cat", "line 1: cannot split"),
    ("--steps 2 cat", "line 1: expected an option such as --steps, got 'cat'"),
    ("--outpath_samples /etc", "option --outpath_samples is not supported: images are saved into the output folder"),
])
def test_lines_it_cannot_read_are_refused_naming_line_and_option(text, message):
    with pytest.raises(ValueError) as error:
        parse_prompt_lines(text)
    assert message in str(error.value)
