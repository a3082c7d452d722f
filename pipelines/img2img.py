"""Image-to-image and inpainting with the WebUI's semantics.

Denoising strength follows A1111: with 20 steps and strength 0.75 the sampler runs the last 16
steps of a 20-step schedule (`int(strength * steps) + 1`), or exactly 20 steps of a longer
schedule with `exact_steps`. Strength 0 runs A1111's one last step (with `exact_steps`, none: a VAE
round trip); strength 1 is A1111's 0.999: the whole schedule from the init image noised to sigma_max,
which keeps a trace of its colours (not pure noise). A `mask` turns the call into inpainting (white =
repaint): the unmasked area is re-imposed after every step and pasted back in pixel space at the end, so
unmasked pixels are returned unchanged. The mask is prepared as A1111's `StableDiffusionProcessingImg2Img.init` prepares
it: blurred per axis, rounded in the latent (unless `mask_round=False`), pasted back with the
blurred mask doubled for the whole picture, and an "only masked" crop fitted with "resize and fill".
Dedicated inpainting checkpoints (9-channel UNets) get the mask and the masked image (masked area
mid grey) as extra input channels; without a mask, a full mask (as A1111 does). `soft_inpainting` is A1111's Soft
inpainting (pipelines/soft_inpainting.py): the mask kept soft, blended per step by noise level, and pasted back
through a mask of what changed instead of the blurred one. `color_correction` is A1111's img2img colour correction
(pipelines/color_correction.py), applied after Restore faces and before the paste-back, as A1111's process_images.
InstructPix2Pix checkpoints (8-channel UNets) get the init image's latents as extra input channels and A1111's Image
CFG scale (`image_cfg_scale`, pipelines/instruct_pix2pix.py), with or without a mask.
"""

from __future__ import annotations

import warnings
import numbers
from dataclasses import dataclass, field
from typing import Any

from mixkit.models.diffusion import ModelFamily
from pipelines.base import BatchStart, DiffusionPipelineBase
from pipelines.image_prep import (
    IMG2IMG_RESIZE_MODES, LATENT_RESIZE_MODE, check_resize_mode, normalize_init_image, resize_image, to_model_pixels,
)
from pipelines.instruct_pix2pix import (
    DEFAULT_IMAGE_CFG_SCALE, check_image_cfg_scale, image_cfg_infotext, image_conditioning, image_guidance_for,
    is_instruct_pix2pix_unet,
)
from pipelines.inpaint_mask import (
    CropRegion, blur_mask, check_mask_image, check_masked_content, conditioning_mask, fill_masked_area,
    full_mask_channels, is_inpainting_unet, latent_mask, masked_model_pixels, only_masked_crop, paste_back, prepare_mask,
    whole_picture_overlay,
)
from pipelines.params import Txt2ImgParams, check_txt2img_params
from pipelines.seeds import initial_noise
from pipelines.vae_decode import encode_images


# A1111's img2img slider stops at 64 and its API at nothing; its Poor man's outpainting blurs with twice its own
# slider's 64. 128 lets `outpaint` take that whole slider while keeping a bound on the Gaussian's cost.
MAX_MASK_BLUR = 128


