"""A prompt list's --sd_model (pipelines/scripts/prompt_line_checkpoints.py): names checked before the first image,
each checkpoint loaded once, the images in the lines' order."""

from dataclasses import dataclass

import pytest

from pipelines.generation import GenerationResult
from pipelines.params import Txt2ImgParams
from pipelines.scripts import prompts_from_file
from pipelines.scripts.checkpoint_names import close_names, find_checkpoint
from pipelines.scripts.prompt_line_checkpoints import line_checkpoints, run_order
from pipelines.scripts.prompt_lines import parse_prompt_lines
from pipelines.scripts.prompts_from_file import prompts_config

NAMES = ["sd1.safetensors [0123456789]", "other.safetensors", "sub/anime-v2.ckpt"]
TINY = dict(prompt="", steps=1, width=64, height=64, seed=5, sampler="Euler")


@dataclass
class NamedPipe:
    """A pipeline stand-in that says which checkpoint made each image, and records the prompts it was given."""

    checkpoint: str
    calls: list

    def check_inputs(self, params) -> None:
        pass

    def __call__(self, params, callback=None, control=None) -> GenerationResult:
        self.calls.append((self.checkpoint, params.prompt))
        result = GenerationResult()
        result.add(f"{self.checkpoint}:{params.prompt}", params.seed, f"{params.prompt}\nModel: {self.checkpoint}")
        return result


def switching(calls: list):
    """A server's switch_checkpoint stand-in: the named checkpoint's pipeline, each load recorded."""
    loads = []

    def switch(name: str) -> NamedPipe:
        loads.append(name)
        return NamedPipe(name, calls)

    return switch, loads


def test_names_are_found_as_a1111_titles_are_written():
    assert find_checkpoint(NAMES, "SD1") == NAMES[0]
    assert find_checkpoint(NAMES, "sd1.safetensors") == NAMES[0]
    assert find_checkpoint(NAMES, "anime-v2") == find_checkpoint(NAMES, "sub/anime-v2.ckpt") == NAMES[2]
    assert find_checkpoint(NAMES, "anime") is None
    assert close_names(NAMES, "anime-v3") == [NAMES[2]]
    assert close_names(NAMES, "zzzz") == sorted(NAMES, key=str.casefold)  # none close: what would have worked


def test_lines_run_grouped_by_checkpoint_the_jobs_own_first():
    assert run_order([None, "b", "a", None, "b", "a"]) == [0, 3, 1, 4, 2, 5]
    assert run_order(["a", "a", None]) == [2, 0, 1]


def test_unknown_names_are_refused_naming_the_line_and_close_names():
    jobs = parse_prompt_lines("a cat\n--prompt x --sd_model other\n\n--sd_model anime-v3 --prompt y")
    with pytest.raises(ValueError) as error:
        line_checkpoints(jobs, {"switch_checkpoint": print, "checkpoint_names": NAMES})
    assert str(error.value).startswith("line 4: --sd_model names an unknown checkpoint 'anime-v3'; close names: "
                                       "'sub/anime-v2.ckpt'.")
    assert line_checkpoints(jobs[:2], {"switch_checkpoint": print, "checkpoint_names": NAMES}) == [
        None, "other.safetensors"]


def test_a_caller_without_a_checkpoint_loader_is_refused_before_the_first_image():
    calls = []
    with pytest.raises(ValueError, match="line 2: --sd_model needs a way to load checkpoints, .*switch_checkpoint="):
        prompts_from_file.run(NamedPipe("sd1", calls), Txt2ImgParams(**TINY), prompts_config("a\n--sd_model other"))
    assert calls == []
    result = prompts_from_file.run(NamedPipe("sd1", calls), Txt2ImgParams(**TINY), prompts_config("a\nb"))
    assert result.images == ["sd1:a", "sd1:b"]  # a list without --sd_model needs no loader


def test_each_checkpoint_loads_once_and_images_keep_the_lines_order():
    calls = []
    switch, loads = switching(calls)
    text = "--prompt a --sd_model other\nb\n--prompt c --sd_model SD1\n--prompt d --sd_model other\ne"
    result = prompts_from_file.run(NamedPipe("job's own", calls), Txt2ImgParams(**TINY), prompts_config(text),
                                   switch_checkpoint=switch, checkpoint_names=NAMES)
    assert loads == ["other.safetensors", NAMES[0]]
    assert calls == [("job's own", "b"), ("job's own", "e"), ("other.safetensors", "a"), ("other.safetensors", "d"),
                     (NAMES[0], "c")]
    assert result.images == ["other.safetensors:a", "job's own:b", f"{NAMES[0]}:c", "other.safetensors:d",
                             "job's own:e"]
    assert [text.split("Model: ")[1] for text in result.samples.infotexts] == [
        "other.safetensors", "job's own", NAMES[0], "other.safetensors", "job's own"]


def test_interrupt_keeps_the_lines_done_in_their_order():
    from pipelines.control import GenerationControl

    calls, control = [], GenerationControl()
    switch, loads = switching(calls)

    def interrupt_after_two(name):
        if len(calls) == 2:
            control.interrupt()
        return switch(name)

    result = prompts_from_file.run(NamedPipe("own", calls), Txt2ImgParams(**TINY),
                                   prompts_config("--prompt a --sd_model other\nb\n--prompt c --sd_model sd1\nd"),
                                   switch_checkpoint=interrupt_after_two, checkpoint_names=NAMES, control=control)
    assert result.interrupted and result.images == ["other.safetensors:a", "own:b", "own:d"]
    assert loads == ["other.safetensors"]  # the interrupt came while loading it: sd1 is never loaded
