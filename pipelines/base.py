"""What every SD pipeline shares: loading, the batch loop, LoRA application, seeds and infotext.

A concrete pipeline (text-to-image, image-to-image, inpaint) only says how a batch starts
(`_start_batch`: latents, timesteps and extra model inputs) and how it ends (`_finish_image`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, fields
from typing import Any

from mixkit.models.diffusion import DiffusionModel, ModelFamily
from pipelines.approx.freeu import freeu_call
from pipelines.approx.hypertile import hypertile_call
from pipelines.control import GenerationControl, StepCallback, StepProgress
from pipelines.generation import GenerationResult, ModelSession
from pipelines.inpaint_mask import is_inpainting_unet
from pipelines.params import GenerationLimits, Txt2ImgParams, per_image, uncond_skip_of, with_overrides
from pipelines.refiner import NEGATIVE_AESTHETIC_SCORE, POSITIVE_AESTHETIC_SCORE, RefinerRun, micro_conditioning
from pipelines.refiner_vae import refined_image_vae
from pipelines.rng_source import check_rng_source_device
from pipelines.sampling import SamplingRequest, run_sampler
from pipelines.seeds import (
    generator_seeds,
    image_generators,
    image_seeds,
    initial_noise,
    resolve_seed,
    seed_extras_infotext,
)
from pipelines.tiling import check_tiling_backend, seamless_tiling
from pipelines.vae_decode import decode_latents


@dataclass
class BatchStart:
    """How one batch begins: starting latents and the part of the schedule left to run."""

    latents: Any
    schedulers: list
    timesteps: Any = None  # None: the whole schedule
    steps: int | None = None  # steps this batch runs (img2img: fewer than params.steps)
    extra_channels: Any = None  # inpainting UNets: [B, 5, h, w] concatenated to the model input
    post_step: Any = None  # (latents, index) -> latents, e.g. keeping a hires pass's fixed latents
    mask_blend: Any = None  # pipelines.inpaint_blend.MaskBlend: where inpainting puts the original back
    unet_extra: Any = None  # (model_input, t, step_cond, step, row_owners) -> UNet kwargs (ControlNet residuals)
    image_guidance: Any = None  # pipelines.instruct_pix2pix.ImageGuidance: an ip2p model's Image CFG scale


def recommended_for(model: DiffusionModel, params_class) -> dict[str, Any]:
    """The model's recommended settings (`mixkit_generation.json`) that `params_class` has.

    Only keyword calls use them, for the settings the caller leaves out: a params object is
    complete by construction, so what it holds is what runs.
    """
    known = {f.name for f in fields(params_class)}
    return {name: value for name, value in model.recommended.generation_values().items() if name in known}


def params_from_keywords(model: DiffusionModel, params_class, keywords: dict[str, Any]):
    """A keyword call's params: what the caller passed, then the model's recommended settings, then its default
    size (`default_size`), then A1111's defaults."""
    values = {**recommended_for(model, params_class), **keywords}
    for name, side in default_size(model, values).items():
        values.setdefault(name, side)
    return params_class.from_kwargs(**values)


def default_size(model: DiffusionModel, keywords: dict[str, Any]) -> dict[str, int]:
    """The size a keyword call gets when it names none: an img2img call's first init image, rounded down to the
    VAE's grid (as diffusers' image processor does), else the model's native size (diffusers' default: 64 px for
    mixkit-tiny-sd, 512 for SD 1.5, 1024 for SDXL), where A1111's fixed 512 would be 8x the tiny model's work."""
    images = keywords.get("init_images")
    first = images[0] if isinstance(images, (list, tuple)) and images else None
    if hasattr(first, "size") and isinstance(first.size, tuple):
        width, height = init_image_size(first, model.vae_scale_factor)
        return {"width": width, "height": height}
    return {"width": model.native_size, "height": model.native_size}


