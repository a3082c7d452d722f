"""The work a queued txt2img / img2img / outpaint / selectable-script job does once the worker runs it.

`ServerState` validates a request and queues one of these; they pick the pipeline the params ask for (hires fix,
ControlNet, IP-Adapter), run it with the worker's progress callback and interrupt control, save the images, and record
what the infotext and the API response need to know about the model that made them.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from pipelines.png import PNG_ONLY, InfotextWriting
from webui.checkpoints import CheckpointEntry
from webui.request_checkpoint import checkpoint_for_job

logger = logging.getLogger(__name__)


@dataclass
class GenerationOutcome:
    """A finished job: the pipeline's result plus where its images were saved (if they were)."""

    result: Any  # pipelines.generation.GenerationResult
    params: Any
    saved: list = field(default_factory=list)
    model_title: str | None = None
    model_name: str | None = None  # A1111's sd_model_name: the checkpoint's name_for_extra (the infotext's "Model")
    model_hash: str | None = None
    vae_name: str | None = None  # a VAE chosen in Settings (None: the checkpoint's own), as the infotext's VAE:
    vae_hash: str | None = None


def finished(pipe, result, params, *, save: bool, output_dir: Path, entry: CheckpointEntry | None,
             writing: InfotextWriting = PNG_ONLY) -> GenerationOutcome:
    """Save `result` when asked (its infotexts where `writing` says) and record the checkpoint (and VAE) the pipeline
    ran with.

    Recorded in the job, before a request's own checkpoint is put back (`webui.request_checkpoint`)."""
    saved = result.save(output_dir, writing) if save and result.images else []
    return GenerationOutcome(result=result, params=params, saved=saved, model_title=entry.title if entry else None,
                             model_name=entry.name_for_extra if entry else None,
                             model_hash=pipe.model.model_hash, vae_name=pipe.model.extras.get("vae_name"),
                             vae_hash=pipe.model.extras.get("vae_hash"))


def generation_job(state, kind: str, params, *, save: bool, checkpoint: CheckpointEntry | None = None,
                   restore_checkpoint: bool = True, writing: InfotextWriting = PNG_ONLY) -> Callable:
    """The worker's run function for a txt2img ("txt2img") or img2img ("img2img") call with validated params.

    `checkpoint`: the request's own checkpoint (None: the server's), put back afterwards when `restore_checkpoint`.
    `writing`: where the saved images' infotexts go (A1111's enable_pnginfo, save_txt).
    """

    def run(control, on_step) -> GenerationOutcome:
        # the unit models this job uses stay in the server's cache until it ends (`pipelines.unit_model_cache`)
        in_job = state.controlnets.cache.in_job() if getattr(state, "controlnets", None) is not None else nullcontext()
        with in_job, checkpoint_for_job(state, checkpoint, restore=restore_checkpoint):
            return generate(control, on_step)

    def generate(control, on_step) -> GenerationOutcome:
        pipe = state.holder.txt2img() if kind == "txt2img" else state.holder.img2img()
        run_params = params
        if getattr(params, "controlnets", None):  # loaded first: hires fix runs its units in both passes
            from webui.api_controlnet import build_units

            run_params = replace(params, controlnets=build_units(params.controlnets, state.controlnets,
                                                                 pipe.model.unet))
        if kind == "txt2img" and hasattr(params, "hr_scale"):
            from pipelines.hires import HiresFix

            pipe = HiresFix(pipe)
        elif getattr(params, "controlnets", None) or getattr(params, "ip_adapter", None):
            from pipelines.ip_adapter_controlnet import pipeline_class_for

            pipe = pipeline_class_for(kind, bool(getattr(params, "controlnets", None)),
                                  bool(getattr(params, "ip_adapter", None))).from_pipeline(pipe)
            if getattr(params, "ip_adapter", None) and state.controlnets is not None:
                # the server's store: a unit used again is not read again (the job's pipeline is new each time)
                pipe.use_ip_adapter_store(state.controlnets.ip_adapters)
        result = pipe(run_params, callback=on_step, control=control)
        return finished(pipe, result, params, save=save, output_dir=state.output_dir, entry=state.holder.entry,
                        writing=writing)

    return run


