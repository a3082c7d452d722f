"""Generation parameters and their limits, validated once at the pipeline's entry point.

The same dataclasses feed the CLI flags, the web UI widgets and the HTTP API, so a limit is
defined here and nowhere else.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any

from mixkit.prompts.limits import MAX_PROMPT_CHARS
from pipelines.infotext_options import INFOTEXT_OPTION_DEFAULTS, InfotextOptions
from pipelines.sampler_parameters import SamplerParameters

# A1111 takes any integer seed (random ones are drawn below 2**32, and image k of a batch uses seed + k, past 2**32
# without wrapping); the bound is the largest integer JSON and browsers carry exactly, far above any real seed.
SEED_MAX = 2**53 - 1
RANDOM_SEED_MAX = 2**32 - 1  # what -1 draws from, as A1111
CLIP_SKIP_MAX = 12  # A1111's Clip skip slider: SD 1.x's text encoder has 12 layers
# GenerationLimits.max_script_images' default: far above any plot or list a person reads through (X/Y/Z's 1,000
# cells at batch 8), far below what the scripts' own caps let through
DEFAULT_MAX_SCRIPT_IMAGES = 10_000


@dataclass(frozen=True)
class GenerationLimits:
    """Upper bounds that protect the process (memory, time); adjustable by the operator."""

    max_side: int = 4096
    max_pixels: int = 2048 * 2048  # per image; 4096x4096 would need ~10 GB of UNet activations in fp32
    max_steps: int = 1000
    max_batch_size: int = 16
    max_batch_count: int = 100
    max_cfg_scale: float = 100.0
    # The prompt encoder's own bound (mixkit.prompts.limits), so a prompt the pipeline accepts always encodes;
    # an operator may lower it, not raise it.
    max_prompt_chars: int = MAX_PROMPT_CHARS
    # `AND` parts of one prompt: each is one more UNet evaluation per step and image (as a batch entry is), so 3,000
    # of them in one 15,000-character prompt held the worker for a minute on a 2 MB model (A1111 sets no bound).
    # Regional-prompting layouts use a handful.
    max_and_parts: int = 32
    # Images one selectable script job (X/Y/Z plot, Prompt matrix, Prompts from file, Loopback, SD upscale) may
    # generate in all, checked from its plan before the first one (pipelines.scripts.image_budget). Each script's own
    # caps still leave millions (1,000 list lines x batch 16 x count 100), each holding the one queue for hours.
    max_script_images: int = DEFAULT_MAX_SCRIPT_IMAGES

    def __post_init__(self) -> None:
        value = self.max_prompt_chars
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROMPT_CHARS:
            raise ValueError(f"GenerationLimits.max_prompt_chars must be an int in [1, {MAX_PROMPT_CHARS}] (the prompt "
                             f"encoder's limit, mixkit.prompts.limits.MAX_PROMPT_CHARS), got {value!r}.")
        check_max_script_images("GenerationLimits.max_script_images", self.max_script_images)


def check_max_script_images(name: str, value: Any) -> int:
    """A script-image cap as given (`name`: where it came from, for the error): a whole number of at least 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a whole number of images of at least 1, got {value!r}.")
    return int(value)