@dataclass
class Img2ImgParams(Txt2ImgParams):
    """Text-to-image parameters plus the input image(s) and A1111's img2img/inpaint options."""

    # PIL images: one for the whole batch, or one per image; read upright, 8-bit, transparency on white
    init_images: list = field(default_factory=list)
    denoising_strength: float = 0.75
    # A1111's Image CFG Scale: how closely an instruct-pix2pix checkpoint keeps to the init image (ignored, and not
    # recorded, for any other model, as A1111 drops it); None = A1111's API default, the plain CFG (as 1), unrecorded
    image_cfg_scale: float | None = DEFAULT_IMAGE_CFG_SCALE
    resize_mode: str = "just resize"
    exact_steps: bool = False
    mask: Any = None  # PIL image, white = repaint; a transparent RGBA mask: its alpha strokes (binary_mask)
    # A1111's p.latent_mask: a second mask (needs `mask`, whole picture only) that, unblurred and not inverted, decides
    # what the sampler re-imposes and what "fill" fills, while `mask` (blurred) still decides the paste-back and the
    # inpainting UNet's conditioning. Poor man's outpainting uses it; None = the blurred mask for everything.
    latent_mask: Any = None
    mask_blur: int = 4
    mask_blur_x: int | None = None  # A1111's per-axis blur (horizontal sigma); None = mask_blur
    mask_blur_y: int | None = None  # vertical sigma; None = mask_blur
    mask_round: bool = True  # False: soft alpha strokes and a soft latent mask (A1111's mask_round)
    inpainting_mask_invert: bool = False  # "inpaint not masked"
    inpainting_fill: str = "original"  # original | fill | latent noise | latent nothing
    # "only masked": work on the mask's region at full resolution. A mask blank once blurred has no region: the call
    # then runs plain img2img on the whole picture (the mask dropped) and sets this to False on its own copy of the
    # params, as A1111's init does.
    inpaint_full_res: bool = False
    inpaint_full_res_padding: int = 32
    # A1111's Settings > img2img noise (pipelines.img2img_noise): the start noise times initial_noise_multiplier, and
    # img2img_extra_noise more of it on top
    initial_noise_multiplier: float = 1.0
    img2img_extra_noise: float = 0.0
    # A1111's Soft inpainting (pipelines.soft_inpainting): the blurred mask used as an opacity, not rounded. Needs
    # nothing else; without a mask it does nothing and is not recorded, as A1111's script skips calls without one.
    soft_inpainting: Any = None
    # A1111's Settings > img2img "Apply color correction to img2img results to match original colors"
    # (pipelines.color_correction): True matches each result's colours to its init image as the model saw it
    # (resized, cropped, filled), before the inpaint paste-back; a PIL image matches every result to that image
    # (Loopback's first init image). Not recorded in the infotext, as A1111 records nothing.
    color_correction: Any = False
    # A1111's Settings > Saving "Save a copy of image before applying color correction to img2img results": each
    # corrected image also kept as it would be without (pasted back), in `GenerationResult.before_color_correction`
    save_images_before_color_correction: bool = False