def outpaint_job(state, params, sides: dict[str, int], *, save: bool, checkpoint: CheckpointEntry | None = None,
                 restore_checkpoint: bool = True, mk2: dict[str, float] | None = None,
                 writing: InfotextWriting = PNG_ONLY) -> Callable:
    """The worker's run function for an outpaint of `params.init_images[0]` by `sides` (checked by the caller):
    Poor man's (`pipelines.outpaint`), or Outpainting mk2 (`pipelines.outpaint_mk2`) with `mk2`'s fill settings;
    `checkpoint` and `writing` as for `generation_job`."""
    from pipelines.outpaint import outpaint
    from pipelines.outpaint_mk2 import outpaint_mk2

    reserved = {"width", "height", "init_images", "mask", "latent_mask", "inpaint_full_res", "inpainting_fill",
                "mask_blur", "mask_blur_x", "mask_blur_y", "denoising_strength"}
    rest = {k: getattr(params, k) for k in params.__dataclass_fields__ if k not in reserved}

    def run(control, on_step) -> GenerationOutcome:
        # the request's checkpoint, or the server's (reloaded if it was unloaded)
        with checkpoint_for_job(state, checkpoint, restore=restore_checkpoint):
            return paint(control, on_step)

    def paint(control, on_step) -> GenerationOutcome:
        pipe = state.holder.img2img()
        if mk2 is None:
            result = outpaint(pipe, params.init_images[0], **sides, inpainting_fill=params.inpainting_fill,
                              mask_blur=params.mask_blur, denoising_strength=params.denoising_strength,
                              callback=on_step, control=control, **rest)
        else:
            result = outpaint_mk2(pipe, params.init_images[0], **sides, mask_blur=params.mask_blur, **mk2,
                                  denoising_strength=params.denoising_strength, callback=on_step, control=control,
                                  **rest)
        return finished(pipe, result, params, save=save, output_dir=state.output_dir, entry=state.holder.entry,
                        writing=writing)

    return run


def script_pipeline(state, kind: str, params):
    """The loaded checkpoint's pipeline for a script's `params`: txt2img (with hires fix when asked) or img2img, with
    IP-Adapter support when the params carry IP-Adapter units (hires fix runs them itself)."""
    pipe = state.holder.txt2img() if kind == "txt2img" else state.holder.img2img()
    if kind == "txt2img" and hasattr(params, "hr_scale"):
        from pipelines.hires import HiresFix

        pipe = HiresFix(pipe)
    elif getattr(params, "ip_adapter", None):
        from pipelines.ip_adapter_controlnet import pipeline_class_for

        pipe = pipeline_class_for(kind, False, True).from_pipeline(pipe)
        if state.controlnets is not None:
            pipe.use_ip_adapter_store(state.controlnets.ip_adapters)
    return pipe


def with_encoded_references(state, pipe, params):
    """A script job's params with its IP-Adapter reference pictures encoded once, for every generation the script
    makes (an X/Y/Z plot's cells, a prompt list's lines); `params` itself without IP-Adapter units."""
    if not getattr(params, "ip_adapter", None):
        return params
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    store = state.controlnets.ip_adapters if state.controlnets is not None else None
    return ReferenceEmbeddings(store).params_with_embeds(pipe, params)


def checkpoint_switcher(state, kind: str, params) -> Callable[[str], Any]:
    """A script's `switch_checkpoint(name)` on the server: load checkpoint `name` (any id A1111 takes; the settings
    file keeps its own) and return its pipeline. Call only from the generation worker."""

    def switch(name: str):
        entry = state.requested_checkpoint(name)
        if entry is not None and entry != state.holder.entry:
            state.switch_checkpoint(entry.name, remember=False)
        return script_pipeline(state, kind, params)

    return switch


def vae_switcher(state, kind: str, params) -> Callable[[str], Any]:
    """A script's `switch_vae(name)` on the server: decode with VAE `name` ("Automatic", "None" or a `--vae-dir`
    name; the `sd_vae` setting keeps its own) and return the pipeline. Call only from the generation worker."""

    def switch(name: str):
        if name != state.holder.vae_name:
            state.holder.set_vae(name, state.vaes.find(name))
        return script_pipeline(state, kind, params)

    return switch


