"""Approximate speed-ups (TAESD, DeepCache, ToMe) against the exact pipeline in the same run; prints a table.

Run from the repository root:  python -m benchmarks.approx_speedups [--quick] [--deepcache N] [--tome R]

Workload: txt2img, DPM++ 2M, CFG 7, batch 1. Default: SD 1.5 architecture with random weights
(mixkit's shipped config; or `--model PATH` for a real SD 1.x diffusers folder), 512x512, 20
steps, and a TAESD of the real architecture (diffusers' AutoencoderTiny defaults, random
weights; or `--taesd PATH` for real weights). `--quick`: the tiny test model and an 8-channel
TAESD, 128x128, 6 steps (a smoke run: about 25 s of CPU; at this size ToMe's bookkeeping costs
more than the attention it saves, so only the full-size run says anything about ToMe).
Rows run alternately (A B C A B C ...) in one process, so drifting load on a shared machine
spreads over all rows; times are medians of `--rounds` (>= 3).
Columns: s/image (median), speed-up vs "exact", PSNR vs the exact image of the same seed (with
random weights it says how far the approximation moves the output, not how good it looks),
and for DeepCache rows the full/cached UNet calls summed over all runs of that row.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"
NEGATIVE = "blurry, low quality"


@dataclass
class Row:
    name: str
    generate: Callable[[int], np.ndarray]
    pipe: object
    times: list[float] = field(default_factory=list)
    image: np.ndarray | None = None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 128x128, 6 steps")
    parser.add_argument("--model", help="a diffusers SD 1.x folder with real weights")
    parser.add_argument("--taesd", help="a TAESD folder with real weights (named taesd...)")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deepcache", type=int, default=3, metavar="N")
    parser.add_argument("--tome", type=float, default=0.5, metavar="R")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error(f"--rounds must be >= 3 for a median that means something, got {args.rounds}")
    args.size = args.size or (128 if args.quick else 512)
    args.steps = args.steps or (6 if args.quick else 20)
    return args


def build_taesd_folder(folder: Path, tiny: bool) -> Path:
    """A TAESD folder with random weights: the real architecture (AutoencoderTiny defaults), or for
    `--quick` an 8-channel one sized like the tiny test model's VAE."""
    from diffusers import AutoencoderTiny

    torch.manual_seed(0)
    small = dict(encoder_block_out_channels=(8,) * 4, decoder_block_out_channels=(8,) * 4,
                 num_encoder_blocks=(1,) * 4, num_decoder_blocks=(1,) * 4) if tiny else {}
    AutoencoderTiny(**small).save_pretrained(folder, safe_serialization=True)
    return folder


def make_row(name: str, folder: Path, taesd: Path, args) -> Row:
    from pipelines.approx import approximate
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(folder)
    settings = {
        "exact": {},
        "taesd": {"taesd": str(taesd)},
        f"deepcache-{args.deepcache}": {"deepcache": args.deepcache},
        f"tome-{args.tome:g}": {"tome": args.tome},
        "all": {"taesd": str(taesd), "deepcache": args.deepcache, "tome": args.tome},
    }[name]
    if settings:
        approximate(pipe, **settings)

    def generate(seed: int) -> np.ndarray:
        result = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, width=args.size, height=args.size, steps=args.steps,
                      cfg_scale=7.0, sampler="DPM++ 2M", seed=seed)
        return np.asarray(result.images[0])
    return Row(name, generate, pipe)


def psnr(image: np.ndarray, reference: np.ndarray) -> float:
    mse = float(np.mean((image.astype(np.float64) - reference.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="mixkit-approx-bench-") as tmp:
        from benchmarks.txt2img import build_model_folder

        folder = Path(args.model) if args.model else build_model_folder("tiny" if args.quick else "sd15", Path(tmp) / "model")
        taesd = Path(args.taesd) if args.taesd else build_taesd_folder(Path(tmp) / "taesd", tiny=args.quick)
        names = ["exact", "taesd", f"deepcache-{args.deepcache}", f"tome-{args.tome:g}", "all"]
        rows = [make_row(name, folder, taesd, args) for name in names]
        for row in rows:  # warm-up (first-call allocations), also the PSNR image: same seed everywhere
            row.image = row.generate(0)
        for _round in range(args.rounds):
            for row in rows:
                start = time.perf_counter()
                row.generate(0)
                row.times.append(time.perf_counter() - start)
    print_table(rows, args)


def print_table(rows: list[Row], args) -> None:
    from pipelines.approx import deepcache_state

    baseline = statistics.median(rows[0].times)
    print(f"\n{args.size}x{args.size}, {args.steps} steps, DPM++ 2M, {args.rounds} rounds, torch threads "
          f"{torch.get_num_threads()}")
    print(f"{'row':<16}{'s/image':>10}{'speed-up':>10}{'PSNR dB':>10}  UNet full/cached")
    for row in rows:
        median = statistics.median(row.times)
        state = deepcache_state(row.pipe.model.unet)
        calls = f"{state.full_calls}/{state.cached_calls} (all runs)" if state is not None else ""
        print(f"{row.name:<16}{median:>10.3f}{baseline / median:>9.2f}x{psnr(row.image, rows[0].image):>10.1f}  {calls}")


if __name__ == "__main__":
    main()