def check_img2img_params(params: Img2ImgParams, limits, multiple: int) -> None:
    """Raise ValueError/TypeError naming the first bad value; nothing has run yet when this raises.

    Accepted spellings are normalised in place (masked content and resize mode in A1111's lower
    case, a numpy strength to a Python float), so that what runs and what the infotext records agree.
    """
    from PIL import Image

    _shrink_batch_to_images(params)
    check_txt2img_params(params, limits, multiple)
    params.denoising_strength = _checked_strength(params.denoising_strength)
    params.image_cfg_scale = check_image_cfg_scale(params.image_cfg_scale, limits.max_cfg_scale)
    images = params.init_images
    if not isinstance(images, list) or not images:
        raise ValueError("init_images must be a non-empty list of PIL images.")
    if len(images) > params.batch_size:
        raise ValueError(f"Got {len(images)} init images for batch_size {params.batch_size}; give at most "
                         f"{params.batch_size}, or raise batch_size to {len(images)}.")
    for index, image in enumerate(images):
        if not isinstance(image, Image.Image):
            raise TypeError(f"init_images[{index}] must be a PIL image, got {type(image).__name__}.")
        if image.width < 1 or image.height < 1:
            raise ValueError(f"init_images[{index}] is {image.width}x{image.height} pixels; give an image with pixels "
                             "(an empty image cannot be resized to the output size).")
        if image.width * image.height > limits.max_pixels * 4:
            raise ValueError(f"init_images[{index}] is {image.width}x{image.height}, too large to process; downscale it first.")
    params.resize_mode = check_resize_mode(params.resize_mode, IMG2IMG_RESIZE_MODES)
    if params.resize_mode == LATENT_RESIZE_MODE:
        _check_latent_resize_use(params, multiple)
    params.inpainting_fill = check_masked_content(params.inpainting_fill)
    check_mask_image(params.mask)
    _check_latent_mask(params)
    for name in ("exact_steps", "inpainting_mask_invert", "inpaint_full_res", "mask_round"):
        _check_flag(name, getattr(params, name))
    for name, value, high in (("mask_blur", params.mask_blur, MAX_MASK_BLUR),
                              ("inpaint_full_res_padding", params.inpaint_full_res_padding, 512)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
            raise ValueError(f"{name} must be an integer in [0, {high}], got {value!r}.")
    for name in ("mask_blur_x", "mask_blur_y"):
        value = getattr(params, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MASK_BLUR):
            raise ValueError(f"{name} must be an integer in [0, {MAX_MASK_BLUR}], or None to use mask_blur, got {value!r}.")
    from pipelines.img2img_noise import check_img2img_noise

    check_img2img_noise(params.initial_noise_multiplier, params.img2img_extra_noise)
    from pipelines.soft_inpainting import check_soft_inpainting

    params.soft_inpainting = check_soft_inpainting(params.soft_inpainting)
    from pipelines.color_correction import check_color_correction

    params.color_correction = check_color_correction(params.color_correction)
    _check_flag("save_images_before_color_correction", params.save_images_before_color_correction)


def _check_instruct_pix2pix_use(params: Img2ImgParams) -> None:
    """What an instruct-pix2pix checkpoint cannot run with. A refiner's UNet would get neither the image channels
    nor the image guidance. With Image CFG scale != 1, Skip Early CFG is refused (A1111 drops the image-free rows
    then and splits the rest in three wrong chunks) and NGMS is switched off on this call's params copy, as A1111
    applies it only to non-edit models (`not is_edit_model`), so the infotext does not claim it."""
    if params.refiner is not None:
        raise ValueError("A refiner cannot finish an instruct-pix2pix model's image: its UNet takes no input image. "
                         "Drop refiner=, or load a text-to-image checkpoint.")
    if params.image_cfg_scale is None or params.image_cfg_scale == 1.0:
        return
    if params.skip_early_cond > 0:
        raise ValueError(f"skip_early_cond={params.skip_early_cond} (Skip Early CFG) cannot run with an "
                         f"instruct-pix2pix model's image_cfg_scale={params.image_cfg_scale}: the skipped steps would "
                         "drop the image guidance too. Set skip_early_cond to 0, or image_cfg_scale to 1.")
    params.s_min_uncond, params.s_min_uncond_all = 0.0, False


def _shrink_batch_to_images(params: Img2ImgParams) -> None:
    """A1111's init: 1 < len(init_images) < batch_size shrinks the batch to one image each. Done before the prompt
    lists are checked against batch_size, so a list of one prompt per init image fits the shrunk batch."""
    images, batch = params.init_images, params.batch_size
    if not isinstance(images, list) or isinstance(batch, bool) or not isinstance(batch, int):
        return  # check_txt2img_params and the checks below name the bad value
    if not 1 < len(images) < batch:
        return
    for name in ("prompt", "negative_prompt"):
        value = getattr(params, name)
        if isinstance(value, (list, tuple)) and len(value) != len(images):
            raise ValueError(f"{name} has {len(value)} entries for batch_size {batch}, but {len(images)} init images "
                             f"shrink the batch to {len(images)} (as A1111 does); give one {name} per init image, or "
                             "a single string.")
    params.batch_size = len(images)


def _check_latent_mask(params: Img2ImgParams) -> None:
    """latent_mask is a PIL image or None, and only with a whole-picture mask: "only masked" crops the mask's region,
    and A1111 would meet a full-size latent mask with the cropped image there."""
    from PIL import Image

    if params.latent_mask is None:
        return
    if not isinstance(params.latent_mask, Image.Image):
        raise TypeError(f"latent_mask must be a PIL image or None, got {type(params.latent_mask).__name__}.")
    if params.latent_mask.width < 1 or params.latent_mask.height < 1:
        raise ValueError(f"latent_mask is {params.latent_mask.width}x{params.latent_mask.height} pixels; give one "
                         "of the init image's size, or None.")
    if params.mask is None:
        raise ValueError("latent_mask needs a mask: it refines an inpainting call; give mask too, or drop latent_mask.")
    if params.inpaint_full_res:
        raise ValueError("latent_mask works on the whole picture; set inpaint_full_res=False or drop latent_mask.")


def _check_latent_resize_use(params: Img2ImgParams, factor: int) -> None:
    """Refuse "just resize (latent upscale)" where its pixels would not be A1111's: with a mask, A1111 resizes the
    mask (with its resize_image's fill branch) but not the image, and its overlay paste then meets two sizes; a
    ControlNet unit would take the init image resized by a pixel mode the extension does not define for it.
    An init image under one latent cell (`factor` pixels) on a side has no latents to upscale: the VAE encodes it at
    its own size, and its convolutions fail deep inside torch (in A1111 too)."""
    for index, image in enumerate(params.init_images):
        if min(image.size) < factor:  # either side: an EXIF rotation swaps them
            raise ValueError(f"init_images[{index}] is {image.width}x{image.height} pixels; resize_mode "
                             f"{LATENT_RESIZE_MODE!r} VAE-encodes it at its own size, which needs at least {factor} "
                             f"pixels a side (one latent cell); choose one of {', '.join(IMG2IMG_RESIZE_MODES[:-1])}, "
                             "or upscale the image first.")
    if params.mask is not None:
        raise ValueError(f"resize_mode {LATENT_RESIZE_MODE!r} works on img2img without a mask; for inpainting choose "
                         f"one of {', '.join(IMG2IMG_RESIZE_MODES[:-1])}, or upscale the image first.")
    if getattr(params, "controlnets", None):
        raise ValueError(f"resize_mode {LATENT_RESIZE_MODE!r} cannot be combined with ControlNet units; choose one of "
                         f"{', '.join(IMG2IMG_RESIZE_MODES[:-1])}.")


def _checked_strength(value: Any) -> float:
    """denoising_strength as a Python float; any real number in [0, 1] (numpy's too), not a bool."""
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
        raise ValueError(f"denoising_strength must be a number in [0, 1], got {value!r}.")
    # numpy's float32(0.7) is 0.699999988 as a float64: it would run int(0.6999 * 10) = 6 steps instead of 7 and
    # print the long number in the infotext. Its shortest decimal (numpy's str) is the number the caller wrote.
    return float(str(value)) if type(value).__module__ == "numpy" else float(value)


def _check_flag(name: str, value: Any) -> None:
    """A switch must be a bool (numpy's included): the string "False" or "no" is truthy and would turn it on."""
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__}); pass a bool.")


