"""HyperTile (A1111's tiled self-attention) against untiled attention in the same run; prints s/image and the ratio.

Run from the repository root:  python -m benchmarks.hypertile [--quick] [--size 512] [--steps 4] [--rounds 3]

Workload: txt2img, Euler, CFG 7, batch 1, one loaded model shared by every row (HyperTile is per call). Default: SD
1.5 architecture with random weights (mixkit's shipped config; `--model PATH` for a real SD 1.x folder), 512x512, 4
steps (a few minutes on 2 CPU cores; the ratio is per UNet call, so more steps change the seconds, not the ratio).
Rows: "untiled"; "hypertile" (A1111's defaults: U-Net, max tile 256 px, swap size 3, so at 512 px only the 64 x 64
level is split, into 2 x 2 tiles or not at all, drawn per call); "hypertile-128" (max tile 128 px: 4 x 4 tiles at
64 x 64, 2 x 2 at 32 x 32 among the choices); "+vae" (the 128 row with the VAE's mid-block attention tiled too).
`--quick`: the tiny test model at 256 px (a smoke run; too small for tiles to pay). `--unet-only`: one SD 1.5 UNet
call per row (batch 2, one CFG step) instead of whole images, for a machine where whole images take too long.
Rows run alternately (A B C D A B C D ...) in one process, so drifting load on a shared machine spreads over all rows;
times are medians of `--rounds` (>= 3). PSNR is against the untiled image of the same seed (with random weights it
says how far tiling moves the output, not how good it looks).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 256x256")
    parser.add_argument("--model", help="a diffusers SD 1.x folder with real weights")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--unet-only", action="store_true",
                        help="time one SD 1.5-architecture UNet call (batch 2: one CFG step) per row instead of whole "
                             "images (no text encoder or VAE: fits a few minutes on a loaded 2-core machine)")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error(f"--rounds must be >= 3 for a median that means something, got {args.rounds}")
    args.size = args.size or (256 if args.quick else 512)
    return args


def rows():
    from pipelines.approx.hypertile_settings import HyperTile

    return {"untiled": None, "hypertile": HyperTile(), "hypertile-128": HyperTile(unet_max_tile=128),
            "hypertile-128+vae": HyperTile(unet_max_tile=128, vae=True)}


def psnr(image: np.ndarray, reference: np.ndarray) -> float:
    mse = float(np.mean((image.astype(np.float64) - reference.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.unet_only:
        return unet_only(args)
    from pipelines.txt2img import TextToImage

    with tempfile.TemporaryDirectory(prefix="mixkit-hypertile-bench-") as tmp:
        from benchmarks.txt2img import build_model_folder

        folder = Path(args.model) if args.model else build_model_folder("tiny" if args.quick else "sd15",
                                                                        Path(tmp) / "model")
        pipe = TextToImage.from_pretrained(folder)
    settings = rows()

    def generate(hypertile) -> np.ndarray:
        result = pipe(prompt=PROMPT, width=args.size, height=args.size, steps=args.steps, cfg_scale=7.0,
                      sampler="Euler", seed=0, hypertile=hypertile)
        return np.asarray(result.images[0])

    images = {name: generate(value) for name, value in settings.items()}  # warm-up, and the PSNR images
    times: dict[str, list[float]] = {name: [] for name in settings}
    for _round in range(args.rounds):
        for name, value in settings.items():
            start = time.perf_counter()
            generate(value)
            times[name].append(time.perf_counter() - start)
            print(f"round {_round + 1}: {name} {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
    baseline = statistics.median(times["untiled"])
    print(f"\n{args.size}x{args.size}, {args.steps} steps, Euler, {args.rounds} rounds, torch threads "
          f"{torch.get_num_threads()}")
    print(f"{'row':<20}{'s/image':>10}{'untiled/row':>13}{'PSNR dB':>10}")
    for name in settings:
        median = statistics.median(times[name])
        print(f"{name:<20}{median:>10.3f}{baseline / median:>12.2f}x{psnr(images[name], images['untiled']):>10.1f}")


def unet_only(args) -> None:
    """s per UNet call (batch 2, as one CFG step) for each U-Net row, alternating, medians of `--rounds`."""
    from types import SimpleNamespace

    from diffusers import UNet2DConditionModel

    from mixkit.models.diffusion.single_file_configs import SHIPPED_CONFIGS
    from pipelines.approx.hypertile import hypertile_call

    torch.manual_seed(0)
    unet = UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(SHIPPED_CONFIGS / "sd15" / "unet")).eval()
    model = SimpleNamespace(unet=unet, vae=None, extras={})
    latent = args.size // 8
    sample, context = torch.randn(2, 4, latent, latent), torch.randn(2, 77, 768)
    settings = {name: value for name, value in rows().items() if value is None or not value.vae}
    outputs, times = {}, {name: [] for name in settings}

    def call(value):
        with torch.no_grad(), hypertile_call(model, value, seed=0):
            return unet(sample, 500, context).sample

    for name, value in settings.items():  # warm-up, and the outputs compared
        outputs[name] = call(value)
    for _round in range(args.rounds):
        for name, value in settings.items():
            start = time.perf_counter()
            call(value)
            times[name].append(time.perf_counter() - start)
            print(f"round {_round + 1}: {name} {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
    baseline = statistics.median(times["untiled"])
    print(f"\nSD 1.5 UNet, {args.size}x{args.size} ({latent}x{latent} latent), batch 2, {args.rounds} rounds, torch "
          f"threads {torch.get_num_threads()}")
    print(f"{'row':<20}{'s/UNet call':>12}{'untiled/row':>13}{'max |diff|':>12}")
    for name in settings:
        median = statistics.median(times[name])
        diff = float((outputs[name] - outputs["untiled"]).abs().max())
        print(f"{name:<20}{median:>12.3f}{baseline / median:>12.2f}x{diff:>12.4f}")


if __name__ == "__main__":
    main()
