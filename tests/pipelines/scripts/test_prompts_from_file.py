"""Prompts from file or textbox: prompt placement, seeds as A1111's, every line checked first, and a tiny-model run
(pipelines/scripts/prompts_from_file.py)."""

import pytest

from mixkit.prompts.styles import PromptStyle, StyleLibrary
from pipelines.control import GenerationControl
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import prompts_from_file
from pipelines.scripts.prompts_from_file import plan_lines, prompts_config

from .keeps_copies import KeepsCopies

TINY = dict(prompt="", width=64, height=64, steps=1, seed=5, sampler="Euler")


def test_lines_replace_an_empty_prompt_and_join_a_given_one_at_the_start_or_end():
    text = "a cat\n--prompt a dog --negative_prompt dark\n--steps 2"
    empty = plan_lines(Txt2ImgParams(**TINY), prompts_config(text))
    assert [(p.prompt, p.negative_prompt, p.steps) for p in empty] == [("a cat", "", 1), ("a dog", "dark", 1),
                                                                       ("", "", 2)]
    base = Txt2ImgParams(**{**TINY, "prompt": "photo", "negative_prompt": "ugly"})
    start = plan_lines(base, prompts_config(text))
    assert [(p.prompt, p.negative_prompt) for p in start] == [("a cat photo", "ugly"), ("a dog photo", "dark ugly"),
                                                              ("photo", "ugly")]
    end = plan_lines(base, prompts_config(text, prompt_position="end"))
    assert [p.prompt for p in end] == ["photo a cat", "photo a dog", "photo"]


def test_options_set_their_fields():
    [line] = plan_lines(Txt2ImgParams(**TINY), prompts_config(
        "--prompt x --n_iter 3 --batch_size 2 --sampler_name k_euler_a --cfg_scale 4.5 --tiling true --width 128 "
        "--subseed 9 --subseed_strength 0.5 --seed_resize_from_w 32 --seed_resize_from_h 48 --restore_faces true"))
    assert (line.batch_count, line.batch_size, line.sampler, line.cfg_scale, line.tiling, line.width, line.subseed,
            line.subseed_strength, line.seed_resize_from_w, line.seed_resize_from_h, line.restore_faces) == (
        3, 2, "Euler a", 4.5, True, 128, 9, 0.5, 32, 48, True)


def test_seeds_stay_random_per_line_or_are_drawn_once_and_iterated():
    params = Txt2ImgParams(**{**TINY, "seed": -1, "batch_size": 2, "batch_count": 3})
    assert [p.seed for p in plan_lines(params, prompts_config("a\nb"))] == [-1, -1]
    first, second = plan_lines(params, prompts_config("a\nb", same_seed=True))
    assert first.seed == second.seed != -1
    first, second, third = plan_lines(params, prompts_config("a\n--prompt b --seed 7 --batch_size 1\nc",
                                                             iterate_seed=True))
    # the call's batch size x batch count (2 x 3) after every line; a line's own --seed wins for that line only
    assert (second.seed, third.seed - first.seed) == (7, 12) and first.seed != -1
    fixed = plan_lines(Txt2ImgParams(**TINY), prompts_config("a\nb\nc", iterate_seed=True))
    assert [p.seed for p in fixed] == [5, 6, 7]


def test_styles_merge_into_the_lines_prompts():
    styles = StyleLibrary(styles={"Photo": PromptStyle("Photo", "photo of {prompt}", "blurry")})
    [line] = plan_lines(Txt2ImgParams(**TINY), prompts_config("--prompt a cat --styles Photo"), styles)
    assert (line.prompt, line.negative_prompt) == ("photo of a cat", "blurry")
    with pytest.raises(ValueError, match="line 1: unknown style"):
        plan_lines(Txt2ImgParams(**TINY), prompts_config("--prompt a --styles Nope"), styles)
    with pytest.raises(ValueError, match="line 1: --styles needs a styles file"):
        plan_lines(Txt2ImgParams(**TINY), prompts_config("--prompt a --styles Photo"))


def test_script_args_in_a1111_order():
    config = prompts_from_file.parse_script_args([1, False, "End", "a\n\nb"])
    assert (config.iterate_seed, config.same_seed, config.prompt_position, config.make_combined) == (
        True, False, "end", False)
    assert [job.options["prompt"] for job in config.jobs] == ["a", "b"]


