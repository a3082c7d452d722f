"""Time applying + removing a LoRA (mixkit merge / runtime vs diffusers), and runtime's per-step cost.

Run from the repository root:  python -m benchmarks.lora_apply  [--quick] [--rank 128 --repeats 3]

The default builds a randomly initialised UNet with SDXL base's real config (2.6 G parameters,
~10 GB of fp32 RAM, minutes on a CPU) and a rank-128 kohya LoRA on every attention, feed-forward
and projection layer, as large SDXL LoRAs are. `--quick` uses a tiny UNet and rank 4 for a smoke
run. Variants run in alternation (A B C A B C ...) within one process so drifting machine load
spreads over all of them; each figure is the median of the rounds and "vs diffusers" is that
median divided by diffusers' (`load_lora_adapter` + `fuse_lora`, then `unfuse_lora` + `unload_lora`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

SDXL_UNET = dict(
    sample_size=128, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280),
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    transformer_layers_per_block=(1, 2, 10), attention_head_dim=(5, 10, 20), cross_attention_dim=2048,
    use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=256,
    projection_class_embeddings_input_dim=2816,
)
TINY_UNET = dict(
    sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
    transformer_layers_per_block=(1, 2), attention_head_dim=(2, 4), cross_attention_dim=64, norm_num_groups=8,
    use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
    projection_class_embeddings_input_dim=80,
)
TARGETS = ("to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj", "ff.net.2")


def build_unet(config: dict):
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    return UNet2DConditionModel(**config).eval().requires_grad_(False)


def write_loras(unet, rank: int, folder: Path) -> tuple[Path, dict]:
    """A kohya file for mixkit and the same weights as a PEFT state dict + alphas for diffusers."""
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(1)
    kohya, peft = {}, {}
    for path, module in unet.named_modules():
        if not isinstance(module, torch.nn.Linear) or not path.endswith(TARGETS):
            continue
        r = min(rank, module.in_features, module.out_features)
        down = torch.randn(r, module.in_features, generator=generator) * 0.01
        up = torch.randn(module.out_features, r, generator=generator) * 0.01
        name = "lora_unet_" + path.replace(".", "_")
        kohya.update({f"{name}.lora_down.weight": down, f"{name}.lora_up.weight": up, f"{name}.alpha": torch.tensor(r / 2)})
        peft.update({f"unet.{path}.lora_A.weight": down, f"unet.{path}.lora_B.weight": up})
    file = folder / "bench.safetensors"
    save_file(kohya, str(file))
    metadata = {"unet.r": rank, "unet.lora_alpha": rank / 2, "unet.target_modules": list(TARGETS)}
    return file, {"state": peft, "metadata": metadata}


def unet_step_inputs(config: dict, latent_size: int | None = None):
    generator = torch.Generator().manual_seed(2)
    size = latent_size or config["sample_size"]
    sample = torch.randn(1, 4, size, size, generator=generator)
    context = torch.randn(1, 77, config["cross_attention_dim"], generator=generator)
    embeds = config["projection_class_embeddings_input_dim"] - 6 * config["addition_time_embed_dim"]
    added = {"text_embeds": torch.randn(1, embeds, generator=generator), "time_ids": torch.randn(1, 6, generator=generator)}
    return sample, torch.tensor([500]), context, added


def apply_remove_variants(unet, kohya_file: Path, diffusers_lora: dict):
    from mixkit.lora import LoraRequest, apply_loras

    def mixkit(mode):
        def run():
            apply_loras(unet, [], [LoraRequest(kohya_file)], mode=mode).remove()
        return run

    def diffusers():
        unet.load_lora_adapter(dict(diffusers_lora["state"]), prefix="unet", metadata=diffusers_lora["metadata"])
        unet.fuse_lora()
        unet.unfuse_lora()
        unet.unload_lora()

    return {"mixkit merge": mixkit("merge"), "mixkit runtime": mixkit("runtime"), "diffusers": diffusers}


def alternate(variants: dict, repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def step_variants(unet, kohya_file: Path, diffusers_lora: dict, config: dict, latent_size: int | None = None):
    """One UNet forward without LoRA, merged, in runtime mode, and with diffusers' unfused adapter."""
    from mixkit.lora import LoraRequest, apply_loras

    sample, timestep, context, added = unet_step_inputs(config, latent_size)

    def step():
        with torch.no_grad():
            unet(sample, timestep, context, added_cond_kwargs=added)

    def with_mixkit(mode):
        def run():
            handle = apply_loras(unet, [], [LoraRequest(kohya_file)], mode=mode)
            try:
                start = time.perf_counter()
                step()
                return time.perf_counter() - start
            finally:
                handle.remove()
        return run

    def with_diffusers():
        unet.load_lora_adapter(dict(diffusers_lora["state"]), prefix="unet", metadata=diffusers_lora["metadata"])
        try:
            start = time.perf_counter()
            step()
            return time.perf_counter() - start
        finally:
            unet.unload_lora()

    def plain():
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    return {"no LoRA": plain, "mixkit merge": with_mixkit("merge"), "mixkit runtime": with_mixkit("runtime"),
            "diffusers unfused": with_diffusers}


def alternate_timed(variants: dict, repeats: int) -> dict[str, float]:
    """Like `alternate`, for variants that time only their own inner step and return it."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            times[name].append(run())
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny UNet, rank 4: a smoke run of the script")
    parser.add_argument("--rank", type=int, default=None, help="LoRA rank (default 128; 4 with --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds per variant (median reported)")
    parser.add_argument("--latent-size", type=int, default=None,
                        help="latent side for the per-step timing (default: the UNet's sample size, 128 = 1024 px "
                             "for SDXL; 64 = 512 px keeps a CPU run to minutes)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    config = TINY_UNET if args.quick else SDXL_UNET
    rank = args.rank or (4 if args.quick else 128)
    if rank < 1:
        parser.error(f"--rank must be >= 1, got {rank}")
    torch.set_grad_enabled(False)
    unet = build_unet(config)
    with tempfile.TemporaryDirectory() as folder:
        kohya_file, diffusers_lora = write_loras(unet, rank, Path(folder))
        modules = sum(1 for k in diffusers_lora["state"] if k.endswith("lora_A.weight"))
        print(f"UNet {'tiny' if args.quick else 'SDXL base'} ({sum(p.numel() for p in unet.parameters()) / 1e6:.1f} M params), "
              f"rank-{rank} LoRA on {modules} layers, {args.repeats} alternating rounds, medians\n")
        apply_times = alternate(apply_remove_variants(unet, kohya_file, diffusers_lora), args.repeats)
        steps = step_variants(unet, kohya_file, diffusers_lora, config, args.latent_size)
        steps["no LoRA"]()  # warm-up: first-call allocations must not land on one variant
        step_times = alternate_timed(steps, args.repeats)
    base = apply_times["diffusers"]
    print(f"{'apply + remove':<22}{'seconds':>10}{'vs diffusers':>14}")
    for name, seconds in apply_times.items():
        print(f"{name:<22}{seconds:>10.3f}{seconds / base:>13.2f}x")
    plain = step_times["no LoRA"]
    print(f"\n{'one UNet step':<22}{'seconds':>10}{'vs no LoRA':>14}")
    for name, seconds in step_times.items():
        print(f"{name:<22}{seconds:>10.3f}{seconds / plain:>13.2f}x")


if __name__ == "__main__":
    main()