@contextmanager
def vae_kept(state, redo: str | None = None):
    """Put back the VAE decoding when the body started if the body swapped it (an X/Y/Z plot's VAE axis), even when
    it failed. A VAE that cannot be put back is an error the user sees, not a log line: the model would go on decoding
    with the plot's last VAE while Settings and every later infotext's reader expect the one chosen before. After a
    failed body the error keeps the body's (which names the failing cell) and adds the VAE's; after a finished one it
    says the script finished (its grids and images were saved where saving was on). `redo`: what the user should do
    then (the server's: choose the VAE again in Settings)."""
    from pipelines.scripts.xyz_plot import error_message, reworded

    before = state.holder.vae_name
    try:
        yield
    except Exception as error:
        problem = _put_vae_back(state, before)
        if problem is None:
            raise
        raise reworded(error, f"{error_message(error)}; {_vae_not_back(state, before, problem, redo)}") from error
    except BaseException:  # KeyboardInterrupt, SystemExit: the process is going away, the VAE goes back if it can
        _put_vae_back(state, before)
        raise
    problem = _put_vae_back(state, before)
    if problem is not None:
        raise RuntimeError(f"The script finished (its images were saved where saving was on), but "
                           f"{_vae_not_back(state, before, problem, redo)}") from problem


def _put_vae_back(state, before: str) -> Exception | None:
    """Decode with VAE `before` again when a script swapped it; the error that stopped it, or None."""
    if not state.holder.loaded or state.holder.vae_name == before:
        return None
    try:
        state.holder.set_vae(before, state.vaes.find(before))
    except Exception as error:
        logger.exception("Could not put VAE %r back after a script swapped it for %r.", before, state.holder.vae_name)
        return error
    return None


def _vae_not_back(state, before: str, problem: Exception, redo: str | None) -> str:
    from pipelines.scripts.xyz_plot import error_message

    return (f"the model's VAE could not be restored to {before!r} ({error_message(problem)}), so it still decodes "
            f"with {state.holder.vae_name!r}: " + (redo or f"choose {before!r} again in Settings (or POST sd_vae to "
                                                      "/sdapi/v1/options) before generating."))


@contextmanager
def checkpoint_kept(state):
    """Put back the checkpoint loaded when the body started if the body switched it (an X/Y/Z plot's Checkpoint
    name axis), even when it failed; a failed reload is logged and leaves the other loaded, as `checkpoint_for_job`."""
    before = state.holder.entry
    try:
        yield
    finally:
        if before is not None and state.holder.entry != before:
            try:
                state.switch_checkpoint(before.name, remember=False)
            except Exception:
                logger.exception("Could not load checkpoint %r back after a script switched to %r.", before.title,
                                 state.model_title)


def script_job(state, kind: str, params, script, config, *, save: bool, grid_save: bool, context: dict,
               checkpoint: CheckpointEntry | None = None, restore_checkpoint: bool = True,
               writing: InfotextWriting = PNG_ONLY) -> Callable:
    """The worker's run function for a selectable script (`pipelines.scripts`) with its checked `config`: the script
    runs with the worker's progress and controls, its samples are saved with `save`, its grids (as
    `<script's prefix>-NNNN.png`) with `grid_save`; a checkpoint the script switched to is put back."""

    def run(control, on_step) -> GenerationOutcome:
        from webui.interrogation import interrogation_models_held

        # Loopback may interrogate at every loop: its CLIP / DeepBooru load once for the job
        with checkpoint_for_job(state, checkpoint, restore=restore_checkpoint), checkpoint_kept(state), \
                vae_kept(state), interrogation_models_held(state):
            # The job's own checkpoint, read before the script may switch away from it: A1111's response info names
            # the checkpoint loaded again at the end, not the last one an X/Y/Z axis or an --sd_model line
            # switched to (each image's infotext still names the checkpoint that made it).
            entry, pipe = state.holder.entry, script_pipeline(state, kind, params)
            result = script.run(pipe, with_encoded_references(state, pipe, params), config, callback=on_step,
                                control=control, kind=kind,
                                switch_checkpoint=checkpoint_switcher(state, kind, params),
                                switch_vae=vae_switcher(state, kind, params), **context)
            if grid_save:
                result.save_grids(state.output_dir, writing)
            return finished(pipe, result, params, save=save, output_dir=state.output_dir, entry=entry,
                            writing=writing)

    return run
