"""SD LoRA training throughput (samples/s): mixkit's trainer step vs diffusers' LoRA recipe.

Run from the repository root:  python -m benchmarks.train_lora  [--quick] [--rounds 5 --steps 5]

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


def mixkit_step_fn(unet, rank: int, alphas):
    from mixkit.training import diffusion_objective as objective
    from mixkit.training.lora_network import LoraNetwork

    network = LoraNetwork(unet, [], rank=rank, alpha=rank).attach()
    optimizer = torch.optim.AdamW(network.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(1)

    def step(latents, text):
        noise = objective.offset_noise(latents.shape, generator, 0.0)
        timesteps = torch.randint(0, len(alphas), (latents.shape[0],), generator=generator)
        noisy = objective.add_noise(latents, noise, timesteps, alphas)
        loss = objective.weighted_mse(unet(noisy, timesteps, text).sample, noise, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)  # as the trainer does (accelerate's clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def diffusers_step_fn(unet, rank: int, scheduler):
    import torch.nn.functional as F
    from peft import LoraConfig

    unet.add_adapter(LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian",
                                target_modules=["to_k", "to_q", "to_v", "to_out.0"]))
    params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    generator = torch.Generator().manual_seed(1)

    def step(latents, text):
        noise = torch.randn(latents.shape, generator=generator)
        timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (latents.shape[0],), generator=generator)
        noisy = scheduler.add_noise(latents, noise, timesteps)
        loss = F.mse_loss(unet(noisy, timesteps, text).sample.float(), noise.float(), reduction="mean")
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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
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
    variants = {"mixkit": mixkit_step_fn(copy.deepcopy(base), args.rank, scheduler.alphas_cumprod),
                "diffusers": diffusers_step_fn(copy.deepcopy(base), args.rank, scheduler)}
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
    for name, value in medians.items():
        print(f"  {name:<10} {value:8.3f} samples/s (median)")
    print(f"  mixkit / diffusers: {medians['mixkit'] / medians['diffusers']:.2f}x")


if __name__ == "__main__":
    main()
