"""Hires fix: generate at the base size, upscale, then refine with a second img2img pass.

Parameters and infotext follow A1111's txt2img "Hires. fix": `hr_scale` (or `hr_resize_x/y`),
`hr_upscaler`, `hr_second_pass_steps` (0 = same as `steps`) and `denoising_strength`. Latent
upscalers ("Latent", "Latent (nearest)", ...) resize the first pass's latents directly; pixel
upscalers ("Lanczos", "Nearest", or an `SDx4Upscaler`) decode, upscale the image and re-encode it;
"None" (A1111's "no upscaler") is a plain Lanczos resize of the decoded image, as A1111's `resize_image` does.
`hr_upscaler=None` means A1111's default (the "Latent" upscale) with no "Hires upscaler" key in the infotext,
as A1111 writes it when a request names no upscaler.
Sizes are A1111's (pipelines.hires_size): any scale is accepted and the result snapped to whole
latent cells (x1.3 of 512 runs at 664), and hr_resize_x *and* y cover-and-crop instead of stretching.
The second pass uses the same seeds and prompts, with A1111's hires prompt schedules (`[a:b:1.5]`, or a
step above `steps`, switches inside the second pass; an edit of the first pass stays done). The infotext is
A1111's: `Size` is the first pass size, plus `Denoising strength`, `Hires upscale` (or `Hires resize`),
`Hires steps` (when set) and `Hires upscaler`, so "send to txt2img" restores the whole recipe; what only the
second pass used (LoRAs and embeddings of `hr_prompt`, its `Emphasis`) is merged in (`with_second_pass_extras`).
With batch count > 1, each batch is refined right after its own first pass, as A1111's `process_images_inner`
runs `sample` (first pass, then `sample_hr_pass`) per batch: progress counts both passes of every batch and only
rises (pipelines.hires_progress), and an interrupt keeps the batches already refined; an image whose second
pass never ran comes back at the first-pass size with a plain txt2img infotext (`without_hires_recipe`).
Params carrying ControlNet units (`pipelines.controlnet.ControlHiresParams`) run both passes with them, as
sd-webui-controlnet does (`hires_passes`, `pipelines.controlnet.hires`); so do params carrying IP-Adapters
(`pipelines.ip_adapter_hires.IPAdapterHiresParams`), their image prompts encoded once for the job.
`token_merging_ratio_hr` (A1111's "Token merging ratio high-res") merges tokens in the second pass only; the model's
own ToMe is put back after it, and the infotext's `Token merging ratio hr` is that pass's ratio, as A1111 writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from mixkit.registry import Registry
from pipelines.approx.labels import TOME_HIRES_KEY, model_labels
from pipelines.approx.tome_switch import check_token_merging_ratios, token_merging_for_pass
from pipelines.approx.tome_unet import check_tome_ratio
from pipelines.base import params_from_keywords
from pipelines.control import GenerationControl
from pipelines.generation import OLD_TIMELINES_KEY, GenerationResult
from pipelines.hires_progress import HiresJobProgress
from pipelines.hires_sampler import SettingsEta, check_hires_sampler, hires_sampler_fields, hires_sampler_infotext
from pipelines.hires_size import HiresSize, plan_hires_size
from pipelines.img2img import Img2ImgParams, ImageToImage, Img2ImgInputs
from pipelines.infotext import quote_value, split_infotext
from pipelines.ip_adapter_params import IPAdapterFields
from pipelines.params import Txt2ImgParams, check_and_parts, check_prompt_field, check_size, per_image, with_overrides
from pipelines.seeds import image_generators, resolve_seed
from pipelines.txt2img import TextToImage
from pipelines.upscale import UPSCALERS

MAX_HIRES_SCALE = 8.0
# A1111's `hires_fix_refiner_pass` (Settings > Stable Diffusion, infotext "Hires refiner"): which pass(es) of a hires
# fix the refiner finishes, each switching at `refiner_switch_at` of its own schedule (`apply_refiner`).
HIRES_REFINER_PASSES = ("first pass", "second pass", "both passes")
DEFAULT_HIRES_REFINER_PASS = "second pass"
REFINER_KEYS = ("Hires refiner", "Refiner", "Refiner switch at")  # written by the pass(es) the refiner worked on
ETA_KEYS = ("Eta", "Eta DDIM")  # A1111's eta keys, by the sampler's kind (SamplerSpec.eta_infotext_key)

# A1111's latent upscale modes: name -> (torch.nn.functional.interpolate mode, antialias).
LATENT_UPSCALERS: Registry[tuple[str, bool]] = Registry("latent upscaler")
for _name, _mode in (("Latent", ("bilinear", False)), ("Latent (antialiased)", ("bilinear", True)),
                     ("Latent (bicubic)", ("bicubic", False)), ("Latent (bicubic antialiased)", ("bicubic", True)),
                     ("Latent (nearest)", ("nearest", False)), ("Latent (nearest-exact)", ("nearest-exact", False))):
    LATENT_UPSCALERS.register(_name, _mode)
# A1111's "no upscaler" choice: the decoded image resized with Lanczos (its `images.resize_image` fallback).
NO_UPSCALER = "None"
DEFAULT_LATENT_UPSCALER = "Latent"  # what A1111 uses when a request names no hr_upscaler


def hires_upscaler_names() -> list[str]:
    """Every name `hr_upscaler` accepts: the latent modes, "None" and the pixel upscalers."""
    return [*LATENT_UPSCALERS.names(), NO_UPSCALER, *UPSCALERS.names()]


@dataclass
class HiresParams(Txt2ImgParams):
    """Text-to-image parameters plus A1111's hires-fix fields."""

    hr_scale: float = 2.0
    hr_resize_x: int = 0  # 0 = use hr_scale; one of x/y 0 keeps the aspect ratio
    hr_resize_y: int = 0
    # a LATENT_UPSCALERS or UPSCALERS name, "None" (Lanczos resize), None (A1111's unnamed default: "Latent"),
    # or an object with .upscale(image, w, h)
    hr_upscaler: Any = "Latent"
    hr_second_pass_steps: int = 0  # 0 = same as steps
    denoising_strength: float = 0.7
    # A1111's hires prompts: "" = the first pass's (negative) prompt. The second pass encodes them with their own
    # schedules (hires offsets) and applies their own <lora:...> tags.
    hr_prompt: str = ""
    hr_negative_prompt: str = ""
    # A1111's `hires_fix_refiner_pass`: with `refiner=`, the pass(es) it finishes (HIRES_REFINER_PASSES)
    hires_fix_refiner_pass: str = DEFAULT_HIRES_REFINER_PASS
    # A1111's hr_sampler_name / hr_scheduler (pipelines.hires_sampler): None = the first pass's sampler / schedule
    # type; `hr_eta` None = `eta` (an API request's Settings eta for the hires sampler's kind goes here)
    hr_sampler: str | None = None
    hr_schedule_type: str | None = None
    hr_eta: float | None = None
    # the Settings etas (eta_ancestral / eta_ddim) a hires sampler chosen later takes (an X/Y/Z "Hires sampler"
    # cell); None: the call sent `eta`, or has no Settings (pipelines.hires_sampler.SettingsEta)
    settings_eta: SettingsEta | None = None
    # A1111's "Token merging ratio high-res" (token_merging_ratio_hr): the ToMe ratio of the second pass only; 0 = the
    # model's own (the first pass's), as A1111 falls back to token_merging_ratio
    token_merging_ratio_hr: float = 0.0