def init_image_size(image, grid: int) -> tuple[int, int]:
    """An init image's upright size (an EXIF-rotated photo's, as the pipeline will see it) rounded down to the
    VAE's grid, at least one cell: img2img's default width and height."""
    from pipelines.image_prep import normalize_init_image

    upright = normalize_init_image(image).size
    width, height = (max(grid, side // grid * grid) for side in upright)
    return width, height


# diffusers `from_pretrained` keywords with no meaning in mixkit, and what to do instead.
DIFFUSERS_ONLY_KEYWORDS = {
    "subfolder": "pass the folder that holds model_index.json itself as the source",
    "cache_dir": "set HF_HUB_CACHE to the cache folder",
    "token": "log in with `hf auth login` or set HF_TOKEN",
    "safety_checker": "mixkit loads no safety checker: drop it",
    "requires_safety_checker": "mixkit loads no safety checker: drop it",
    "feature_extractor": "mixkit loads no feature extractor: drop it",
    "device_map": "pass device= (e.g. device='cuda')",
    "low_cpu_mem_usage": "mixkit always loads without a second copy of the weights: drop it",
    "force_download": "remove the model from the hub cache (`hf cache rm model/ORG/NAME`) to download it again",
}


def check_pipeline_keywords(cls, keywords: dict[str, Any], method: str = "from_pretrained") -> None:
    """Refuse keywords neither `method` (`from_pretrained`, `from_pipeline`) nor the pipeline takes, before the (slow)
    load, naming the valid ones."""
    import inspect

    load_names = [name for name, p in inspect.signature(getattr(cls, method)).parameters.items()
                  if p.kind is p.KEYWORD_ONLY]
    init_names = [name for name, p in inspect.signature(cls.__init__).parameters.items()
                  if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(keywords) - set(init_names))
    if unknown:
        hints = "".join(f"; {name}: {DIFFUSERS_ONLY_KEYWORDS[name]}" for name in unknown if name in DIFFUSERS_ONLY_KEYWORDS)
        raise TypeError(f"{cls.__name__}.{method} got unexpected keyword argument(s) {unknown}{hints}. "
                        f"Valid keywords: {', '.join(load_names + init_names)}.")


# The folders a `ModelSession` reads prompt tags and embeddings from (pipeline keywords of the same names)
SESSION_FOLDERS = ("embeddings_dir", "lora_dir", "hypernetwork_dir")


class DiffusionPipelineBase:
    params_class = Txt2ImgParams

    def __init__(self, model: DiffusionModel, *, limits: GenerationLimits | None = None,
                 embeddings_dir: str | os.PathLike | None = None, lora_dir: str | os.PathLike | None = None,
                 hypernetwork_dir: str | os.PathLike | None = None, session: ModelSession | None = None) -> None:
        self.model = model
        self.limits = limits or GenerationLimits()
        # hypernetwork_dir: A1111's --hypernetwork-dir, whose .pt files `<hypernet:name:strength>` tags apply
        self.session = session or ModelSession(model, embeddings_dir=embeddings_dir, lora_dir=lora_dir,
                                               hypernetwork_dir=hypernetwork_dir)

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike, *, dtype=None, device: str | None = None,
                        vae: str | os.PathLike | None = None, unet_dtype=None,
                        config_dir: str | os.PathLike | None = None, torch_dtype=None, variant: str | None = None,
                        use_safetensors: bool | None = None, local_files_only: bool = False,
                        revision: str | None = None, **kwargs: Any):
        """Load a diffusers folder, a single-file checkpoint or a hub id (see `load_diffusion_model`).

        `config_dir` (single files only) is a diffusers folder whose configs replace the shipped ones, for
        checkpoints of a non-standard architecture. For a performance preset, `**load_options_for(preset)`
        (pipelines.optimize) gives the dtypes that let it skip a float32 copy of the weights.

        diffusers' loading names mean here what they mean there: `torch_dtype` is `dtype`, `variant`,
        `use_safetensors`, `local_files_only` and `revision` choose the files. Every other keyword must be one the
        pipeline takes (`limits`, `embeddings_dir`, `lora_dir`, `hypernetwork_dir`, `session`); all are checked before
        the weights load."""
        from mixkit.models.diffusion.loading import load_diffusion_model

        check_pipeline_keywords(cls, kwargs)
        if torch_dtype is not None and dtype is not None:
            raise ValueError(f"dtype={dtype!r} and torch_dtype={torch_dtype!r} were both passed; torch_dtype is "
                             "diffusers' name for dtype: pass one")
        model = load_diffusion_model(source, dtype=torch_dtype if dtype is None else dtype, device=device, vae=vae,
                                     unet_dtype=unet_dtype, config_dir=config_dir, variant=variant,
                                     use_safetensors=use_safetensors, local_files_only=local_files_only,
                                     revision=revision)
        return cls(model, **kwargs)

    @classmethod
    def from_pipeline(cls, other: "DiffusionPipelineBase", **kwargs: Any):
        """Share another pipeline's loaded model and caches (no second copy of the weights).

        The pipeline keywords `from_pretrained` takes (`limits`, `embeddings_dir`, `lora_dir`, `hypernetwork_dir`,
        `session`) default to `other`'s. The folders belong to the session, so a new folder gives this pipeline a
        session of its own (same model, the other folder of the two kept, prompt-encoding caches not shared)."""
        check_pipeline_keywords(cls, kwargs, "from_pipeline")
        if not isinstance(other, DiffusionPipelineBase):
            raise TypeError(f"{cls.__name__}.from_pipeline takes a loaded mixkit pipeline (TextToImage, ImageToImage, "
                            f"...), got {type(other).__name__}; to load a model use {cls.__name__}.from_pretrained.")
        folders = {name: kwargs.pop(name) for name in SESSION_FOLDERS if name in kwargs}
        session = kwargs.pop("session", None)
        if folders and session is not None:
            raise ValueError(f"{cls.__name__}.from_pipeline got session= and {', '.join(folders)}=; the folders are "
                             "the session's: pass the session, or the folders (a new session is made for them).")
        if folders:
            folders = {"embeddings_dir": other.session.embeddings_dir, "lora_dir": other.session.lora_dir,
                       "hypernetwork_dir": other.session.hypernetwork_dir, **folders}
            session = ModelSession(other.model, **folders)
        return cls(other.model, limits=kwargs.get("limits", other.limits), session=session or other.session)

    # -- hooks for concrete pipelines --------------------------------------------------------
    def check_inputs(self, params) -> None:
        raise NotImplementedError

    def _prepare(self, params) -> Any:
        """Per-call work done once before the first batch (e.g. encoding input images); the
        returned state is handed to the other hooks, so a pipeline object holds no call state."""
        return None

    def _start_batch(self, params, state, sampler, generators: list, first_image: int) -> BatchStart:
        raise NotImplementedError

    def _finish_image(self, params, state, image, index: int):
        return image

    def _call_model_changes(self, params):
        """A context manager putting a mixin's per-call model changes on (IP-Adapter's layers) and taking them off
        however the call ends; entered after the checks, before `_prepare`."""
        return contextlib.nullcontext()

    def _hypernetwork_modules(self, state) -> tuple:
        """Models of the call besides the UNet whose attentions the prompt's hypernetworks reach (a ControlNet's)."""
        return ()

    def _finish_call(self, state, result: GenerationResult) -> None:
        """Hand what the call kept besides its images to the result (img2img: copies from before colour correction)."""

    hires_second_pass = False  # True for a hires fix's second pass (HyperTile's unet_hires switches it on)
    restores_faces = True  # False for a pass whose images go on to another (hires fix's first pass)

    def _restore_faces(self, params, image, index: int, result: GenerationResult):
        """A1111's Restore faces on a decoded image, before `_finish_image` (its paste-back), as process_images does."""
        if not (params.restore_faces and self.restores_faces):
            return image
        from pipelines.face_restoration import restore_faces

        if params.save_images_before_face_restoration:
            result.before_face_restoration[index] = image
        return restore_faces(image, params.face_restoration_model, params.code_former_weight,
                             unload=params.face_restoration_unload)

    def _infotext_extras(self, params) -> dict[str, Any]:
        return {}

    def _runs_refiner(self, params) -> bool:
        """Whether `params.refiner` finishes this pipeline's sampling (a hires fix's passes: as its
        `hires_fix_refiner_pass` says)."""
        return True

    def _refiner_infotext(self, params) -> dict[str, Any]:
        """Keys written, before the refiner's own, on images the refiner worked on (a hires fix's `Hires refiner`)."""
        return {}

    def _schedule_steps(self, params, sampler) -> tuple[int, int | None]:
        """(steps the prompt schedules count in, first pass's steps or None) for `prepared.plan`.

        Schedules ([a:b:when]) count in params.steps, as the WebUI does even for img2img, times two for
        second-order samplers: A1111 builds them over `total_steps` and counts model calls. A hires-fix second
        pass returns the first pass's steps too, so its schedules get A1111's hires offsets.
        """
        return params.steps * sampler.calls_per_step, None

    # -- the shared recipe ------------------------------------------------------------------
    def __call__(self, params=None, *, callback: StepCallback | None = None,
                 control: GenerationControl | None = None, generator=None, **kwargs: Any) -> GenerationResult:
        # 1. Check inputs before any work
        if params is None:
            params = params_from_keywords(self.model, self.params_class, kwargs)
        else:  # a copy: the checks normalise spellings in place, and the caller's object stays as given
            params = with_overrides(params, kwargs)
        self.check_inputs(params)
        check_rng_source_device(params.rng_source, self.model.device)  # GPU noise only where it is the CPU's
        params.subseed = resolve_seed(params.subseed)  # A1111's get_fixed_seed(p.subseed), used or not
        if params.refiner is not None and self._runs_refiner(params):
            from pipelines.refiner_optimization import check_refiner_optimization

            check_refiner_optimization(self.model, params.refiner)
        control = control or GenerationControl()
        sampler = self.session.resolve_sampler(params.sampler, params.schedule_type, params.eta,
                                               params.sampler_parameters)
        seeds, generators = self._seeds_and_generators(params, generator)
        prompts = per_image(params.prompt, params.batch_size)
        negatives = per_image(params.negative_prompt, params.batch_size)
        # A1111's Tiling: circular padding in the UNet and VAE for this call only (the init image's encode too)
        if params.tiling:
            check_tiling_backend(self.model)
        # Approximate per-call speed-ups and tweaks (pipelines.approx): A1111's Hypertile, FreeU; removed afterwards
        with seamless_tiling(self.model.unet, self.model.vae, enabled=params.tiling), \
                hypertile_call(self.model, params.hypertile, seeds[0], hires_second_pass=self.hires_second_pass), \
                freeu_call(self.model, params.freeu), self._call_model_changes(params):
            state = self._prepare(params)

            # 2. Apply LoRAs (from params and prompt tags) for this call only
            result = GenerationResult()
            with self.session.prepared(prompts, negatives, params.loras, params.clip_skip, emphasis=params.emphasis,
                                       comma_backtrack=params.comma_padding_backtrack,
                                       sdxl_clip_l_skip=params.sdxl_clip_l_skip,
                                       hypernetwork_modules=self._hypernetwork_modules(state)) as prepared, \
                    contextlib.ExitStack() as refiner_stack:
                refiner = None
                if params.refiner is not None and self._runs_refiner(params):
                    refiner = RefinerRun(params, self.session, refiner_stack, prompts, negatives)
                for batch_index in range(params.batch_count):
                    if control.interrupted:
                        break
                    first = batch_index * params.batch_size
                    batch_seeds = seeds[first:first + params.batch_size]
                    batch_generators = generators[first:first + params.batch_size]
                    # 3. Prepare latents and conditioning (encodings are cached across batches)
                    start = self._start_batch(params, state, sampler, batch_generators, first)
                    if params.ensd and sampler.takes_seed_delta:  # A1111's ENSD: later noise from seed + delta
                        batch_generators = image_generators([seed + params.ensd for seed in batch_seeds],
                                                            params.rng_source)
                    steps = params.steps if start.steps is None else start.steps
                    plan_arguments = (*self._schedule_steps(params, sampler), sampler.cond_padding,
                                      params.use_old_scheduling)
                    plan = prepared.plan(*plan_arguments)
                    # A1111's Refiner: loaded, and the prompts encoded for it, only if this batch reaches the switch
                    switch = None if refiner is None else refiner.switch_for(
                        start.schedulers, start.timesteps, plan_arguments,
                        self._conditioning_size(params), len(batch_seeds), steps * sampler.calls_per_step)

                    # 4. Denoise
                    def on_step(done: int, current, batch_index=batch_index) -> bool:
                        if callback is not None:
                            callback(StepProgress(done, steps, batch_index, params.batch_count, current, control))
                        return not (control.interrupted or control.take_skip())

                    request = SamplingRequest(
                        unet=self.model.unet, schedulers=start.schedulers, latents=start.latents, plan=plan,
                        combine_cfg=prepared.combine_cfg, cfg_scale=float(params.cfg_scale), generators=batch_generators,
                        steps=steps, timesteps=start.timesteps,
                        time_ids=self._time_ids(params, len(batch_seeds)),
                        negative_time_ids=self._negative_time_ids(params, len(batch_seeds)),
                        extra_channels=start.extra_channels,
                        post_step=start.post_step, mask_blend=start.mask_blend, unet_extra=start.unet_extra,
                        on_step=on_step,
                        uncond_skip=uncond_skip_of(params), refiner=switch, image_guidance=start.image_guidance,
                    )
                    if switch is None:
                        latents = run_sampler(request)
                    else:  # one UNet on the device at a time; the base UNet is back in place when the batch ends
                        refiner_model = refiner.session.model
                        with self.session.refiner_slot.swapped(self.model, refiner_model) as enter, \
                                seamless_tiling(refiner_model.unet, refiner_model.vae, enabled=params.tiling):
                            switch.enter = enter
                            latents = run_sampler(request)
                    # 5. Decode, finish (e.g. paste back) and describe
                    extras = {**self._infotext_extras(params), **prepared.infotext_extras(params.infotext_options)}
                    if switch is None or not switch.entered:  # an interrupt before the switch: the base model's image
                        images = decode_latents(self.model.vae, latents)
                    else:  # A1111 decodes with the checkpoint loaded then: the refiner (pipelines.refiner_vae)
                        extras.update({**self._refiner_infotext(params), **refiner.infotext()})
                        with refined_image_vae(self.model, refiner.session.model) as vae, \
                                seamless_tiling(vae, enabled=params.tiling):
                            images = decode_latents(vae, latents)
                    for k, image in enumerate(images):
                        image_extras = {**extras, **seed_extras_infotext(params, first + k)}
                        infotext = self.session.infotext(params, sampler, prompt=prompts[k], negative_prompt=negatives[k],
                                                         seed=batch_seeds[k], extra=image_extras)
                        image = self._restore_faces(params, image, len(result.images), result)
                        result.add(self._finish_image(params, state, image, first + k), batch_seeds[k], infotext)
            self._finish_call(state, result)
            result.interrupted = control.interrupted
            result.subseed = params.subseed
            result.inpainting_conditioning = is_inpainting_unet(self.model.unet)
            return result

    def _seeds_and_generators(self, params, generator):
        """(seed, generator) per image: from `seed=` (A1111's seed + k), or from `generator=` (`generator_seeds`).

        With RNG source NV a caller's torch generators stand for their seeds (`generator_seeds`), and each image
        draws from a Philox generator of its seed, so the recorded seed reproduces it."""
        total = params.total_images
        if generator is None:
            seeds = image_seeds(resolve_seed(params.seed), total, params.subseed_strength)
            return seeds, image_generators(seeds, params.rng_source)
        if params.seed != -1:
            raise ValueError(f"seed={params.seed} and generator= were both given; the generator decides the noise "
                             "and the recorded seeds, so pass only one of them")
        seeds, generators = generator_seeds(generator, total, params.subseed_strength)
        return seeds, image_generators(seeds, "NV") if params.rng_source == "NV" else generators

    def _initial_noise(self, params, generators: list, first_image: int):
        """The batch's initial noise on the model's device, with A1111's Extra seed options (`initial_noise`).

        Image `first_image + k` of the call uses variation seed subseed + first_image + k, as A1111's
        all_subseeds; the resize size is in pixels, drawn at that size // the VAE factor (A1111's // 8)."""
        factor = self.model.vae_scale_factor
        resize = None
        if params.seed_resize_from_w and params.seed_resize_from_h:
            resize = (params.seed_resize_from_h // factor, params.seed_resize_from_w // factor)
        subseeds = [params.subseed + first_image + k for k in range(len(generators))]
        noise = initial_noise(generators, self._latent_shape(params), subseeds, params.subseed_strength, resize)
        return noise.to(self.model.device)

    def _conditioning_size(self, params) -> tuple[int, int]:
        """(width, height) the SDXL micro-conditioning states (a hires pass: its size before cropping)."""
        return params.width, params.height

    def _time_ids(self, params, batch: int):
        """SDXL micro-conditioning, as the WebUI sends it: original size, crop (0, 0), then the target size (SDXL
        base) or the prompt's aesthetic score (SDXL refiner); None for SD 1.x/2.x."""
        width, height = self._conditioning_size(params)
        return micro_conditioning(self.model.family, width, height, batch, POSITIVE_AESTHETIC_SCORE)

    def _negative_time_ids(self, params, batch: int):
        """The negative prompt's micro-conditioning where it differs (the SDXL refiner's low aesthetic score)."""
        if self.model.family is not ModelFamily.SDXL_REFINER:
            return None
        width, height = self._conditioning_size(params)
        return micro_conditioning(self.model.family, width, height, batch, NEGATIVE_AESTHETIC_SCORE)

    def _latent_shape(self, params) -> tuple[int, int, int]:
        factor = self.model.vae_scale_factor
        return (self.model.vae.config.latent_channels, params.height // factor, params.width // factor)
