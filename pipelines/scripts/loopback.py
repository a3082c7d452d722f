"""A1111's "Loopback" img2img script: each loop's output is the next loop's init image, at a scheduled strength.

From Python::

    from pipelines.scripts import loopback
    config = loopback.LoopbackConfig(loops=4, final_denoising_strength=0.3, denoising_curve="Lazy")
    result = loopback.run(img2img_pipe, params, config)   # result.images[0]: the grid of the loops

As A1111's (scripts/loopback.py): the seeds are drawn once (-1) and each loop runs at the previous loop's seed + 1,
on across batches; every batch (`batch_count`) starts again from the call's init image and strength, and each loop
draws one image (`batch_size` is not used, as in A1111). After the first loop masked content is "original" (the
masked area now holds the previous loop's picture). With one batch the result is the grid of every loop, then every
loop's image; with several, the grid of each batch's last image, then those images. Each image's infotext has its
loop's denoising strength and A1111's `Final denoising strength` and `Denoising curve`. "Append interrogated prompt"
adds, after the call's prompt and ", ", `interrogate(init image)` (CLIP: the server's Interrogate CLIP) or
`deepbooru(init image)` (DeepBooru: the server's DeepDanbooru tags, under Settings > Interrogate's DeepBooru options)
to the prompt at each loop, as A1111's. Interrupt ends the script
(the interrupted loop's image is left out, as A1111's); Skip ends the current batch.

With colour correction on (`params.color_correction=True`, A1111's "Apply color correction to img2img results to match
original colors" setting), every loop's result is matched to the call's own init image (as given, not resized: A1111's
`initial_color_corrections`), not to the previous loop's picture, so colours do not drift loop after loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from pipelines.control import GenerationControl
from pipelines.generation import GenerationResult
from pipelines.infotext import build_infotext, split_infotext
from pipelines.scripts.grid_budget import check_grid_size, output_size
from pipelines.scripts.image_budget import check_script_images, script_image_cap
from pipelines.scripts.loopback_config import (TITLE, LoopbackConfig, loop_strength, parse_script_args,
                                               script_args, strength_schedule)
from pipelines.scripts.registry import ScriptResult
from pipelines.seeds import resolve_seed

GRID_PREFIX = "grid"  # A1111 saves the loops' grid as an ordinary grid-NNNN.png

__all__ = ["TITLE", "LoopbackConfig", "check_loopback", "loop_strength", "parse_script_args", "planned_params", "run",
           "script_args", "strength_schedule"]


# what each "Append interrogated prompt" choice needs: (keyword of the callable, what it is, where the server has it)
INTERROGATORS = {"CLIP": ("interrogate", "an interrogator", "its Interrogate CLIP"),
                 "DeepBooru": ("deepbooru", "a DeepBooru tagger",
                               "its tagger when started with --deepdanbooru-models-path FOLDER")}


def check_loopback(params, config: LoopbackConfig, interrogate: Callable | None = None,
                   deepbooru: Callable | None = None) -> None:
    """ValueError before anything runs: img2img params with one init image, and the interrogator the chosen
    "Append interrogated prompt" needs (`interrogate` for CLIP, `deepbooru` for DeepBooru)."""
    if not hasattr(params, "init_images") or not hasattr(params, "denoising_strength"):
        raise ValueError("'Loopback' runs for img2img: give img2img params with an init image.")
    if isinstance(params.init_images, list) and len(params.init_images) > 1:
        raise ValueError(f"'Loopback' feeds one image through its loops; give one init image, not "
                         f"{len(params.init_images)} (run the script once per image).")
    choice = config.append_interrogation
    if choice in INTERROGATORS:
        keyword, what, server = INTERROGATORS[choice]
        if (interrogate if choice == "CLIP" else deepbooru) is None:
            raise ValueError(f"{TITLE}: append_interrogation {choice!r} needs {what} and none is configured: pass "
                             f"{keyword}=<function image -> text> (the web UI server passes {server}), or set "
                             "append_interrogation to 'None'.")
        if not isinstance(params.prompt, str):
            raise ValueError(f"{TITLE}: append_interrogation {choice!r} appends to one prompt; give the prompt as a "
                             "string, not a list.")


def loop_params(params, config: LoopbackConfig) -> list:
    """The params of every loop (batch by batch) as planned: strengths and seeds; each loop's init image is only known
    once the loop before it has run, so the call's stands in for it here."""
    schedule = config.schedule(params.denoising_strength)
    seed = params.seed
    planned = []
    for batch in range(params.batch_count):
        for loop in range(config.loops):
            planned.append(replace(params, batch_size=1, batch_count=1, denoising_strength=schedule[loop],
                                   seed=seed if seed == -1 else seed + batch * config.loops + loop,
                                   inpainting_fill=params.inpainting_fill if loop == 0 else "original"))
    kept = config.loops if params.batch_count == 1 else params.batch_count  # the grid's images, see `run`
    check_grid_size("Loopback's", [output_size(params)] * kept, "use fewer loops or batches, or a smaller size")
    return planned


def planned_params(params, config: LoopbackConfig, **context: Any) -> list:
    """Every loop's params (after `check_loopback`), for a server's own checks before it queues the script."""
    check_loopback(params, config, context.get("interrogate"), context.get("deepbooru"))
    planned = loop_params(params, config)
    check_loop_images(params, config, script_image_cap(context))
    return planned