@pytest.mark.parametrize("args, message", [
    ([False, False, "middle", "a"], "script_args prompt_position: must be one of 'start', 'end'"),
    ([False, False, "start", ""], "script_args prompt_txt: the list has no lines"),
    ([False, False, "start", ["a"]], "script_args prompt_txt: must be the list's text"),
    ([False, False, "start", "a\n--bogus 1"], "script_args prompt_txt, line 2: unknown option --bogus"),
    ([False, False, "start", "\n".join("x" * 1001)], "1,001 lines, more than 1,000"),
    # counted before any line is read (a bad option on line 1 is not reached): reading 100,000 took 10 s
    ([False, False, "start", "--nope 1\n" + "\n".join("x" * 1000)], "1,001 lines, more than 1,000"),
    ([False, False, "start", "a", False, 1], "at most 5 values"),
])
def test_bad_script_args_name_the_slot_or_line(args, message):
    with pytest.raises(ValueError) as error:
        prompts_from_file.parse_script_args(args)
    assert message in str(error.value)


def test_every_line_runs_with_its_own_infotext(sd1_pipe):
    steps = []
    config = prompts_config("a red cat\n--prompt a blue dog --steps 2 --n_iter 2 --do_not_save_samples true\n"
                            "--negative_prompt dark --sampler_name heun", iterate_seed=True)
    result = prompts_from_file.run(sd1_pipe, Txt2ImgParams(**{**TINY, "prompt": "photo"}), config,
                                   callback=lambda state: steps.append((state.batch_index, state.batch_count)))
    read = [parse_infotext(text) for text in result.infotexts]
    assert [(r["Prompt"], r["Steps"], r["Seed"], r["Sampler"]) for r in read] == [
        ("a red cat photo", "1", "5", "Euler"), ("a blue dog photo", "2", "6", "Euler"),
        ("a blue dog photo", "2", "7", "Euler"), ("photo", "1", "7", "Heun")]
    assert read[3]["Negative prompt"] == "dark"
    assert result.index_of_first_image == 0 and len(result.images) == 4 and result.seeds == [5, 6, 7, 7]
    assert result.samples.seeds == [5, 7]  # the --do_not_save_samples line's images are not saved
    assert sorted(set(steps)) == [(0, 4), (1, 4), (2, 4), (3, 4)]


def test_make_combined_puts_one_grid_of_every_image_first(sd1_pipe):
    result = prompts_from_file.run(sd1_pipe, Txt2ImgParams(**TINY), prompts_config("a\nb\nc", make_combined=True))
    assert result.index_of_first_image == 1 and result.images[0].size == (128, 128)
    assert result.infotexts[0] == "\n".join(result.infotexts[1:]) and len(result.samples.images) == 3


def test_the_combined_image_is_refused_before_generating_when_over_the_grid_cap():
    # 2 lines of 16 x 6 images of 1024x1024 = 201 MP in one grid; without the combined image, no grid to cap
    text = "--prompt a --n_iter 6\n--prompt b --n_iter 6"
    params = Txt2ImgParams(**{**TINY, "width": 1024, "height": 1024, "batch_size": 16})
    assert len(plan_lines(params, prompts_config(text))) == 2
    with pytest.raises(ValueError, match="combined grid would be about 201 megapixels, more than 200"):
        plan_lines(params, prompts_config(text, make_combined=True))


def test_a_bad_line_fails_before_the_first_image(sd1_pipe):
    calls = []
    with pytest.raises(ValueError, match="line 2: .*width"):
        prompts_from_file.run(sd1_pipe, Txt2ImgParams(**TINY), prompts_config("a\n--width 63"),
                              callback=calls.append)
    with pytest.raises(ValueError, match="line 2: unknown sampler 'Nope' in --sampler_name; valid: "):
        prompts_from_file.run(sd1_pipe, Txt2ImgParams(**TINY), prompts_config("a\n--sampler_name Nope"))
    assert calls == []


def test_interrupt_stops_after_the_current_line(sd1_pipe):
    control = GenerationControl()
    result = prompts_from_file.run(sd1_pipe, Txt2ImgParams(**TINY), prompts_config("a\nb\nc"),
                                   callback=lambda state: control.interrupt(), control=control)
    assert result.interrupted and len(result.images) == 1 and parse_infotext(result.infotexts[0])["Prompt"] == "a"


def test_saved_lines_keep_their_before_copies_at_their_own_positions(sd1_pipe, tmp_path):
    """An unsaved line's images are skipped; the copies follow the images that are saved, not their old indexes."""
    config = prompts_config("a\n--prompt b --do_not_save_samples true\nc")
    result = prompts_from_file.run(KeepsCopies(sd1_pipe), Txt2ImgParams(**TINY), config)
    samples = result.samples
    assert sorted(samples.before_face_restoration) == sorted(samples.before_color_correction) == [0, 1]
    assert [parse_infotext(text)["Prompt"] for text in samples.infotexts] == ["a", "c"]
    assert samples.before_face_restoration[1] is not samples.images[1]
    assert list(samples.before_face_restoration[1].getdata()) == list(samples.images[1].getdata())
    assert len(list(tmp_path.glob("*-before-*.png"))) == 0 and len(result.save(tmp_path)) == 2
    assert len(list(tmp_path.glob("*-before-face-restoration.png"))) == 2
