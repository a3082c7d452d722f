"""A1111's Refiner: a second checkpoint takes over the denoising loop for its last steps.

A1111 (`sd_samplers_common.apply_refiner`, `processing_scripts/refiner.py`) keeps the sampler, its sigmas and
its history, and before each model call measures how far the schedule has come: by default from the noise
level, as `(999 - t) / 1000` with `t` the training timestep whose sigma is nearest to the current one, or, with
its Settings > Compatibility "Switch to refiner by sampling steps" (`refiner_switch_by_sample_steps`, off by
default; `sample_steps_switch_index`), as model calls made / `total_steps`. At the first call where that
ratio reaches `refiner_switch_at` it loads the refiner, re-encodes the prompts with the refiner's own text
encoder(s) (`p.setup_conds()`) and lets the refiner's UNet predict every remaining call. When no call reaches
the ratio the refiner is never loaded and the infotext does not name it: the image is the base model's alone.
In a hires fix the refiner runs in the pass(es) `HiresParams.hires_fix_refiner_pass` names (A1111's option: "second
pass" by default, "first pass" or "both passes"), switching in each at `refiner_switch_at` of that pass's schedule;
the hires pass always starts on the base model (A1111 reloads it before `sample_hr_pass`).

The schedule is known before sampling, so here the switching call is computed up front (`switch_index`), the
refiner is loaded only for a batch that reaches it, and the refiner's conditioning is encoded before the loop.
DPM adaptive decides its calls as it walks; its switch is tested call by call, as A1111's (`walk_switch_rule`).
Memory: as A1111 (one model on the device at a time), a refiner on an accelerator waits on the CPU; at the
switch the base UNet moves to the CPU and the refiner's UNet to the device, and back when the batch ends.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
from typing import Any

from mixkit.models.diffusion import DiffusionModel, ModelFamily

DEFAULT_SWITCH_AT = 0.8  # A1111's "Switch at" slider default
# SDXL refiner micro-conditioning (diffusers' StableDiffusionXLImg2ImgPipeline defaults, and A1111's
# sdxl_refiner_high_aesthetic_score / sdxl_refiner_low_aesthetic_score): the prompt's rows are conditioned on a
# high aesthetic score, the negative prompt's on a low one.
POSITIVE_AESTHETIC_SCORE = 6.0
NEGATIVE_AESTHETIC_SCORE = 2.5


def check_refiner_params(refiner: Any, switch_at: Any, by_sample_steps: Any = False, config_dir: Any = None) -> None:
    """`refiner` is None, a model source (path, hub id) or a loaded DiffusionModel/pipeline; `switch_at` in (0, 1);
    `by_sample_steps` (A1111's `refiner_switch_by_sample_steps`) a bool; `config_dir` (`refiner_config_dir`) None or
    the configs folder of a single-file refiner (`pipelines.refiner_configs.check_refiner_config_dir`); a refiner
    folder must hold what loading it reads (`pipelines.refiner_folders.check_refiner_folder`). Without a
    refiner `switch_at` is unused (A1111 ignores it then), so it is checked only with one: a plot axis that sets a
    refiner has it checked per cell."""
    if refiner is not None and not isinstance(refiner, (str, os.PathLike, DiffusionModel)) \
            and not isinstance(getattr(refiner, "model", None), DiffusionModel):
        raise TypeError(f"refiner must be None, a model path / hub id, or a loaded DiffusionModel or pipeline, got "
                        f"{type(refiner).__name__}.")
    if isinstance(refiner, str) and not refiner.strip():
        raise ValueError("refiner is an empty string; pass None for no refiner, or a model path / hub id.")
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    bad_switch = isinstance(switch_at, bool) or not isinstance(switch_at, (int, float)) or not 0 < switch_at < 1
    if refiner is not None and bad_switch:
        raise ValueError(f"refiner_switch_at must be a number strictly between 0 and 1 (the fraction of the schedule "
                         f"the base model runs before the refiner takes over; A1111's default {DEFAULT_SWITCH_AT}), "
                         f"got {switch_at!r}.")
    if not isinstance(by_sample_steps, bool):
        raise TypeError(f"refiner_switch_by_sample_steps must be True or False (A1111's Settings > Compatibility "
                        f"'Switch to refiner by sampling steps instead of model timesteps'), got {by_sample_steps!r}.")
    from pipelines.refiner_configs import check_refiner_config_dir
    from pipelines.refiner_folders import check_refiner_folder

    check_refiner_config_dir(refiner, config_dir)
    check_refiner_folder(refiner)  # a folder that cannot load (configs only, parts missing): now, not at the switch


def switch_index(alphas_cumprod, timesteps, switch_at: float) -> int | None:
    """The first model call (index into `timesteps`) the refiner makes, or None when none reaches `switch_at`.

    A1111's ratio for a call is `(T - 1 - t) / T` (T = 1000 training steps), `t` being the training timestep whose
    sigma is nearest to the call's (k-diffusion's `sigma_to_t` rounded); fractional timesteps of interpolated
    schedules (Karras, exponential) are mapped through their sigma the same way.
    """
    from pipelines.uncond_skip import timestep_sigmas

    if len(timesteps) == 0:
        return None
    for index, sigma in enumerate(timestep_sigmas(alphas_cumprod, timesteps)):
        if switch_ratio(alphas_cumprod, sigma) >= switch_at:
            return index
    return None


def switch_ratio(alphas_cumprod, sigma: float) -> float:
    """A1111's completed ratio of a model call at noise level `sigma`: `(T - 1 - t) / T`, `t` the training timestep
    whose sigma is nearest."""
    import torch

    alphas = alphas_cumprod.to(torch.float64)
    train_sigmas = ((1 - alphas) / alphas).sqrt()
    total = len(alphas)
    return (total - 1 - int(torch.argmin((train_sigmas - float(sigma)).abs()))) / total


def walk_switch_rule(scheduler, total_steps: int, switch_at: float, by_sample_steps: bool):
    """For a sampler that decides its calls as it goes (DPM adaptive): `(call index, call sigma) -> whether the
    refiner takes over there`, A1111's `apply_refiner` test made call by call; None when no call can reach
    `switch_at` (by noise level: not even the walk's last sigma, `sigma_min`), so the refiner is not loaded."""
    if by_sample_steps:
        return lambda index, sigma: index / total_steps >= switch_at
    alphas = scheduler.alphas_cumprod
    if switch_ratio(alphas, scheduler.sigma_min) < switch_at:
        return None
    return lambda index, sigma: switch_ratio(alphas, sigma) >= switch_at


def sample_steps_switch_index(calls: int, total_steps: int, switch_at: float) -> int | None:
    """The first of `calls` model calls the refiner makes when switching by sampling steps, or None.

    A1111's `apply_refiner` with `refiner_switch_by_sample_steps` reads call `i` (counted from 0 in this sampling run)
    as `i / total_steps`, `total_steps` being its `CFGDenoiser.total_steps`: the steps this run makes (txt2img's
    `steps`; an img2img or hires pass's `t_enc + 1`, the tail its denoising strength leaves) times 2 for
    second-order samplers, which make one call fewer than that (Heun's last step is an Euler one)."""
    for index in range(calls):
        if index / total_steps >= switch_at:
            return index
    return None


def refiner_label(model: DiffusionModel) -> str:
    """A1111's `Refiner:` value, the checkpoint's short title: `name [shorthash]`, or the name without a hash."""
    return f"{model.name} [{model.model_hash}]" if model.model_hash else model.name


def check_refiner_fits(base: DiffusionModel, refiner: DiffusionModel) -> None:
    """The refiner must denoise the base model's latents: same latent channels and prediction type, a text-to-image
    (4-channel) UNet."""
    base_channels = base.vae.config.latent_channels
    channels = refiner.vae.config.latent_channels
    if channels != base_channels:
        raise ValueError(f"refiner {refiner_label(refiner)!r} works on {channels}-channel latents but the model "
                         f"{base.name!r} makes {base_channels}-channel ones; pick a refiner of a family with the same "
                         "latent space (SD 1.x, 2.x, SDXL and the SDXL refiner all use 4 channels).")
    if refiner.prediction_type != base.prediction_type:
        # The sampler's steps read the UNet's output as the base model's parameterization (A1111's denoiser wraps
        # each model in its own; here both share one sampler), so an epsilon refiner cannot finish a v model.
        raise ValueError(f"refiner {refiner_label(refiner)!r} predicts {refiner.prediction_type} but the model "
                         f"{base.name!r} predicts {base.prediction_type}; pick a refiner with the same prediction "
                         "type.")
    unet_in = getattr(refiner.unet.config, "in_channels", channels)
    if unet_in != channels:
        raise ValueError(f"refiner {refiner_label(refiner)!r} has a {unet_in}-channel UNet (an inpainting or "
                         "instruct-pix2pix model) whose extra input channels nothing here feeds; pick a text-to-image "
                         "checkpoint as the refiner.")


def micro_conditioning(family: ModelFamily, width: int, height: int, batch: int, score: float):
    """SDXL's time ids per image: SDXL base's (size, crop, size) or the SDXL refiner's (size, crop, aesthetic
    score), as A1111's sgm conditioner gives each model (crop 0, 0: its sdxl_crop_top/left defaults); None for
    SD 1.x/2.x."""
    import torch

    if family is ModelFamily.SDXL:
        row = [height, width, 0, 0, height, width]
    elif family is ModelFamily.SDXL_REFINER:
        row = [height, width, 0, 0, score]
    else:
        return None
    return torch.tensor([row] * batch, dtype=torch.float32)


@dataclass
class RefinerSwitch:
    """What changes at model call `at` (or, for a sampler whose calls are not planned, at the first call `reached`
    accepts): the UNet, its conditioning plan and micro-conditioning.

    `enter` runs once, just before the refiner's first call (moving the UNets, see `RefinerSlot.swapped`);
    `entered` says whether that call came (a batch interrupted before it is the base model's alone)."""

    at: int | None
    unet: Any
    plan: Any
    time_ids: Any = None
    negative_time_ids: Any = None
    enter: Any = None
    entered: bool = False
    reached: Any = None  # (call index, call sigma) -> bool, when `at` is None (`walk_switch_rule`)

    def due(self, index: int, scheduler) -> bool:
        """Whether the refiner takes over at model call `index` (`scheduler`: the batch's first, whose `call_sigma`
        is the call's noise level when the calls are not planned)."""
        if self.entered:
            return False
        if self.at is not None:
            return index == self.at
        return self.reached(index, float(scheduler.call_sigma))

    def applied_to(self, request):
        """`request` (a SamplingRequest) as the refiner runs it. Extra inputs made for the base UNet (an
        inpainting UNet's mask channels, ControlNet residuals) do not fit another UNet and are left out; so does
        sd-webui-controlnet, whose hook sits on the UNet loaded when the generation starts, not on the refiner's."""
        self.entered = True
        if self.enter is not None:
            self.enter()
        return replace(request, unet=self.unet, plan=self.plan, time_ids=self.time_ids,
                       negative_time_ids=self.negative_time_ids, extra_channels=None, unet_extra=None)


class RefinerSlot:
    """The one refiner a model session keeps loaded, with its own prompt-encoding session.

    Loading another refiner drops the previous one. A refiner given as a loaded model is used as it is."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._session = None

    def session(self, refiner: Any, base_session, config_dir: Any = None):
        """The ModelSession of `refiner` (loaded on first use, like the base model: same dtypes, on the CPU when
        the base model is on an accelerator), sharing the base session's embeddings and LoRA folders; a single-file
        refiner is read with `config_dir` (the call's checked `refiner_config_dir`) when given."""
        from pipelines.generation import ModelSession
        from pipelines.refiner_configs import refiner_config_options
        from pipelines.refiner_vae import refiner_load_options

        base = base_session.model
        model = refiner if isinstance(refiner, DiffusionModel) else getattr(refiner, "model", None)
        options = refiner_load_options(base)  # the VAE setting "None": its built-in VAE, not the file next to it
        if model is None:
            # a single file: its refiner_config_dir, else the base model's config_dir
            options.update(refiner_config_options(base, refiner, config_dir))
        key = ("object", id(model)) if model is not None else ("source", str(refiner), base.unet.dtype,
                                                               base.text_encoders[0].dtype, tuple(options.items()))
        if key != self._key:
            self._key, self._session = None, None  # the previous refiner is dropped before the next one loads
            if model is None:
                from mixkit.errors import ConfigMismatchError
                from mixkit.models.diffusion.loading import load_diffusion_model
                from pipelines.refiner_configs import (RefinerConfigMismatchError, refiner_configs_advice,
                                                       refiner_configs_read_with)

                try:
                    model = load_diffusion_model(refiner, dtype=base.text_encoders[0].dtype,
                                                 unet_dtype=base.unet.dtype, device="cpu", **options)
                except ConfigMismatchError as error:
                    # the loader's advice is about config_dir / --config-dir, which set the base model's configs
                    # here; say what reaches a refiner's (and which configs were read, for a caller's own advice)
                    advice = refiner_configs_advice(refiner, base, config_dir)
                    read_with, _ = refiner_configs_read_with(refiner, base, config_dir)
                    raise RefinerConfigMismatchError(error.mismatch, advice, read_with) from None
            check_refiner_fits(base, model)
            self._session = ModelSession(model, embeddings_dir=base_session.embeddings_dir,
                                         lora_dir=base_session.lora_dir,
                                         hypernetwork_dir=base_session.hypernetwork_dir)
            self._key = key
        return self._session

    @contextlib.contextmanager
    def swapped(self, base: DiffusionModel, refiner: DiffusionModel):
        """Yields `enter()`, which puts the refiner's UNet where the base UNet runs and the base UNet on the CPU
        (nothing moves when the base model is on the CPU); on exit each goes back where it was."""
        base_device, refiner_device = base.unet.device, refiner.unet.device
        moved = []

        def enter() -> None:
            if base_device.type == "cpu" and refiner_device.type == "cpu":
                return
            if base.unet is not refiner.unet:
                base.unet.to("cpu")
                moved.append((base.unet, base_device))
            refiner.unet.to(base_device)
            moved.append((refiner.unet, refiner_device))

        try:
            yield enter
        finally:
            for unet, device in reversed(moved):  # the refiner leaves the device before the base UNet returns
                unet.to(device)


class RefinerRun:
    """One pipeline call's refiner: loaded, and the prompts encoded by its text encoder(s), on the first batch that
    reaches the switch; its LoRAs (from params and prompt tags) stay applied until `stack` closes."""

    def __init__(self, params, base_session, stack: contextlib.ExitStack, prompts: list[str],
                 negatives: list[str]) -> None:
        self.params = params
        self.base_session = base_session
        self.stack = stack
        self.prompts, self.negatives = prompts, negatives
        self._prepared = None
        self.session = None

    def switch_for(self, schedulers: list, timesteps, schedule_steps: tuple, size: tuple[int, int],
                   batch: int, total_steps: int) -> RefinerSwitch | None:
        """The switch for a batch running `timesteps` (None: the base model runs them all); `schedule_steps` are
        the base plan's `prepared.plan` arguments, `size` the (width, height) its micro-conditioning states,
        `total_steps` A1111's count of model calls for this run (steps run x calls per step)."""
        from pipelines.samplers.dpm_adaptive import calls_depend_on_the_sample

        if self._is_the_base_model():
            return None
        if timesteps is None:
            timesteps = schedulers[0].timesteps
        switch_at = float(self.params.refiner_switch_at)
        by_steps = self.params.refiner_switch_by_sample_steps
        at = reached = None
        if calls_depend_on_the_sample(schedulers[0]):  # DPM adaptive
            reached = walk_switch_rule(schedulers[0], total_steps, switch_at, by_steps)
            if reached is None:
                return None
        elif by_steps:
            at = sample_steps_switch_index(len(timesteps), total_steps, switch_at)
        else:
            at = switch_index(schedulers[0].alphas_cumprod, timesteps, switch_at)
        if at is None and reached is None:
            return None
        prepared = self._prepare()
        model = self.session.model
        width, height = size
        return RefinerSwitch(
            at=at, reached=reached, unet=model.unet, plan=prepared.plan(*schedule_steps),
            time_ids=micro_conditioning(model.family, width, height, batch, POSITIVE_AESTHETIC_SCORE),
            negative_time_ids=micro_conditioning(model.family, width, height, batch, NEGATIVE_AESTHETIC_SCORE)
            if model.family is ModelFamily.SDXL_REFINER else None)

    def _is_the_base_model(self) -> bool:
        """Whether the refiner is the model already sampling: A1111 then has nothing to switch to, and writes no
        Refiner keys (`apply_refiner` returns when the loaded checkpoint is the refiner's)."""
        from pathlib import Path

        refiner, base = self.params.refiner, self.base_session.model
        if refiner is base or getattr(refiner, "model", None) is base:
            return True
        if not isinstance(refiner, (str, os.PathLike)):
            return False
        given, own = Path(refiner), Path(base.source)
        return given.exists() and own.exists() and given.resolve() == own.resolve()

    def infotext(self) -> dict[str, Any]:
        """A1111's keys, written only for an image the refiner worked on."""
        return {"Refiner": refiner_label(self.session.model), "Refiner switch at": self.params.refiner_switch_at}

    def _prepare(self):
        if self._prepared is None:
            params = self.params
            self.session = self.base_session.refiner_slot.session(params.refiner, self.base_session,
                                                                  params.refiner_config_dir)
            # A1111 leaves the call's networks active when the refiner loads and re-encodes the prompts for it; its
            # Lora extension then patches each refiner layer that carries a network's layer name and fits its shape
            # (a mismatched shape is skipped and counted in "Networks with errors"). So each LoRA acts here on the
            # refiner's layers it fits, and the rest of it is left out with a warning.
            self._prepared = self.stack.enter_context(self.session.prepared(
                self.prompts, self.negatives, params.loras, params.clip_skip, emphasis=params.emphasis,
                comma_backtrack=params.comma_padding_backtrack, sdxl_clip_l_skip=params.sdxl_clip_l_skip,
                partial_loras=True))
            self._warn_left_out(self._prepared.left_out_loras())
        return self._prepared

    def _warn_left_out(self, left_out: dict[str, tuple[int, list[str]]]) -> None:
        import warnings

        from mixkit.lora.errors import list_for_humans

        for name, (applied, keys) in left_out.items():
            acts = f"acts on {applied} of its modules" if applied else "fits none of its layers and does not act"
            warnings.warn(f"LoRA {name!r} on the refiner {refiner_label(self.session.model)!r}: {acts} (A1111 patches "
                          f"the layers a LoRA fits); left out: {list_for_humans(keys, 6)}", UserWarning, stacklevel=5)