def hires_size(params: HiresParams, factor: int = 8) -> HiresSize:
    """Upscale size and latent crop of the second pass, as A1111 (see pipelines.hires_size)."""
    return plan_hires_size(params.width, params.height, params.hr_scale, params.hr_resize_x, params.hr_resize_y, factor)


def hires_target_size(params: HiresParams, factor: int = 8) -> tuple[int, int]:
    """Final image size, as A1111: the upscaled size truncated to whole latent cells, minus any crop."""
    return hires_size(params, factor).size


def upscaler_name(upscaler: Any) -> str | None:
    if upscaler is None:
        return None
    return upscaler if isinstance(upscaler, str) else getattr(upscaler, "name", type(upscaler).__name__)


def check_hires_params(params: HiresParams, limits, multiple: int) -> HiresSize:
    """Validate the hires fields (the txt2img fields are checked by the first pass); return the second pass's size.

    `multiple` is the VAE's scale factor. Like A1111, any scale or resize is accepted and the result
    snapped to whole latent cells; only the final size must fit the limits (and the upscaled image,
    before cropping, must stay within the 4x budget img2img allows for input images)."""
    scale = params.hr_scale
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
            or not 1 <= scale <= MAX_HIRES_SCALE:
        raise ValueError(f"hr_scale must be a number in [1, {MAX_HIRES_SCALE}], got {scale!r}.")
    for name in ("hr_resize_x", "hr_resize_y", "hr_second_pass_steps"):
        value = getattr(params, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer (0 = automatic), got {value!r}.")
    if params.hr_second_pass_steps > limits.max_steps:
        raise ValueError(f"hr_second_pass_steps must be in [0, {limits.max_steps}], got {params.hr_second_pass_steps}.")
    for name in ("hr_prompt", "hr_negative_prompt"):
        value = getattr(params, name)
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string (\"\" = the first pass's), got {type(value).__name__}.")
        check_prompt_field(name, value, 1, limits)
    check_and_parts("hr_prompt", params.hr_prompt, limits)
    check_hires_refiner_pass(params.hires_fix_refiner_pass)
    check_hires_sampler(params, params.hr_second_pass_steps or params.steps)
    try:
        check_tome_ratio(params.token_merging_ratio_hr)
    except ValueError as error:
        raise ValueError(f"token_merging_ratio_hr (A1111's Token merging ratio high-res; 0 = the first pass's): "
                         f"{error}") from None
    strength = params.denoising_strength
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(strength, bool) or not isinstance(strength, (int, float)) \
            or not 0 <= strength <= 1:
        raise ValueError(f"denoising_strength must be a number in [0, 1], got {strength!r}.")
    upscaler = params.hr_upscaler
    if isinstance(upscaler, str):
        # a pixel upscaler's alias is a name too: A1111 knows a DAT_x4.pth download as "DAT x4" and "DAT_x4"
        if upscaler not in hires_upscaler_names() and upscaler not in UPSCALERS:
            raise ValueError(f"Unknown hr_upscaler {upscaler!r}; valid ones: {', '.join(hires_upscaler_names())} "
                             "(or an SDx4Upscaler).")
    elif upscaler is not None and not hasattr(upscaler, "upscale"):
        raise TypeError(f"hr_upscaler must be an upscaler name, None or an object with .upscale(image, width, height), "
                        f"got {type(upscaler).__name__}.")
    size = hires_size(params, multiple)
    try:
        check_size(size.width, size.height, multiple, limits)
    except (TypeError, ValueError) as error:
        raise ValueError(f"The hires-fix target size {size.width}x{size.height} is not usable: {error}") from None
    # Covering hr_resize_x x hr_resize_y from a first pass of a very different aspect ratio makes an
    # upscaled image far larger than the result; it is VAE-encoded whole, so bound it before any work.
    if size.upscale_width * size.upscale_height > 4 * limits.max_pixels:
        raise ValueError(
            f"hr_resize {params.hr_resize_x}x{params.hr_resize_y} from a {params.width}x{params.height} first pass "
            f"upscales to {size.upscale_width}x{size.upscale_height} before cropping, over the budget of "
            f"{4 * limits.max_pixels} pixels; choose a resize closer to the first pass's aspect ratio.")
    return size


def check_hires_refiner_pass(value: Any) -> str:
    """`value` when it is one of A1111's `hires_fix_refiner_pass` choices; ValueError naming it otherwise."""
    if not isinstance(value, str) or value not in HIRES_REFINER_PASSES:
        raise ValueError(f"hires_fix_refiner_pass must be one of {', '.join(map(repr, HIRES_REFINER_PASSES))} (A1111's "
                         f"Settings > Stable Diffusion 'Hires fix: which pass to enable refiner for'), got {value!r}.")
    return value


def hires_infotext(params: HiresParams, model_tome: float | None = None) -> dict[str, Any]:
    """The hires recipe's infotext keys (None: not written); `model_tome` is the ToMe ratio the model runs (its
    first pass's), which A1111's `Token merging ratio hr` falls back to."""
    extras: dict[str, Any] = {"Denoising strength": params.denoising_strength}
    if params.hr_resize_x or params.hr_resize_y:
        extras["Hires resize"] = f"{params.hr_resize_x}x{params.hr_resize_y}"
    else:
        extras["Hires upscale"] = params.hr_scale
    extras["Hires steps"] = params.hr_second_pass_steps or None
    extras["Hires upscaler"] = upscaler_name(params.hr_upscaler)  # None (not named by the caller): not written
    extras.update(hires_sampler_infotext(params))  # only what differs from the first pass's
    # A1111 writes them when they differ from the image's own prompts (an empty one is the prompt itself).
    for key, hires, own in (("Hires prompt", params.hr_prompt, params.prompt),
                            ("Hires negative prompt", params.hr_negative_prompt, params.negative_prompt)):
        differs = hires and any(hires != text for text in per_image(own, params.batch_size))
        extras[key] = hires if differs else None
    if params.hypertile is not None:  # A1111 adds "Hypertile U-Net second pass" when only that pass tiles
        extras.update(params.hypertile.infotext_values(hires=True))
    # A1111's create_infotext: the second pass's ratio (its own, else the first pass's) whenever it is not 0
    extras[TOME_HIRES_KEY] = params.token_merging_ratio_hr or model_tome or None
    return extras


def with_second_pass_extras(infotext: str, second_pass_infotext: str) -> str:
    """The image's infotext (the first pass's) with what the second pass wrote from its own prompts merged in:
    `Lora hashes`, `TI hashes`, `Emphasis` and `Old prompt editing timelines` (`PreparedCall.infotext_extras`). The
    rest of the second pass's infotext describes the img2img call it is, not the image's recipe, and is not used.
    `Hires refiner`, `Refiner` and `Refiner switch at` come from the second pass too when the refiner worked there
    (A1111's default pass), and so do `Eta` / `Eta DDIM`, which the hires sampler writes as A1111's does.

    A1111 records a hires fix in one infotext and keeps what the hires pass used: `Lora hashes` is the union of
    both passes (its Lora extension keeps `p.lora_hashes` across the hr pass and rewrites the key), so a LoRA only
    in `hr_prompt` is listed and a pasted infotext can find its file. `TI hashes` and `Emphasis` are written by the
    text encoder for the hires conds too (`sd_hijack_clip`), but A1111 1.10 copies the encoder's keys into the
    infotext before the hires pass encodes its prompts, so there they are lost unless those conds were computed
    early (low VRAM, "use first pass conds"); upstream PR #16677 fixes that. Here they are always merged, by name
    like `Lora hashes` (A1111's string concatenation can list an embedding twice). Only the parameter line (always
    the last: values are quoted, never hold a newline) is rewritten; the prompt lines stay as written.
    """
    head, _, _ = infotext.rpartition("\n")
    values = split_infotext(infotext)[2]
    second = split_infotext(second_pass_infotext)[2]
    # A1111's last two keys stay last, as the pipelines write them
    last = {key: values.pop(key) for key in ("Version", "User") if key in values}
    for key in ("Lora hashes", "TI hashes"):
        merged = merged_hash_list(values.get(key), second.get(key))
        if merged:
            values[key] = merged
    if "Emphasis" in second and "Emphasis" not in values:  # one emphasis setting serves both passes
        values["Emphasis"] = second["Emphasis"]
    # A1111's calculate_hr_conds sets it in extra_generation_params before the infotext is written, so the hires
    # pass's schedules count as well as the first pass's
    if OLD_TIMELINES_KEY in second and OLD_TIMELINES_KEY not in values:
        values[OLD_TIMELINES_KEY] = second[OLD_TIMELINES_KEY]
    for key in REFINER_KEYS:  # from either pass (hires_fix_refiner_pass); one refiner and one switch serve both
        if key in second:
            values[key] = second[key]
    # A1111's hires sampler writes its eta (when not its default) into the image's infotext as it starts, over the
    # first pass's value of the same key; a DDIM hires pass after Euler a adds `Eta DDIM`
    for key in ETA_KEYS:
        if key in second:
            values[key] = second[key]
    values.update(last)
    line = ", ".join(f"{key}: {quote_value(value)}" for key, value in values.items())
    return f"{head}\n{line}" if head else line


def without_hires_recipe(infotext: str, params: HiresParams) -> str:
    """A hires call's first-pass infotext without the hires recipe (`hires_infotext`'s keys), for an image the
    second pass never refined (an interrupt): A1111's txt2img writes none of them without hires fix (not even
    `Denoising strength`), so a paste of it reproduces this image rather than a hires image."""
    head, _, _ = infotext.rpartition("\n")
    values = split_infotext(infotext)[2]
    for key in hires_infotext(params):
        values.pop(key, None)
    values.pop("Hires refiner", None)  # a hires setting; the first pass's `Refiner` keys stay, it did refine it
    line = ", ".join(f"{key}: {quote_value(value)}" for key, value in values.items())
    return f"{head}\n{line}" if head else line


def merged_hash_list(first: str | None, second: str | None) -> str:
    """Two `name: hash, name: hash` infotext values as one, by name, as A1111's `p.lora_hashes` dict merges them:
    the first's names in order, then the second's new ones; a name in both keeps its place and takes the second's
    hash. Names never hold ':' or ',' (both are taken out when the value is written)."""
    hashes: dict[str, str] = {}
    for value in (first, second):
        for item in (value or "").split(","):
            name, _, short_hash = item.rpartition(":")
            if name.strip():
                hashes[name.strip()] = short_hash.strip()
    return ", ".join(f"{name}: {short_hash}" for name, short_hash in hashes.items())


class _RefinedPass:
    """A hires pass the refiner may finish: A1111's `apply_refiner` skips a pass `hires_fix_refiner_pass` leaves out,
    and writes "Hires refiner" (next to "Refiner") when the value is not its default."""

    pass_name: str  # "first pass" or "second pass"
    refiner_pass: str = DEFAULT_HIRES_REFINER_PASS  # the call's hires_fix_refiner_pass, set on the per-call instance

    def _runs_refiner(self, params) -> bool:
        return self.refiner_pass in (self.pass_name, "both passes")

    def _refiner_infotext(self, params) -> dict[str, Any]:
        return {"Hires refiner": None if self.refiner_pass == DEFAULT_HIRES_REFINER_PASS else self.refiner_pass}


class _FirstPass(_RefinedPass, TextToImage):
    """Text-to-image that also keeps each image's final latents (for latent upscaling) and writes the
    hires infotext. One instance per hires call, called once per batch: `batch_seeds` holds the batch's
    (seeds, generators) drawn for the whole job, `latents_out` collects image index in the batch -> latents."""

    pass_name = "first pass"
    restores_faces = False  # A1111 restores faces on the hires pass's result only
    latents_out: dict
    batch_seeds: tuple[list[int], list] | None = None  # None: draw them (HiresFix does, once for the whole job)

    def _prepare(self, params) -> dict:
        return {}

    def _seeds_and_generators(self, params, generator):
        # HiresFix draws the job's seeds once (`seed=` or `generator=`) and runs one batch per call
        if self.batch_seeds is None:
            return super()._seeds_and_generators(params, generator)
        return self.batch_seeds

    def _start_batch(self, params, state: dict, sampler, generators: list, first_image: int):
        start = super()._start_batch(params, state, sampler, generators, first_image)
        state["first"] = first_image

        def keep_latents(latents, index: int):
            state["current"] = latents
            return latents

        start.post_step = keep_latents
        return start

    def _finish_image(self, params, state: dict, image, index: int):
        self.latents_out[index] = state["current"][index - state["first"]]
        return image

    def _infotext_extras(self, params) -> dict[str, Any]:
        return {**super()._infotext_extras(params), **hires_infotext(params, model_labels(self.model).tome)}


class _SecondPass(_RefinedPass, ImageToImage):
    """img2img starting from given (upscaled, cropped) latents instead of encoding the init images."""

    pass_name = "second pass"
    hires_second_pass = True

    init_latents: Any  # [N, C, h, w], set on the per-call instance
    upscale_size: tuple[int, int]  # (width, height) before cropping, set on the per-call instance
    first_pass_steps: int  # the first pass's steps, set on the per-call instance
    # an inpainting checkpoint's extra input at inpainting_mask_weight < 1, [N, 5, h, w]; None: the grey default
    conditioning_channels: Any = None
    image_seeds: list[int]  # the batch's seeds, one per image, set on the per-call instance
    hires_size: HiresSize  # where this pass runs in the upscaled first pass, set on the per-call instance

    def _seeds_and_generators(self, params, generator):
        # A1111's sample_hr_pass draws from the images' own seeds (`ImageRNG(shape, self.seeds, ...)`), not from the
        # first seed + k: a `generator=` list can give seeds that are not consecutive, and each image's recorded
        # seed must reproduce its second pass too.
        return list(self.image_seeds), image_generators(self.image_seeds, params.rng_source)

    @classmethod
    def pass_params(cls, params: HiresParams, **values: Any) -> Img2ImgParams:
        """The second pass's parameters (a ControlNet second pass adds the units)."""
        return Img2ImgParams(**values)

    def follow(self, first_pass: _FirstPass) -> None:
        """Take what the second pass needs from the first besides its latents (a ControlNet pass: its control maps)."""

    def _prepare(self, params: Img2ImgParams) -> Img2ImgInputs:
        inputs = Img2ImgInputs(originals=list(params.init_images), init_latents=self.init_latents.to(self.model.device))
        if self.conditioning_channels is not None:
            channels = self.conditioning_channels.to(self.model.device)
            inputs.conditioning_mask, inputs.masked_image_latents = channels[:, :1], channels[:, 1:]
        return inputs

    def _schedule_steps(self, params, sampler) -> tuple[int, int | None]:
        # A1111's calculate_hr_conds: schedules over the hires pass's total steps, with the first pass's total
        # steps as the offset (`[a:b:0.5]` is `b` throughout, `[a:b:1.5]` switches half-way through this pass).
        calls = sampler.calls_per_step
        return params.steps * calls, self.first_pass_steps * calls

    def _conditioning_size(self, params) -> tuple[int, int]:
        # A1111 conditions SDXL's hires pass on hr_upscale_to_x/y (SdConditioning in calculate_hr_conds),
        # the size before latent truncation and cropping, not on the size it samples at.
        return self.upscale_size


class HiresFix:
    """Two-pass text-to-image (A1111's "Hires. fix") sharing one loaded model with a TextToImage."""

    params_class = HiresParams

    def __init__(self, pipe: TextToImage) -> None:
        self.pipe = pipe
        self.model = pipe.model
        self.limits = pipe.limits

    def check_inputs(self, params: HiresParams) -> HiresSize:
        return self._checked(params, hires_passes(params)[0].from_pipeline(self.pipe))

    def _checked(self, params: HiresParams, first_pass: _FirstPass) -> HiresSize:
        """Check `params` with the job's first pass (so what its checks read, IP-Adapter weights and encoders, is
        read once for the job); the second pass's size."""
        first_pass.check_inputs(params)
        size = check_hires_params(params, self.limits, self.model.vae_scale_factor)
        if params.token_merging_ratio_hr:  # a model whose UNet graph is fixed (int8, OpenVINO) cannot merge
            try:
                check_token_merging_ratios(self.pipe, [params.token_merging_ratio_hr])
            except ValueError as error:
                raise ValueError(f"token_merging_ratio_hr {params.token_merging_ratio_hr}: {error}") from None
        return size

    def _params_class(self, kwargs: dict) -> type[HiresParams]:
        """The params class keywords ask for: with ControlNet units and/or IP-Adapter fields (also when the wrapped
        pipeline has IP-Adapters loaded by `load_ip_adapter`), as the ControlNet and IP-Adapter pipelines take them."""
        from pipelines.ip_adapter_hires import hires_params_class

        adapters = any(kwargs.get(f.name) is not None for f in fields(IPAdapterFields)) \
            or hasattr(self.pipe, "load_ip_adapter")
        return hires_params_class(bool(kwargs.get("controlnets")), adapters)

    def __call__(self, params: HiresParams | None = None, *, callback=None, control=None, generator=None,
                 **kwargs: Any) -> GenerationResult:
        # 1. Check every input before the first pass starts
        if params is None:
            params = params_from_keywords(self.model, self._params_class(kwargs), kwargs)
        else:
            params = with_overrides(params, kwargs)
        first_pass = hires_passes(params)[0].from_pipeline(self.pipe)  # one for the whole job, every batch
        target = self._checked(params, first_pass)
        params.subseed = resolve_seed(params.subseed)  # one variation seed for the job; batch b starts at + b * size
        if params.refiner is not None:  # before the first pass, not when the second pass starts
            from pipelines.refiner_optimization import check_refiner_optimization

            check_refiner_optimization(self.model, params.refiner)
        control = control or GenerationControl()  # one for both passes of every batch
        first_pass.refiner_pass = params.hires_fix_refiner_pass
        # `generator=` seeds the job as TextToImage's does; each second pass draws from the seeds its batch recorded
        seeds, generators = first_pass._seeds_and_generators(params, generator)
        second_steps = params.hr_second_pass_steps or params.steps
        progress = HiresJobProgress(callback, params.batch_count, params.steps, second_steps)
        result = GenerationResult()
        size = params.batch_size
        # A1111 runs each batch's hires pass right after its first pass (process_images_inner -> p.sample ->
        # sample_hr_pass), so progress only rises and an interrupt keeps every batch already refined.
        for batch in range(params.batch_count):
            if control.interrupted:
                break
            # 2. This batch's first pass at the base size
            images = slice(batch * size, (batch + 1) * size)
            first_pass.latents_out = {}
            first_pass.batch_seeds = (seeds[images], generators[images])
            batch_params = replace(params, batch_count=1, subseed=params.subseed + batch * size)
            first = first_pass(batch_params, callback=progress.next_pass(), control=control)
            if first.interrupted or not first.images:
                # A1111's sample_hr_pass returns the first pass's samples when interrupted; unlike A1111 (whose
                # infotext keeps the hires keys), the infotext describes them as what they are: a txt2img image
                for image, seed, infotext in zip(first.images, first.seeds, first.infotexts):
                    result.add(image, seed, without_hires_recipe(infotext, params))
                break
            # 3. Upscale and refine this batch (same seeds, same prompts)
            latents = [first_pass.latents_out[k] for k in range(len(first.images))]
            # A1111's sample_hr_pass draws its noise with the batch's seeds and variation seeds again (a new ImageRNG)
            # A1111's sample_hr_pass merges tokens at token_merging_ratio_hr for the second pass only
            with token_merging_for_pass(self.pipe, params.token_merging_ratio_hr):
                second = self._second_pass(batch_params, target, first.images, latents, first.seeds,
                                           progress.next_pass(), control, first_pass)
            for k, (image, second_infotext) in enumerate(zip(second.images, second.infotexts)):
                if k in second.before_face_restoration:
                    result.before_face_restoration[len(result.images)] = second.before_face_restoration[k]
                result.add(image, first.seeds[k], with_second_pass_extras(first.infotexts[k], second_infotext))
            if second.interrupted:
                break
        result.interrupted = control.interrupted
        result.subseed = params.subseed
        return result

    def _second_pass(self, params: HiresParams, target: HiresSize, images: list, latents: list, seeds: list[int],
                     callback, control, first_pass: _FirstPass) -> GenerationResult:
        import torch

        base = {f.name: getattr(params, f.name) for f in fields(Txt2ImgParams)}
        base.update(width=target.width, height=target.height, seed=seeds[0], batch_size=len(images), batch_count=1,
                    steps=params.hr_second_pass_steps or params.steps, **hires_sampler_fields(params))
        if params.hr_prompt:
            base["prompt"] = params.hr_prompt
        if params.hr_negative_prompt:
            base["negative_prompt"] = params.hr_negative_prompt
        upscaler = DEFAULT_LATENT_UPSCALER if params.hr_upscaler is None else params.hr_upscaler
        if upscaler == NO_UPSCALER:
            upscaler = "Lanczos"
        # a. Upscale to A1111's hr_upscale_to size: latents to its whole cells, or the image to its exact
        #    pixels and then VAE-encoded (the encoder floors odd sizes to whole cells, as in A1111)
        latent_upscale = isinstance(upscaler, str) and upscaler in LATENT_UPSCALERS
        if latent_upscale:
            mode, antialias = LATENT_UPSCALERS.get(upscaler)
            grid_width, grid_height = target.grid
            upscaled = torch.nn.functional.interpolate(
                torch.stack(latents), size=(grid_height, grid_width), mode=mode, antialias=antialias)
        else:
            from pipelines.image_prep import to_model_pixels
            from pipelines.upscale import UpscaleLimits, upscale_image
            from pipelines.vae_decode import encode_images

            # check_hires_params allowed up to 4x max_pixels before cropping; don't refuse it mid-run
            budget = UpscaleLimits(max_pixels=max(UpscaleLimits().max_pixels, 4 * self.limits.max_pixels))
            pixels = [upscale_image(image, width=target.upscale_width, height=target.upscale_height,
                                    upscaler=upscaler, limits=budget) for image in images]
            from pipelines.tiling import seamless_tiling

            with seamless_tiling(self.model.vae, enabled=params.tiling):  # A1111's Tiling holds for the whole call
                upscaled = encode_images(self.model.vae, to_model_pixels(pixels))
        # b. Crop the latents (A1111 does it on latents for every upscaler) and refine them
        left, top, right, bottom = target.crop
        second_class = hires_passes(params)[1]
        second = second_class.from_pipeline(self.pipe)
        second.init_latents = upscaled[:, :, top:bottom, left:right]
        conditioning = self._weighted_conditioning(params, upscaled, None if latent_upscale else pixels)
        if conditioning is not None:
            second.conditioning_channels = conditioning[:, :, top:bottom, left:right]
        second.upscale_size = (target.upscale_width, target.upscale_height)
        second.first_pass_steps = params.steps
        second.image_seeds = seeds
        second.hires_size = target
        second.refiner_pass = params.hires_fix_refiner_pass
        second.follow(first_pass)
        # only placeholders (img2img's checks want images; nothing is encoded or pasted back)
        init_images = [image.resize(target.size) for image in images]
        # A1111's sample_hr_pass always passes `steps` to sample_img2img, which makes setup_img2img_steps take its
        # fixed-steps branch whatever img2img_fix_steps says: exactly the hires steps, over int(steps / denoise).
        return second(second_class.pass_params(params, **base, init_images=init_images, exact_steps=True,
                                               denoising_strength=params.denoising_strength),
                      callback=callback, control=control)


    def _weighted_conditioning(self, params: HiresParams, upscaled, upscaled_images: list | None):
        """An inpainting checkpoint's second-pass conditioning at inpainting_mask_weight < 1: the upscaled image
        (an image upscaler's output, or a latent upscale decoded to 8-bit pixels) faded by 1 - weight, as A1111's
        `sample_hr_pass` conditions on it. None at weight 1 or for other UNets: the grey full-mask default."""
        from pipelines.inpaint_mask import is_inpainting_unet, weighted_conditioning_channels

        if params.inpainting_mask_weight == 1.0 or not is_inpainting_unet(self.model.unet):
            return None
        from pipelines.image_prep import to_model_pixels
        from pipelines.vae_decode import decode_latents

        images = upscaled_images if upscaled_images is not None else decode_latents(self.model.vae, upscaled)
        return weighted_conditioning_channels(self.model.vae, to_model_pixels(images), params.inpainting_mask_weight)


def hires_passes(params: HiresParams) -> tuple[type[_FirstPass], type[_SecondPass]]:
    """The two pass pipelines: ControlNet's when the params carry units, IP-Adapter's when they have its fields
    (sd-webui-controlnet guides both passes with either)."""
    if isinstance(params, IPAdapterFields):
        from pipelines.ip_adapter_hires import ip_adapter_hires_passes

        return ip_adapter_hires_passes(bool(getattr(params, "controlnets", None)))
    if getattr(params, "controlnets", None):
        from pipelines.controlnet.hires import ControlFirstPass, ControlSecondPass

        return ControlFirstPass, ControlSecondPass
    return _FirstPass, _SecondPass