@dataclass
class Txt2ImgParams:
    """Everything that decides a text-to-image result, with A1111 WebUI's defaults."""

    prompt: str | list[str] = ""
    negative_prompt: str | list[str] = ""
    steps: int = 20
    cfg_scale: float = 7.0
    width: int = 512
    height: int = 512
    seed: int = -1
    # A1111's "Extra" seed options (pipelines.seeds.initial_noise): a variation seed (-1: random; image k uses
    # subseed + k) whose noise is slerped in by subseed_strength (0: off; 1: the variation seed's own noise; with
    # a variation every image keeps `seed`), and "Resize seed from" width x height (0: off; one side 0: off, as A1111).
    subseed: int = -1
    subseed_strength: float = 0.0
    seed_resize_from_w: int = 0
    seed_resize_from_h: int = 0
    batch_size: int = 1
    batch_count: int = 1
    sampler: str = "DPM++ 2M"
    schedule_type: str = "Automatic"
    eta: float | None = None  # A1111's eta (ancestral samplers 1, DDIM 0 when None); ignored by samplers without one
    # A1111's "Eta noise seed delta" (ENSD; 31337 in NovelAI-style infotexts): noise after the initial latents is
    # drawn from seed + ensd, so ancestral samplers' images change (0: the same generator continues).
    ensd: int = 0
    # A1111's "Random number generator source" (randn_source; pipelines.rng_source): "CPU" (mixkit's default: CPU
    # torch generators), "NV" (NVIDIA's GPU noise drawn with Philox on the CPU, the same on any machine) or "GPU"
    # (only on a model on the CPU, where it is the CPU noise). The infotext's "RNG".
    rng_source: str = "CPU"
    clip_skip: int = 1
    # A1111's "Emphasis mode" setting: "Original" (weights, then the mean restored), "No norm", "Ignore", "None";
    # written to the infotext as "Emphasis" when not "Original" and the prompt has brackets.
    emphasis: str = "Original"
    # A1111's "Prompt word wrap length limit" (comma_padding_backtrack), in tokens; 0 turns the comma rule off.
    comma_padding_backtrack: int = 20
    # A1111's "Clip skip SDXL" (sdxl_clip_l_skip, off by default): on SDXL, clip_skip also moves CLIP-L's layer
    # (OpenCLIP-G keeps its penultimate one); no effect on SD 1.x/2.x. A Setting in A1111, not in the infotext.
    sdxl_clip_l_skip: bool = False
    loras: list = field(default_factory=list)
    # Approximate speed-ups that leave out the negative prompt on some steps (pipelines.uncond_skip;
    # A1111's names and semantics): NGMS sigma, NGMS on every step below it, Skip Early CFG fraction.
    s_min_uncond: float = 0.0
    s_min_uncond_all: bool = False
    skip_early_cond: float = 0.0
    # A1111's Refiner (pipelines.refiner): another checkpoint (path, hub id or loaded model) predicts the calls whose
    # completed fraction of the schedule (by noise level) reaches refiner_switch_at. None: no refiner.
    refiner: Any = None
    refiner_switch_at: float = 0.8
    # The configs folder (a diffusers model folder) a single-file `refiner` is read with, when the base model's
    # config_dir does not describe it (pipelines.refiner_configs). None: the base's config_dir or the shipped configs.
    refiner_config_dir: Any = None
    # A1111's Settings > Compatibility "Switch to refiner by sampling steps instead of model timesteps": the completed
    # fraction is model calls made / the run's steps instead (infotext "Refiner switch by sampling steps: True").
    refiner_switch_by_sample_steps: bool = False
    # A1111's Settings > Compatibility "Use old prompt editing timelines" (use_old_scheduling): in `[a:b:N]` an N
    # below 1 is a fraction of the steps and any other N a step number, and a hires pass counts in the first pass's
    # steps without offsets (mixkit.prompts.scheduling.StepCounting). Infotext "Old prompt editing timelines: True"
    # when it changed a schedule.
    use_old_scheduling: bool = False
    # A1111's Settings > Sampler parameters: schedule min/max sigma and rho, Euler/Heun/DPM2 churn, forced discard of
    # the penultimate sigma (pipelines.sampler_parameters; the defaults run every sampler unchanged).
    sampler_parameters: SamplerParameters = field(default_factory=SamplerParameters)
    # A1111's Settings > img2img "Inpainting conditioning mask strength" (infotext "Conditional mask weight"), for
    # inpainting checkpoints (9-channel UNets) only: the conditioning image is the init image with its masked area
    # faded to grey by this much (1: fully grey, the default; 0: the whole init image). Read by img2img and hires
    # fix's second pass; a txt2img first pass has no init image and conditions on grey, as A1111's.
    inpainting_mask_weight: float = 1.0
    # A1111's "Tiling" (Settings, request field `tiling`, infotext "Tiling: True"): the UNet's and VAE's convolutions
    # pad circularly, so the picture tiles seamlessly (pipelines.tiling).
    tiling: bool = False
    # A1111's Hypertile (Settings > Hypertile; infotext "Hypertile U-Net: True" ...): self-attention run in tiles, an
    # approximate speed-up for large images (pipelines.approx.hypertile). None: off; a dict of HyperTile's fields is
    # taken too.
    hypertile: Any = None
    # diffusers' FreeU (`pipelines.approx.freeu.FreeU(b1, b2, s1, s2)`): the U-Net decoder's backbone and skip features
    # re-weighted, for the call only. None: off.
    freeu: Any = None
    # A1111's Settings > Infotext switches (model / VAE names and hashes, version, user, LoRA and TI hashes): which
    # optional keys the infotext holds (pipelines.infotext_options); a dict of those option names is taken too.
    infotext_options: InfotextOptions = field(default_factory=InfotextOptions)
    # A1111's "Restore faces" (pipelines.face_restoration): each decoded image's faces restored by
    # `face_restoration_model` ("CodeFormer" / "GFPGAN", registered from their model folders) at CodeFormer fidelity
    # `code_former_weight`, before inpainting's paste-back; infotext "Face restoration: <model>". The other three are
    # A1111's Settings > Face restoration: move the networks to the CPU after use, and keep each image as it was
    # before restoration (`GenerationResult.before_face_restoration`, saved as "-before-face-restoration").
    restore_faces: bool = False
    face_restoration_model: str = "CodeFormer"
    code_former_weight: float = 0.5
    face_restoration_unload: bool = False
    save_images_before_face_restoration: bool = False
    # A1111's `p.user`: the name the request was authenticated as, written as "User" when
    # `infotext_options.add_user_name_to_info` is on (the web UI and API fill it in; None: nobody logged in).
    user: str | None = None

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "Txt2ImgParams":
        check_param_names(cls, kwargs)
        return cls(**kwargs)

    @property
    def total_images(self) -> int:
        return self.batch_size * self.batch_count