def check_loop_images(params, config: LoopbackConfig, cap: int) -> None:
    """ValueError when the loops make more than `cap` images (one per loop of each batch; A1111 runs them at batch
    size 1)."""
    check_script_images("Loopback", config.loops * params.batch_count, cap,
                        f"{config.loops} loops x batch count {params.batch_count}",
                        "use fewer loops or a smaller batch count")


class _SkipWatch:
    """The caller's control, noting a Skip the pipeline takes, so the script ends that batch as A1111's does."""

    def __init__(self, control: GenerationControl) -> None:
        self.control = control
        self.skipped = False

    def __getattr__(self, name: str):
        return getattr(self.control, name)

    @property
    def interrupted(self) -> bool:
        return self.control.interrupted

    def take_skip(self) -> bool:
        taken = self.control.take_skip()
        self.skipped = self.skipped or taken
        return taken


@dataclass
class _Progress:
    """The pipeline's step callback, counting batches over every loop (A1111's job_count = loops * batch count)."""

    callback: Callable | None
    total: int

    def at(self, position: int):
        if self.callback is None:
            return None

        def on_step(state):
            self.callback(replace(state, batch_index=position, batch_count=self.total))
        return on_step


def with_loop_keys(infotext: str, config: LoopbackConfig) -> str:
    """A loop's infotext with A1111's two Loopback keys added before `Version`."""
    if not infotext:
        return infotext
    prompt, negative, values = split_infotext(infotext)
    version = values.pop("Version", None)
    values.update(config.infotext_keys())
    if version is not None:
        values["Version"] = version
    return build_infotext(prompt, negative, values)


def run(pipe, params, config: LoopbackConfig, callback=None, control: GenerationControl | None = None,
        interrogate: Callable | None = None, deepbooru: Callable | None = None, **context: Any) -> ScriptResult:
    """Run the loops with `pipe` (an img2img pipeline) on `params`.

    `interrogate(image) -> str`: the text "Append interrogated prompt" CLIP adds (the web UI's server passes its
    Interrogate CLIP); `deepbooru(image) -> str`: the tags its DeepBooru adds (the server's DeepDanbooru tagger). Returns a `ScriptResult`: the grid (when more than one image is kept), then the kept images
    (see the module's docstring); `samples` holds every loop's image, for saving."""
    # 1. Checks, every loop's params, before the first generation
    check_loopback(params, config, interrogate, deepbooru)
    append = {"CLIP": interrogate, "DeepBooru": deepbooru}.get(config.append_interrogation)
    params = replace(params, seed=resolve_seed(params.seed), subseed=resolve_seed(params.subseed))  # A1111's fix_seed
    planned_loops = loop_params(params, config)
    check_loop_images(params, config, script_image_cap(context, pipe))
    for planned in planned_loops:
        pipe.check_inputs(replace(planned))
    watch = _SkipWatch(control or GenerationControl())
    progress = _Progress(callback, config.loops * params.batch_count)
    initial = params.denoising_strength
    original_prompt = params.prompt

    # 2. The loops: batch by batch, each from the call's init image and strength
    samples, kept = GenerationResult(), GenerationResult()
    seed = params.seed
    for batch in range(params.batch_count):
        current = replace(params, batch_size=1, batch_count=1, color_correction=_loop_color_target(params))
        last = None
        watch.skipped = False
        for loop in range(config.loops):
            if append is not None:
                tags = append(current.init_images[0])
                current = replace(current, prompt=(f"{original_prompt}, " if original_prompt else "") + tags)
            result = pipe(replace(current, seed=seed), callback=progress.at(batch * config.loops + loop),
                          control=watch)
            texts = [with_loop_keys(text, config) for text in result.infotexts]
            samples.subseed = result.subseed if samples.subseed is None else samples.subseed
            for index, text in enumerate(texts):
                samples.add_from(result, index, text)
            if watch.interrupted or not result.images:
                break
            seed = result.seeds[0] + 1
            if watch.skipped:
                break
            last = (result.images[0], result.seeds[0], texts[0])
            strength = loop_strength(loop + 1, config.loops, initial, config.final_denoising_strength,
                                     config.denoising_curve)
            current = replace(current, init_images=[last[0]], denoising_strength=strength, inpainting_fill="original")
            if params.batch_count == 1:
                kept.add(*last)
        if params.batch_count > 1 and last is not None and not watch.skipped and not watch.interrupted:
            kept.add(*last)
        if watch.interrupted:
            break

    # 3. The result: the grid of what was kept, then the kept images
    samples.interrupted = watch.interrupted
    return _assemble(kept, samples)


def _loop_color_target(params):
    """A1111's `initial_color_corrections`: with the setting on, the call's first init image is every loop's target."""
    if params.color_correction is True:
        return params.init_images[0]
    return params.color_correction


def _assemble(kept: GenerationResult, samples: GenerationResult) -> ScriptResult:
    result = ScriptResult(grid_prefix=GRID_PREFIX, samples=samples, interrupted=samples.interrupted,
                          subseed=samples.subseed)
    if len(kept.images) > 1:  # A1111 draws the grid only of more than one image, in one row
        from pipelines.image_grid import image_grid

        result.add(image_grid(kept.images, rows=1), kept.seeds[0], kept.infotexts[0])
        result.index_of_first_image = 1
    for image, seed, text in zip(kept.images, kept.seeds, kept.infotexts):
        result.add(image, seed, text)
    return result