def mask_blurs(params: Img2ImgParams) -> tuple[int, int]:
    """(horizontal, vertical) mask blur: each axis's own value, or mask_blur where it is None."""
    blur_x = params.mask_blur if params.mask_blur_x is None else params.mask_blur_x
    blur_y = params.mask_blur if params.mask_blur_y is None else params.mask_blur_y
    return blur_x, blur_y


def img2img_steps(steps: int, strength: float, exact_steps: bool) -> tuple[int, int]:
    """(schedule length, steps actually run), as A1111's `setup_img2img_steps` and `sample_img2img`.

    Strength 0 still runs one step: A1111's t_enc = int(0 * steps) = 0 and `sigmas[steps - t_enc - 1:]` noise the
    init latents to the schedule's smallest sigma and take its last step. With exact steps (and hires fix) A1111's
    schedule has 0 steps there (`int(steps / strength) if strength > 0 else 0`): its sigmas are [0], the latents
    are not noised and no step runs, so the image is the init image's VAE round trip.
    """
    capped = min(strength, 0.999)
    if exact_steps:
        return (int(steps / capped), steps) if strength > 0 else (steps, 0)
    return steps, int(capped * steps) + 1


def img2img_timesteps(scheduler, total: int, run: int):
    """(begin index, timesteps to evaluate) for the last `run` steps of the `total`-step schedule `scheduler` holds.

    Every sampler then starts at the noise level of step `total - run`, as A1111's img2img does.
    A second-order sampler lists its timesteps interleaved (`order` evaluations per step, one fewer
    in all); that is what `(total - run) * order` counts. A1111's DDIM and PLMS walk their own grid, and Restart
    and DPM fast plan their walk from the tail they are handed (`set_img2img_start`, with A1111's t_enc = run - 1):
    begin None, the scheduler already starts there.
    """
    timesteps = scheduler.timesteps
    if run == 0:  # before any re-planning: A1111's Restart and DPM fast would plan a step from t_enc = 0
        return len(timesteps), timesteps[:0]
    if hasattr(scheduler, "set_img2img_start"):
        scheduler.set_img2img_start(run - 1, device=scheduler.timesteps.device)
        return None, scheduler.timesteps
    begin = (total - run) * scheduler.order
    return begin, timesteps[begin:]


def img2img_noise_timestep(scheduler, timesteps):
    """The timestep whose noise level the init latents get: the first one evaluated, except for A1111's
    DDIM/PLMS, which noise to the grid point above it (grid[t_enc]) and evaluate from grid[t_enc - 1]."""
    import torch

    if hasattr(scheduler, "noise_timestep"):
        return torch.tensor([scheduler.noise_timestep], dtype=torch.long, device=timesteps.device)
    return timesteps[:1]


@dataclass
class Img2ImgInputs:
    """Per-call preprocessed inputs, one entry per distinct init image.

    Public so that pipelines starting from ready latents (hires fix's latent upscale) can build one.
    """

    originals: list  # what the result is pasted onto (resized image, or the full original for 'only masked')
    init_latents: Any  # [N, C, h, w]
    overlay_masks: list | None = None  # blurred masks for pixel-space paste-back
    latent_mask: Any = None  # [N, 1, h, w], 1 = repaint
    masked_image_latents: Any = None  # 9-channel UNets only
    image_conditioning: Any = None  # instruct-pix2pix (8-channel) UNets only: the unscaled init latents, [N, 4, h, w]
    conditioning_mask: Any = None  # 9-channel UNets only: their mask channel, [N, 1, h, w]
    crop: CropRegion | None = None
    # Soft inpainting's paste-back masks by image index, filled when each batch's sampling ends
    composite_masks: dict = field(default_factory=dict)
    encoded_images: list | None = None  # the init images as encoded (cropped, filled) when not `originals`
    color_targets: list | None = None  # colour correction's LAB targets, by init image (or one for all)
    before_color_correction: dict = field(default_factory=dict)  # image index -> finished without the correction