def check_param_names(params_class, keywords: dict[str, Any]) -> None:
    """Refuse keywords that are not fields of `params_class`, listing the valid ones (not dataclasses' bare error)."""
    known = {f.name for f in fields(params_class)}
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise TypeError(f"Unknown generation parameter(s) {unknown}; valid ones: {sorted(known)}.")


def with_overrides(params: Txt2ImgParams, keywords: dict[str, Any]) -> Txt2ImgParams:
    """A copy of `params` with `keywords` replacing its fields (`pipe(params, seed=2)`), names checked first."""
    check_param_names(type(params), keywords)
    return replace(params, **keywords)


def python_number(value: Any) -> Any:
    """`value` as a Python int or float when it is another type's number (numpy's, from `np.linspace` sweeps and
    `np.random` seeds), so checks, arithmetic and the infotext see plain numbers; anything else as it is."""
    if isinstance(value, bool) or type(value) in (int, float) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    # numpy's float32(6.7) is 6.69999980926 as a float64; its shortest decimal (numpy's str) is what was written.
    return float(str(value)) if type(value).__module__ == "numpy" else float(value)


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer in [{low}, {high}], got {value!r}.")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}.")


def check_prompt_field(name: str, value: Any, batch_size: int, limits: GenerationLimits) -> None:
    """A prompt field (one string, or one per image): type, count, length within `limits`, no NUL."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
        raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}.")
    if not isinstance(value, str) and len(items) != batch_size:
        raise ValueError(f"{name} has {len(items)} entries but batch_size is {batch_size}; give one per image or a single string.")
    for text in items:
        if len(text) > limits.max_prompt_chars:
            raise ValueError(f"{name} is {len(text):,} characters long; the limit is {limits.max_prompt_chars:,}. "
                             "Shorten the prompt.")
        if "\x00" in text:
            raise ValueError(f"{name} contains a NUL character; remove it.")


def check_and_parts(name: str, prompt: str, limits: GenerationLimits) -> None:
    """Refuse a prompt with more `AND` parts than `limits.max_and_parts` (only positive prompts are split on AND)."""
    from mixkit.prompts.composable import count_and_parts

    count = count_and_parts(prompt)
    if count > limits.max_and_parts:
        raise ValueError(f"{name} has {count:,} AND parts; the limit is {limits.max_and_parts} "
                         "(GenerationLimits.max_and_parts): each part is one more model evaluation per step. Merge "
                         "parts, or write the word as 'and' where it is not meant to split the prompt.")


def check_size(width: Any, height: Any, multiple: int, limits: GenerationLimits) -> None:
    for name, value in (("width", width), ("height", height)):
        _check_int(name, value, multiple, limits.max_side)
        if value % multiple:
            raise ValueError(f"{name} must be a multiple of {multiple}, got {value}; try {max(multiple, value - value % multiple)}.")
    if width * height > limits.max_pixels:
        raise ValueError(
            f"{width}x{height} is {width * height} pixels, over the budget of {limits.max_pixels} per image; "
            "generate smaller and upscale (hires fix) instead."
        )


def check_txt2img_params(params: Txt2ImgParams, limits: GenerationLimits, size_multiple: int = 8) -> None:
    """Raise ValueError/TypeError naming the first bad value; nothing has run yet when this raises."""
    for item in fields(params):  # numpy numbers become Python ones first (subclasses' fields too: hires, img2img)
        setattr(params, item.name, python_number(getattr(params, item.name)))
    _check_int("batch_size", params.batch_size, 1, limits.max_batch_size)
    _check_int("batch_count", params.batch_count, 1, limits.max_batch_count)
    check_prompt_field("prompt", params.prompt, params.batch_size, limits)
    check_prompt_field("negative_prompt", params.negative_prompt, params.batch_size, limits)
    from pipelines.infotext import check_infotext_prompts

    for prompt, negative in zip(per_image(params.prompt, params.batch_size), per_image(params.negative_prompt, params.batch_size)):
        check_infotext_prompts(prompt, negative)  # refuse what the infotext could not record, before any work
        check_and_parts("prompt", prompt, limits)
    _check_int("steps", params.steps, 1, limits.max_steps)
    check_size(params.width, params.height, size_multiple, limits)
    cfg = params.cfg_scale
    # an int is finite however long (math.isfinite raises OverflowError on one past float's range)
    if isinstance(cfg, bool) or not isinstance(cfg, numbers.Real) or not (isinstance(cfg, numbers.Integral)
                                                                          or math.isfinite(cfg)):
        raise ValueError(f"cfg_scale must be a finite number in [0, {limits.max_cfg_scale}], got {cfg!r}.")
    if not 0 <= cfg <= limits.max_cfg_scale:
        raise ValueError(f"cfg_scale must be in [0, {limits.max_cfg_scale}], got {cfg}.")
    _check_int("seed", params.seed, -1, SEED_MAX)
    check_seed_extras(params, size_multiple, limits)
    _check_int("ensd", params.ensd, 0, SEED_MAX)
    from pipelines.rng_source import check_rng_source

    check_rng_source(params.rng_source)
    _check_int("clip_skip", params.clip_skip, 1, CLIP_SKIP_MAX)
    from mixkit.prompts.emphasis import check_emphasis
    from mixkit.prompts.encoder import check_comma_backtrack

    params.emphasis = check_emphasis(params.emphasis)  # "no norm" -> "No norm", the infotext's spelling
    check_comma_backtrack(params.comma_padding_backtrack)
    if not isinstance(params.sdxl_clip_l_skip, bool):
        raise TypeError(f"sdxl_clip_l_skip must be True or False (A1111's 'Clip skip SDXL'), got "
                        f"{params.sdxl_clip_l_skip!r}.")
    if not isinstance(params.tiling, bool):
        raise TypeError(f"tiling must be True or False (A1111's 'Tiling': a seamlessly tileable picture), got "
                        f"{params.tiling!r}.")
    check_speedup_settings(params)
    if not isinstance(params.use_old_scheduling, bool):
        raise TypeError(f"use_old_scheduling must be True or False (A1111's 'Use old prompt editing timelines'), got "
                        f"{params.use_old_scheduling!r}.")
    from pipelines.samplers import check_sampler_steps, resolve_sampler, sampler_eta

    resolve_sampler(params.sampler, params.schedule_type)  # a misspelt sampler fails before the model loads
    check_sampler_steps(params.sampler, params.steps)
    sampler_eta(params.sampler, params.eta)
    from pipelines.uncond_skip import check_uncond_skip

    check_uncond_skip(params.s_min_uncond, params.s_min_uncond_all, params.skip_early_cond)
    from pipelines.refiner import check_refiner_params

    check_refiner_params(params.refiner, params.refiner_switch_at, params.refiner_switch_by_sample_steps,
                         params.refiner_config_dir)
    weight = params.inpainting_mask_weight
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 <= weight <= 1:
        raise ValueError(f"inpainting_mask_weight must be a number in [0, 1] (A1111's 'Inpainting conditioning mask "
                         f"strength'; 1 = the masked area fully grey), got {weight!r}.")
    params.inpainting_mask_weight = float(weight)
    from pipelines.sampler_parameters import check_sampler_parameters_for

    check_sampler_parameters_for(params.sampler_parameters, params.sampler, params.schedule_type)
    check_infotext_settings(params)
    check_face_restoration_settings(params)


def check_speedup_settings(params: Txt2ImgParams) -> None:
    """`hypertile` (a HyperTile, a dict of its fields, or None) and `freeu` (a FreeU, a (b1, b2, s1, s2) tuple, or
    None), made into their dataclasses; whether the model can take them is checked when the call starts."""
    from pipelines.approx.freeu import as_freeu
    from pipelines.approx.hypertile_settings import as_hypertile

    params.hypertile = as_hypertile(params.hypertile)
    params.freeu = as_freeu(params.freeu)


def check_face_restoration_settings(params: Txt2ImgParams) -> None:
    """The Restore faces switches, and with `restore_faces` on the restorer and weight (found and checked by
    `pipelines.face_restoration`), so a missing restorer fails before sampling rather than after."""
    for name in ("restore_faces", "face_restoration_unload", "save_images_before_face_restoration"):
        if not isinstance(getattr(params, name), bool):
            raise TypeError(f"{name} must be True or False, got {getattr(params, name)!r}.")
    from pipelines.face_restoration import check_face_restoration, check_face_restoration_weight

    params.code_former_weight = check_face_restoration_weight(params.code_former_weight, "code_former_weight")
    if params.restore_faces:
        try:
            check_face_restoration(params.face_restoration_model, params.code_former_weight)
        except ValueError as error:
            raise ValueError(f"restore_faces: {error}") from None
    elif not isinstance(params.face_restoration_model, str):
        raise TypeError(f"face_restoration_model must be a restorer name such as 'CodeFormer', got "
                        f"{params.face_restoration_model!r}.")


def check_infotext_settings(params: Txt2ImgParams) -> None:
    """`infotext_options` (an `InfotextOptions`, or a dict of its option names made into one) and `user`."""
    from pipelines.infotext_options import check_user

    chosen = params.infotext_options
    if isinstance(chosen, dict):
        unknown = sorted(set(chosen) - set(INFOTEXT_OPTION_DEFAULTS))
        if unknown:
            raise TypeError(f"infotext_options has unknown option(s) {unknown}; known: "
                            f"{sorted(INFOTEXT_OPTION_DEFAULTS)}.")
        params.infotext_options = InfotextOptions(**chosen)
    elif not isinstance(chosen, InfotextOptions):
        raise TypeError(f"infotext_options must be an InfotextOptions or a dict of A1111's infotext option names, got "
                        f"{type(chosen).__name__}.")
    check_user(params.user)


def check_seed_extras(params: Txt2ImgParams, multiple: int, limits: GenerationLimits) -> None:
    """A1111's Extra seed options: subseed like seed, strength in [0, 1], resize-from sides integers >= 0.

    A resize with one side 0 is off, as A1111 reads it (`rng.ImageRNG.first` draws at the resize size only when both
    sides are > 0, and `create_infotext` then writes no "Seed resize from"): taken, with a `UserWarning` saying so
    (`seed_resize_off_note`), since setting one side alone is most often a slip. Both set: checked as an image size."""
    import warnings

    _check_int("subseed", params.subseed, -1, SEED_MAX)
    strength = params.subseed_strength
    if isinstance(strength, bool) or not isinstance(strength, numbers.Real) or not 0 <= strength <= 1:
        raise ValueError(f"subseed_strength must be a number in [0, 1] (A1111's 'Variation strength': 0 = no "
                         f"variation, 1 = the variation seed's own image), got {strength!r}.")
    params.subseed_strength = float(strength)
    width, height = params.seed_resize_from_w, params.seed_resize_from_h
    for name, value in (("seed_resize_from_w", width), ("seed_resize_from_h", height)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer (0 = off), got {value!r}.")
        if value < 0:
            raise ValueError(f"{name} must be 0 (off) or a size in pixels, got {value}.")
    note = seed_resize_off_note(width, height)
    if note is not None:
        warnings.warn(note, UserWarning, stacklevel=2)
    elif width:
        try:
            check_size(width, height, multiple, limits)
        except (TypeError, ValueError) as error:
            raise ValueError(f"'Resize seed from' {width}x{height} is not a size an image could have been made at: "
                             f"{error}") from None


def seed_resize_off_note(width: int, height: int) -> str | None:
    """What to tell a user whose 'Resize seed from' has exactly one side 0 (the resize is off); None otherwise."""
    if (width == 0) == (height == 0):
        return None
    zero, kept = ("width", f"height {height}") if width == 0 else ("height", f"width {width}")
    return (f"'Resize seed from' {width}x{height} has its {zero} at 0, so the seed is not resized (the {kept} is "
            "ignored, as in A1111, which resizes only when both sides are set); set both sides to resize it.")


def uncond_skip_of(params: Txt2ImgParams):
    """The params' NGMS / Skip Early CFG settings as a `pipelines.uncond_skip.UncondSkip`."""
    from pipelines.uncond_skip import UncondSkip

    return UncondSkip(float(params.s_min_uncond), params.s_min_uncond_all, float(params.skip_early_cond))


def per_image(value: str | list[str], batch_size: int) -> list[str]:
    return [value] * batch_size if isinstance(value, str) else list(value)
