"""Sample images from the model being trained, to watch a run: deterministic DDIM with guidance.

mixkit may not import `pipelines/`, and validation must not disturb training, so this is a small
self-contained sampler: DDIM with eta = 0 (Song et al. 2021, eq. 12) on "trailing" timesteps
(Lin et al. 2024: the last step starts at t = T - 1, so the image is not left partly noisy),
classifier-free guidance against the empty prompt, and its own seeded generator. It never draws
from the global RNGs and restores the train/eval mode of every module it touches, so a run with
validation produces the same weights and losses as one without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from mixkit.training.text_conditioning import CaptionEncoding, encode_sd, encode_sdxl


def trailing_timesteps(num_train_timesteps: int, steps: int) -> list[int]:
    """`steps` timesteps from T - 1 down, evenly spaced ("trailing" spacing, as diffusers' DDIM)."""
    if not 1 <= steps <= num_train_timesteps:
        raise ValueError(f"steps must be in 1..{num_train_timesteps}, got {steps}")
    stride = num_train_timesteps / steps
    return [round(num_train_timesteps - i * stride) - 1 for i in range(steps)]


def ddim_step(sample: torch.Tensor, model_output: torch.Tensor, alpha_bar: float, alpha_bar_prev: float,
              prediction_type: str) -> torch.Tensor:
    """One deterministic DDIM update x_t -> x_prev, for epsilon or v-prediction model outputs."""
    a, a_prev = torch.tensor(alpha_bar, dtype=torch.float64), torch.tensor(alpha_bar_prev, dtype=torch.float64)
    sqrt_a, sqrt_1ma = a.sqrt().item(), (1 - a).sqrt().item()
    if prediction_type == "epsilon":
        eps = model_output
        x0 = (sample - sqrt_1ma * eps) / sqrt_a
    elif prediction_type == "v_prediction":
        x0 = sqrt_a * sample - sqrt_1ma * model_output
        eps = sqrt_a * model_output + sqrt_1ma * sample
    else:
        raise ValueError(f"validation sampling supports 'epsilon' and 'v_prediction', got {prediction_type!r}")
    return a_prev.sqrt().item() * x0 + (1 - a_prev).sqrt().item() * eps


def sample_ddim(denoise: Callable[[torch.Tensor, int], torch.Tensor], latents: torch.Tensor,
                alphas_cumprod: torch.Tensor, steps: int, prediction_type: str) -> torch.Tensor:
    """Run DDIM from pure noise `latents`; the last step goes to alpha_bar = 1 (the clean prediction)."""
    timesteps = trailing_timesteps(len(alphas_cumprod), steps)
    stride = len(alphas_cumprod) // steps
    for t in timesteps:
        previous = t - stride
        alpha_bar_prev = alphas_cumprod[previous].item() if previous >= 0 else 1.0
        latents = ddim_step(latents, denoise(latents, t), alphas_cumprod[t].item(), alpha_bar_prev, prediction_type)
    return latents


def _conditioning(model, captions: list[str], height: int, width: int, encoding: CaptionEncoding) -> dict:
    if model.family.value == "sdxl":
        sizes = [(height, width)] * len(captions)
        return encode_sdxl(model.text_encoders, model.tokenizers, captions, "cpu", sizes, [(0, 0)] * len(captions),
                           (height, width), encoding)
    return encode_sd(model.text_encoders, model.tokenizers, captions, "cpu", encoding)


def _to_device(cond: dict, device, dtype) -> dict:
    def move(value):
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        return value.to(device, dtype)
    return move(cond)


@torch.no_grad()
def render_validation_images(model, prompts: list, *, steps: int, seed: int, guidance_scale: float,
                             height: int, width: int, encoding: CaptionEncoding = CaptionEncoding()) -> list:
    """One PIL image per prompt (a string or a `SamplePrompt`, whose own negative prompt, size, steps, scale and
    seed replace the arguments); prompt i without a seed starts from noise seeded by `seed + i`."""
    from diffusers import DDPMScheduler
    from PIL import Image

    from mixkit.training.sample_prompts import SamplePrompt

    samples = [p if isinstance(p, SamplePrompt) else SamplePrompt(p) for p in prompts]
    if height % 8 or width % 8:
        raise ValueError(f"height and width must be divisible by 8, got {height}x{width}")
    alphas_cumprod = DDPMScheduler.from_config(model.scheduler_config).alphas_cumprod
    unet, vae = model.unet, model.vae
    device, dtype = unet.device, unet.dtype
    modules = [unet, vae, *model.text_encoders]
    modes = [m.training for m in modules]
    for module in modules:
        module.eval()  # dropout would otherwise draw from the global RNG
    try:
        images = []
        for index, sample in enumerate(samples):
            h, w = sample.height or height, sample.width or width
            scale = sample.guidance_scale if sample.guidance_scale is not None else guidance_scale
            cond = _conditioning(model, [sample.prompt], h, w, encoding)
            negative = _conditioning(model, [sample.negative_prompt], h, w, encoding) if scale > 1 else None
            both = _to_device(cond if negative is None else _concat(negative, cond), device, dtype)
            generator = torch.Generator().manual_seed(sample.seed if sample.seed is not None else seed + index)
            factor = model.vae_scale_factor
            noise = torch.randn((1, unet.config.in_channels, h // factor, w // factor), generator=generator)

            def denoise(latents: torch.Tensor, t: int, both=both, negative=negative, scale=scale) -> torch.Tensor:
                batch = latents.repeat(2 if negative is not None else 1, 1, 1, 1).to(device, dtype)
                timestep = torch.full((batch.shape[0],), t, device=device)
                output = unet(batch, timestep, **both).sample.float().cpu()
                if negative is None:
                    return output
                uncond, text = output.chunk(2)
                return uncond + scale * (text - uncond)

            latents = sample_ddim(denoise, noise, alphas_cumprod, sample.steps or steps, model.prediction_type)
            decoded = vae.decode((latents / vae.config.scaling_factor).to(device, vae.dtype)).sample.float().cpu()
            pixels = ((decoded[0] / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
            images.append(Image.fromarray(pixels))
        return images
    finally:
        for module, mode in zip(modules, modes):
            module.train(mode)


def _concat(first: dict, second: dict) -> dict:
    out = {}
    for key, value in first.items():
        out[key] = _concat(value, second[key]) if isinstance(value, dict) else torch.cat([value, second[key]])
    return out


def sample_image_name(run_name: str, when: str, index: int, timestamp: str, seed: int | None = None) -> str:
    """kohya's sample file name, `<output_name>_<when>_<index:02d>_<YYYYmmddHHMMSS>[_<seed>].png`, `when` being the
    step (`000500`) or, for epoch samples, the epoch (`e000002`) (`run_schedule.validation_points`): the run's name
    and the time keep runs sharing an output folder (a learning-rate sweep, a rerun) from overwriting each other."""
    return f"{run_name}_{when}_{index:02d}_{timestamp}{'' if seed is None else f'_{seed}'}.png"


def save_validation_images(images: list, folder: str | Path, when: str, run_name: str,
                           seeds: list[int | None] | None = None) -> list[Path]:
    """Write the images (one per prompt) into `folder` under `sample_image_name`; `seeds` are the prompts' own
    `--d` seeds (None where the run's seed was used), named as kohya names them."""
    import time

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    timestamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
    seeds = seeds or [None] * len(images)
    paths = []
    for index, (image, seed) in enumerate(zip(images, seeds)):
        path = folder / sample_image_name(run_name, when, index, timestamp, seed)
        image.save(path)
        paths.append(path)
    return paths