class ImageToImage(DiffusionPipelineBase):
    """img2img, and inpainting when `mask` is given; shares loading and caching with TextToImage."""

    params_class = Img2ImgParams

    def check_inputs(self, params: Img2ImgParams) -> None:
        check_img2img_params(params, self.limits, self.model.vae_scale_factor)
        if is_instruct_pix2pix_unet(self.model.unet):
            _check_instruct_pix2pix_use(params)

    def _prepare(self, params: Img2ImgParams) -> Img2ImgInputs:
        inputs = self._prepare_images(params)
        if is_instruct_pix2pix_unet(self.model.unet):  # A1111: the image as encoded (resized, cropped, filled)
            inputs.image_conditioning = image_conditioning(self.model.vae, inputs.init_latents)
        if params.color_correction is not False:
            from pipelines.color_correction import color_correction_target

            # A1111's setup_color_correction: the image the model starts from (after resize, crop and fill), or
            # the caller's own image (Loopback's first init image)
            sources = [normalize_init_image(params.color_correction)] if params.color_correction is not True else (
                inputs.encoded_images or inputs.originals)
            inputs.color_targets = [color_correction_target(image) for image in sources]
        return inputs

    def _prepare_images(self, params: Img2ImgParams) -> Img2ImgInputs:
        images = [normalize_init_image(image) for image in params.init_images]
        if params.soft_inpainting is not None and params.mask is not None:
            params.mask_round = False  # A1111's soft inpainting `process`: the mask stays soft everywhere
        if params.mask is None and params.resize_mode == LATENT_RESIZE_MODE:
            inputs = Img2ImgInputs(originals=images, init_latents=self._encode_latent_resized(images, params))
            return self._with_weighted_conditioning(inputs, params, latent_resized=True)
        if params.mask is None:
            resized = [resize_image(image, params.width, params.height, params.resize_mode) for image in images]
            inputs = Img2ImgInputs(originals=resized, init_latents=self._encode(resized))
            return self._with_weighted_conditioning(inputs, params)
        return self._prepare_inpaint(params, images)

    def _with_weighted_conditioning(self, inputs: Img2ImgInputs, params: Img2ImgParams,
                                    latent_resized: bool = False) -> Img2ImgInputs:
        """Without a mask an inpainting checkpoint repaints everything; at inpainting_mask_weight < 1 it is
        conditioned on the init image faded by 1 - weight (A1111's lerp), which needs its own VAE encoding. At 1
        (and for any other UNet) nothing is added: `_start_batch` gives the grey `full_mask_channels`."""
        import torch

        weight = params.inpainting_mask_weight
        if weight == 1.0 or not is_inpainting_unet(self.model.unet):
            return inputs
        fade = 1.0 - weight
        if latent_resized:
            latents = self._encode_latent_resized(inputs.originals, params, scale=fade)
        else:
            latents = encode_images(self.model.vae, to_model_pixels(inputs.originals) * fade).to(self.model.device)
        inputs.masked_image_latents = latents
        inputs.conditioning_mask = torch.ones(latents.shape[0], 1, *latents.shape[2:], dtype=latents.dtype,
                                              device=latents.device)
        return inputs

    def _encode_latent_resized(self, images: list, params: Img2ImgParams, scale: float = 1.0):
        """A1111's resize_mode 3: each image encoded at its own size (the VAE floors a side that is not a multiple
        of its factor, as A1111's does), then its latents stretched to the output's latent size with
        `interpolate(..., mode="bilinear")` (the "Latent" upscale: no antialias, align_corners False). `scale`
        multiplies the pixels first (an inpainting checkpoint's faded conditioning image)."""
        import torch

        factor = self.model.vae_scale_factor
        size = (params.height // factor, params.width // factor)

        def encoded(image):
            pixels = to_model_pixels([image])
            return encode_images(self.model.vae, pixels if scale == 1.0 else pixels * scale).to(self.model.device)

        return torch.cat([torch.nn.functional.interpolate(encoded(image), size=size, mode="bilinear")
                          for image in images])

    def _prepare_inpaint(self, params: Img2ImgParams, images: list) -> Img2ImgInputs:
        """A1111's inpaint preparation (`StableDiffusionProcessingImg2Img.init`): the mask blurred, then either
        the whole picture at width x height (pasted back with the doubled mask) or the blurred mask's region cropped
        and fitted in with "resize and fill" (pasted back with the blurred mask); the blurred mask at the working size
        is both the latent mask and what "fill" and the inpainting UNet's masked image use (`latent_mask`, when
        given, takes over the first two).

        Init images of different sizes each get the mask prepared at their own size and then resized to width x
        height, as A1111 resizes its mask and each image to width x height. "Only masked" refuses them: A1111 cuts
        every image at the one mask's pixel box, which lands elsewhere on an image of another size, and scaling the
        box per image would be a different crop from A1111's, so neither reading can be called the right one."""
        import torch

        sizes = {image.size for image in images}
        if params.inpaint_full_res and len(sizes) > 1:
            raise ValueError("With inpaint_full_res (\"only masked\") all init images must have the same size, as the "
                             "crop is the mask's box in image pixels; resize them to one size or inpaint the whole "
                             "picture.")
        blurred = {size: blur_mask(prepare_mask(params.mask, size, invert=params.inpainting_mask_invert,
                                                round=params.mask_round), *mask_blurs(params)) for size in sizes}
        crop = None
        if params.inpaint_full_res:
            mask = blurred[images[0].size]
            # The region is the *blurred* mask's box, as A1111 takes it, so the blur ramp lies inside the crop.
            crop = only_masked_crop(mask, params.inpaint_full_res_padding, params.width, params.height)
            if crop is None:
                return self._blank_only_masked(params, images)
            box = (crop.left, crop.top, crop.right, crop.bottom)
            # "resize and fill", as A1111: the crop keeps its proportions even when the image is too small to
            # give it the output's aspect ratio (the bands are stretched edges, cut away again at paste-back).
            work_images = [resize_image(image.crop(box), params.width, params.height, "resize and fill")
                           for image in images]
            work_masks = [resize_image(mask.crop(box), params.width, params.height, "resize and fill")] * len(images)
            originals, overlays = images, [mask] * len(images)
        else:
            work_images = [resize_image(image, params.width, params.height, params.resize_mode) for image in images]
            work_masks = [resize_image(blurred[image.size], params.width, params.height, params.resize_mode)
                          for image in images]
            originals, overlays = work_images, [whole_picture_overlay(mask) for mask in work_masks]
        keep_masks = work_masks if params.latent_mask is None else [
            resize_image(prepare_mask(params.latent_mask, image.size, round=params.mask_round),
                         params.width, params.height, params.resize_mode) for image in images]
        if params.inpainting_fill != "original":  # A1111 fills for latent noise / nothing too (`inpainting_fill != 1`)
            work_images = [fill_masked_area(image, mask) for image, mask in zip(work_images, keep_masks)]
        shape = self._latent_shape(params)
        latent_size = (shape[2], shape[1])
        inputs = Img2ImgInputs(originals=originals, init_latents=self._encode(work_images), overlay_masks=overlays,
                               latent_mask=torch.cat([latent_mask(mask, latent_size, round=params.mask_round)
                                                      for mask in keep_masks]),
                               crop=crop, encoded_images=work_images)
        if is_inpainting_unet(self.model.unet):
            # A1111 conditions an SDXL inpainting UNet on the rounded mask whatever mask_round says (its
            # `is_sdxl_inpaint` branch leaves `round_image_mask` at its default); SD 1.x/2.x follow mask_round.
            rounded = params.mask_round or self.model.family is ModelFamily.SDXL
            pixels = torch.cat([masked_model_pixels(to_model_pixels([image]), mask, round=rounded,
                                                    weight=params.inpainting_mask_weight)
                                for image, mask in zip(work_images, work_masks)])
            inputs.masked_image_latents = encode_images(self.model.vae, pixels).to(self.model.device)
            inputs.conditioning_mask = torch.cat([conditioning_mask(mask, latent_size, round=rounded)
                                                  for mask in work_masks])
        return inputs

    def _blank_only_masked(self, params: Img2ImgParams, images: list) -> Img2ImgInputs:
        """A mask blank once blurred (or resized) has no region for "only masked". A1111 then drops the mask and
        "only masked" and runs plain img2img on the whole picture, with the comment 'Unable to perform "Inpaint Only
        mask" because mask is blank, switch to img2img mode.'; so does this (a warning), clearing
        `inpaint_full_res` on this call's params copy, which the infotext reads to record what ran."""
        warnings.warn('Unable to perform "Inpaint Only mask" because the mask is blank once blurred: the whole '
                      "picture is repainted as plain img2img, as A1111 does; draw a larger mask to inpaint a region.",
                      stacklevel=3)
        params.inpaint_full_res = False
        params.soft_inpainting = None  # nothing to blend without the mask; the infotext records what ran
        resized = [resize_image(image, params.width, params.height, params.resize_mode) for image in images]
        return self._with_weighted_conditioning(Img2ImgInputs(originals=resized, init_latents=self._encode(resized)),
                                                params)

    def _encode(self, images: list):
        return encode_images(self.model.vae, to_model_pixels(images)).to(self.model.device)

    def _latent_noise_fill(self, params: Img2ImgParams, generators: list):
        """The "latent noise" fill: each seed's own first draw (A1111's `create_random_tensors(shape, seeds)` in
        `StableDiffusionProcessingImg2Img.init`), without the Extra seed options the sampling noise has; None when
        there are none, the sampling noise being that draw then. Drawn from copies: the generators stay fresh."""
        if params.subseed_strength == 0 and not (params.seed_resize_from_w and params.seed_resize_from_h):
            return None
        from pipelines.rng_source import copy_generator

        copies = [copy_generator(generator) for generator in generators]
        return initial_noise(copies, self._latent_shape(params)).to(self.model.device)

    def _start_batch(self, params: Img2ImgParams, inputs: Img2ImgInputs, sampler, generators: list, first_image: int) -> BatchStart:
        import torch

        count = len(generators)
        pick = [(first_image + k) % len(inputs.originals) for k in range(count)]
        init = inputs.init_latents[pick]
        fill_noise = None
        if inputs.latent_mask is not None and params.inpainting_fill == "latent noise":
            fill_noise = self._latent_noise_fill(params, generators)  # before the sampling noise's draw
        noise = self._initial_noise(params, generators, first_image)
        total, run = img2img_steps(params.steps, float(params.denoising_strength), params.exact_steps)
        schedulers = sampler.make_schedulers(generators, total, self.model.device)
        begin, timesteps = img2img_timesteps(schedulers[0], total, run)
        for scheduler in schedulers[1:]:
            img2img_timesteps(scheduler, total, run)
        for scheduler in schedulers:
            if begin is not None and hasattr(scheduler, "set_begin_index"):
                scheduler.set_begin_index(begin)
        mask = None if inputs.latent_mask is None else inputs.latent_mask[pick].to(init)
        if mask is not None and params.inpainting_fill == "latent noise":
            init = init * (1 - mask) + (noise if fill_noise is None else fill_noise) * mask
        elif mask is not None and params.inpainting_fill == "latent nothing":
            init = init * (1 - mask)
        if run == 0:
            latents = init
        else:  # strength 1 too: A1111 caps it at 0.999 and noises the init image to the schedule's first sigma
            from pipelines.img2img_noise import noised_init

            noise_at = img2img_noise_timestep(schedulers[0], timesteps).repeat(count)
            latents = noised_init(schedulers[0], init, noise, noise_at, params.initial_noise_multiplier,
                                  params.img2img_extra_noise)
        start = BatchStart(latents=latents, schedulers=schedulers, timesteps=timesteps,
                           steps=getattr(schedulers[0], "run_steps", run))  # A1111's UniPC: its t_enc steps
        if mask is not None and params.soft_inpainting is not None:
            start.mask_blend = _soft_mask_blend(init, mask, sampler, self.model.scheduler_config, params, inputs,
                                                first_image)
        elif mask is not None:
            start.mask_blend = _mask_blend(init, mask, sampler, self.model.scheduler_config)
        if inputs.masked_image_latents is not None:
            channel = inputs.conditioning_mask[pick].to(init)
            start.extra_channels = torch.cat([channel, inputs.masked_image_latents[pick]], dim=1)
        elif inputs.image_conditioning is not None:  # instruct-pix2pix: the input image, mask or not
            start.extra_channels = inputs.image_conditioning[pick]
            start.image_guidance = image_guidance_for(self.model, params.image_cfg_scale)
        else:  # no mask (plain img2img, hires fix's second pass): an inpainting checkpoint repaints everything
            start.extra_channels = full_mask_channels(self.model, count, self._latent_shape(params))
        return start

    def _finish_image(self, params: Img2ImgParams, inputs: Img2ImgInputs, image, index: int):
        if inputs.color_targets is not None:  # A1111: after Restore faces, before the overlay paste-back
            from pipelines.color_correction import apply_color_correction

            if params.save_images_before_color_correction:  # A1111 saves apply_overlay(image) uncorrected
                inputs.before_color_correction[index] = self._pasted_back(inputs, image, index)
            image = apply_color_correction(inputs.color_targets[index % len(inputs.color_targets)], image)
        finished = self._pasted_back(inputs, image, index)
        inputs.composite_masks.pop(index, None)  # Soft inpainting's mask of this image is used up
        return finished

    def _finish_call(self, inputs: Img2ImgInputs, result) -> None:
        result.before_color_correction.update(inputs.before_color_correction)

    def _pasted_back(self, inputs: Img2ImgInputs, image, index: int):
        if inputs.overlay_masks is None:
            return image
        which = index % len(inputs.originals)
        original, overlay = inputs.originals[which], inputs.overlay_masks[which]
        soft = inputs.composite_masks.get(index)
        if soft is not None:  # Soft inpainting's difference mask replaces the blurred one (A1111's post_sample)
            from pipelines.soft_inpainting_blend import uncropped_mask

            overlay = soft if inputs.crop is None else uncropped_mask(soft, original.size, inputs.crop)
        if inputs.crop is None:
            return paste_back(image, original, overlay)
        # A1111's `uncrop`: back to the crop's size with "crop and resize", which cuts away the bands that
        # "resize and fill" added, so the region comes back at its own proportions.
        placed = original.copy()
        placed.paste(resize_image(image, *inputs.crop.size, "crop and resize"), (inputs.crop.left, inputs.crop.top))
        return paste_back(placed, original, overlay)

    def _infotext_extras(self, params: Img2ImgParams) -> dict[str, Any]:
        """A1111's img2img keys, for what ran: no "Mask blur: 0", and no "Only masked" when a mask blank once
        blurred sent the call to the whole image (`_prepare_inpaint` cleared `inpaint_full_res`). Unequal x and y
        blurs are not recorded: A1111's `mask_blur` is None then and its infotext drops the key (the format has no
        per-axis blur)."""
        from pipelines.img2img_noise import img2img_noise_infotext

        extras: dict[str, Any] = {**image_cfg_infotext(self.model, params.image_cfg_scale),
                                  "Denoising strength": params.denoising_strength,
                                  **img2img_noise_infotext(params.initial_noise_multiplier, params.img2img_extra_noise),
                                  # A1111 applies the SGM noise multiplier to txt2img's noise only (`sample`)
                                  "SGM noise multiplier": None}
        if params.mask is not None:
            blur_x, blur_y = mask_blurs(params)
            if blur_x == blur_y > 0:
                extras["Mask blur"] = blur_x
            if params.soft_inpainting is not None:  # A1111's script adds its keys after img2img's Mask blur
                extras.update(params.soft_inpainting.infotext())
            if params.inpainting_mask_invert:
                extras["Mask mode"] = "Inpaint not masked"
            extras["Masked content"] = params.inpainting_fill
            if params.inpaint_full_res:
                extras["Inpaint area"] = "Only masked"
                extras["Masked area padding"] = params.inpaint_full_res_padding
        return extras


def _mask_blend(init, mask, sampler, scheduler_config):
    """A1111's blend of the original latents for this sampler (pipelines/inpaint_blend.py says where and why)."""
    from pipelines.inpaint_blend import MaskBlend
    from pipelines.samplers import SAMPLERS

    return MaskBlend(init=init, repaint=mask, before_denoising=SAMPLERS.get(sampler.name).mask_before_denoising,
                     prediction_type=scheduler_config.get("prediction_type", "epsilon"))


def _soft_mask_blend(init, mask, sampler, scheduler_config, params: Img2ImgParams, inputs: Img2ImgInputs,
                     first_image: int):
    """Soft inpainting's blend (pipelines/soft_inpainting_blend.py), which leaves each image's paste-back mask in
    `inputs.composite_masks` when the batch's sampling ends."""
    from pipelines.samplers import SAMPLERS
    from pipelines.soft_inpainting_blend import SoftMaskBlend, composite_masks

    def remember(latents):
        masks = composite_masks(init, latents, mask, params.soft_inpainting, params.width, params.height)
        inputs.composite_masks.update({first_image + k: image for k, image in enumerate(masks)})

    return SoftMaskBlend(init=init, repaint=mask, before_denoising=SAMPLERS.get(sampler.name).mask_before_denoising,
                         prediction_type=scheduler_config.get("prediction_type", "epsilon"),
                         settings=params.soft_inpainting, on_finish=remember)
