"""SD LoRA training throughput (samples/s): mixkit's trainer step vs diffusers' LoRA recipe.

Run from the repository root:  python -m benchmarks.train_lora  [--quick] [--rounds 3 --steps 2]

Rows: diffusers' script as a user calls it (fp32) and with `--mixed_precision bf16` (frozen UNet
cast to bf16, LoRA parameters kept fp32, autocast); mixkit with `mixed_precision="no"` and with
`"auto"` (bf16 here: the same frozen-weight cast plus channels-last, via the trainer's own helper).

Both variants train the same randomly initialised UNet (SD 1.5's config by default; `--quick`
uses a tiny UNet for a smoke run) on the same latents, text embeddings, batch and resolution.
"diffusers" is the loop of diffusers' `examples/text_to_image/train_text_to_image_lora.py`: PEFT
LoRA on to_q/to_k/to_v/to_out.0 via `unet.add_adapter`, `DDPMScheduler.add_noise`, MSE, AdamW.
"mixkit" is `LoraNetwork` (kohya's target set: every linear and 1x1 conv in the transformer blocks,
so it trains *more* layers) with mixkit's objective functions and the same optimizer. VAE and text
encoder are left out of both (precomputed inputs), so only the UNet training step is compared.
Variants alternate (A B A B ...) in one process; each figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

SD15_UNET = dict(
    sample_size=64, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280, 1280),
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    attention_head_dim=8, cross_attention_dim=768,
)
TINY_UNET = dict(
    sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    attention_head_dim=4, cross_attention_dim=32, norm_num_groups=8,
)


def make_inputs(config: dict, batch: int, resolution: int):
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(batch, 4, resolution // 8, resolution // 8, generator=generator)
    text = torch.randn(batch, 77, config["cross_attention_dim"], generator=generator)
    return latents, text


def mixkit_step_fn(unet, rank: int, alphas, mixed_precision: str = "no"):
    from types import SimpleNamespace

    from mixkit.training import diffusion_objective as objective
    from mixkit.training.accelerator_setup import resolve_mixed_precision
    from mixkit.training.lora_network import LoraNetwork
    from mixkit.training.sd_lora_trainer import _frozen_weights_in_half_precision

    precision = resolve_mixed_precision(mixed_precision)
    if precision != "no":
        _frozen_weights_in_half_precision(SimpleNamespace(unet=unet, text_encoders=[]), precision, False)
    network = LoraNetwork(unet, [], rank=rank, alpha=rank).attach()
    optimizer = torch.optim.AdamW(network.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def step(latents, text):
        noise = objective.offset_noise(latents.shape, generator, 0.0)
        timesteps = torch.randint(0, len(alphas), (latents.shape[0],), generator=generator)
        noisy = objective.add_noise(latents, noise, timesteps, alphas)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            prediction = unet(noisy, timesteps, text).sample
        loss = objective.weighted_mse(prediction.float(), noise, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)  # as the trainer does (accelerate's clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def diffusers_step_fn(unet, rank: int, scheduler, mixed_precision: str = "no"):
    import torch.nn.functional as F
    from peft import LoraConfig

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed_precision)
    if dtype is not None:
        unet.to(dtype=dtype)  # the script casts the frozen UNet to weight_dtype ...
    unet.add_adapter(LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian",
                                target_modules=["to_k", "to_q", "to_v", "to_out.0"]))
    params = [p for p in unet.parameters() if p.requires_grad]
    for param in params:
        param.data = param.data.float()  # ... and keeps the LoRA parameters in fp32 (cast_training_params)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    generator = torch.Generator().manual_seed(1)

    def step(latents, text):
        noise = torch.randn(latents.shape, generator=generator)
        timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (latents.shape[0],), generator=generator)
        noisy = scheduler.add_noise(latents, noise, timesteps)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):  # accelerate's autocast
            prediction = unet(noisy, timesteps, text).sample
        loss = F.mse_loss(prediction.float(), noise.float(), reduction="mean")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_steps(step, inputs, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step(*inputs)
    return time.perf_counter() - start


def main(argv=None) -> None:
    from diffusers import DDPMScheduler, UNet2DConditionModel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny UNet, 32 px, 2 rounds x 2 steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--resolution", type=int, default=512)
    parser.add_argument("--rank", type=int, default=4)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.resolution = 2, 2, 32
    config = TINY_UNET if args.quick else SD15_UNET
    if args.resolution % 8 or min(args.rounds, args.steps, args.batch, args.rank) < 1:
        parser.error("resolution must be divisible by 8 and rounds/steps/batch/rank positive")
    torch.manual_seed(0)
    base = UNet2DConditionModel(**config).train().requires_grad_(False)
    scheduler = DDPMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012)
    variants = {"diffusers fp32 (script default)": diffusers_step_fn(copy.deepcopy(base), args.rank, scheduler),
                "diffusers --mixed_precision bf16": diffusers_step_fn(copy.deepcopy(base), args.rank, scheduler, "bf16"),
                "mixkit mixed_precision=no": mixkit_step_fn(copy.deepcopy(base), args.rank, scheduler.alphas_cumprod),
                "mixkit mixed_precision=auto": mixkit_step_fn(copy.deepcopy(base), args.rank, scheduler.alphas_cumprod,
                                                              "auto")}
    inputs = make_inputs(config, args.batch, args.resolution)
    for step in variants.values():  # warm-up: allocator, autograd graph, optimizer state
        time_steps(step, inputs, 1)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in variants.items():
            rates[name].append(args.steps * args.batch / time_steps(step, inputs, args.steps))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"SD LoRA training, {'tiny UNet' if args.quick else 'SD 1.5 UNet'}, batch {args.batch}, "
          f"{args.resolution} px, rank {args.rank}, {args.rounds} rounds x {args.steps} steps (CPU threads {torch.get_num_threads()})")
    from mixkit.training.accelerator_setup import resolve_mixed_precision

    print(f"  (mixed_precision=auto resolves to {resolve_mixed_precision('auto')!r} on this machine)")
    baseline = medians["diffusers fp32 (script default)"]
    print(f"  {'variant':<34} {'samples/s':>10} {'vs diffusers default':>21}")
    for name, value in medians.items():
        print(f"  {name:<34} {value:10.4f} {value / baseline:20.2f}x")
    best_diffusers = medians["diffusers --mixed_precision bf16"]
    print(f"  mixkit auto / diffusers bf16: {medians['mixkit mixed_precision=auto'] / best_diffusers:.2f}x")


if __name__ == "__main__":
    main()
