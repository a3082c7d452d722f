"""Whole-image txt2img speed: diffusers as users call it vs mixkit's presets and backends; prints a table.

Run from the repository root:  python -m benchmarks.txt2img [--quick] [--arch sd15|tiny] [--rows ...]
    [--optimum-venv PATH]

Workload (issue 8): 512x512, 20 steps, DPM++ 2M, CFG 7, batch 1, SD 1.5 architecture from mixkit's
shipped config with random weights (or `--model PATH` for a real diffusers folder; `--model
mixkit-tiny-sd --size 64 --prompt "a red circle on a blue background"` gives the PSNR column on the
shipped trained model, where it says how much a preset changes a real image). `--quick` is a
smoke run: the tiny test model at 256x256, 4 steps. Rows run in alternation (A B C A B C ...) in
one process, so drifting load on a shared machine spreads over all rows; each time is the median
of `--rounds` (>= 3). Columns:
- s/image: text encode + denoising + VAE decode, median; speed-up vs diffusers' fp32 default.
- ΔRSS: peak resident memory during that row's runs minus the RSS before it (working memory of a
  generation; all rows' weights stay loaded in this one process, so whole-process peaks would not
  separate them). Sampled every 5 ms from /proc/self/statm.
- UNet GFLOP/s: FLOPs of one UNet call (torch's FlopCounterMode) x calls / time inside the UNet,
  and that as % of this machine's bf16 matmul peak, measured in the same run.
- PSNR vs the fp32 image of the same library (diffusers rows vs diffusers fp32, mixkit rows vs
  mixkit "exact"): the two libraries' DPM++ 2M schedules differ in detail, so cross-library
  PSNR is printed once, separately. With random weights the PSNR says how much rounding moves
  the output, not how good an image looks.
`--optimum-venv PATH` (or MIXKIT_OPTIMUM_VENV) adds an "optimum-intel" row: optimum-intel's
OVStableDiffusionPipeline in its own virtualenv and process (benchmarks/optimum_intel_row.py),
exported once before the rounds, then timed in the same alternation; its ΔRSS and UNet time are
measured inside that process, and its PSNR is against diffusers fp32 (same latents, same scheduler).
Rows `mixkit-fast-int8` (torch: int8 UNet) and `mixkit-fast-openvino-int8` (int8 UNet and VAE decoder) are APPROXIMATE, calibrated
on this workload before the rounds (untimed); their fidelity on a trained model is `benchmarks.fidelity`'s.
Rows ending in `-ngms` also skip the negative prompt on some steps (APPROXIMATE, A1111's NGMS: `--ngms SIGMA`,
`--ngms-all-steps`); `benchmarks.fidelity`'s `+ngms` rows measure what that does to a trained model's images.
Rows ending in `-deepcache` run the full UNet every `--deepcache N` steps (default 2) and DeepCache's shallow
branch in between (APPROXIMATE; on OpenVINO the branch is a graph of its own); their UNet GFLOP/s counts every
call as a full one (the work a plain UNet would have done per second), so it can pass the peak.
Row `mixkit-fast-openvino-one-request` is `mixkit-fast-openvino` with the UNet's prompt and negative-prompt rows
run as one request instead of one request per CPU stream (`OpenVinoUNet.parallel_requests = 1`, the path before
2026-11-26), to measure what the parallel requests are worth.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from benchmarks.optimum_intel_client import SKIP_REASON, OptimumIntelServer, venv_python

PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"
NEGATIVE = "blurry, low quality"
ROWS = ("diffusers-fp32", "diffusers-bf16-sdpa-cl", "mixkit-exact", "mixkit-fast", "mixkit-fast-openvino",
        "mixkit-fast-compile", "mixkit-fast-int8", "mixkit-fast-openvino-int8", "mixkit-fast-openvino-ngms",
        "mixkit-fast-openvino-int8-ngms", "mixkit-fast-openvino-deepcache", "mixkit-fast-openvino-int8-deepcache",
        "mixkit-fast-openvino-one-request")
# Opt-in rows: compile (its first run compiles for minutes) and the APPROXIMATE int8 ones (calibration
# takes 5-10 minutes at 256 px and much longer at 512): --rows ... mixkit-fast-int8 mixkit-fast-openvino-int8
DEFAULT_ROWS = ROWS[:5]


@dataclass
class Row:
    name: str
    generate: Callable[[int], np.ndarray]  # seed -> HxWx3 uint8
    unet: object  # the module whose calls are timed
    library: str
    measure: Callable[[int], tuple[np.ndarray, dict]] | None = None  # a row in another process times itself
    times: list[float] = field(default_factory=list)
    unet_times: list[float] = field(default_factory=list)
    unet_calls: list[int] = field(default_factory=list)
    rss_delta: int | None = 0  # None: that process could not reset its peak RSS
    image: np.ndarray | None = None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 256x256, 4 steps")
    parser.add_argument("--arch", choices=("sd15", "tiny"), default=None)
    parser.add_argument("--model", help="a diffusers SD 1.x folder with real weights, or mixkit-tiny-sd")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(DEFAULT_ROWS))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--ngms", type=float, default=1.0, metavar="SIGMA", help="-ngms rows: s_min_uncond (default 1)")
    parser.add_argument("--ngms-all-steps", action="store_true", help="-ngms rows: skip on every step below that sigma")
    parser.add_argument("--deepcache", type=int, default=2, metavar="N",
                        help="-deepcache rows: full UNet every N steps (default 2)")
    parser.add_argument("--calibration-prompts", type=int, default=None,
                        help="int8 rows: calibrate on the first N of the model's (or the generic 8) prompts")
    parser.add_argument("--optimum-venv", default=os.environ.get("MIXKIT_OPTIMUM_VENV"),
                        help="virtualenv with optimum-intel: adds its row (see benchmarks/optimum_intel_row.py)")
    args = parser.parse_args(argv)
    if args.optimum_venv:
        try:
            args.optimum_python = venv_python(args.optimum_venv)
        except ValueError as error:
            parser.error(str(error))
    if args.calibration_prompts is not None and args.calibration_prompts < 1:
        parser.error(f"--calibration-prompts must be >= 1, got {args.calibration_prompts}")
    if args.rounds < 3:
        parser.error(f"--rounds must be >= 3 for a median that means something, got {args.rounds}")
    if not 2 <= args.deepcache <= 50:
        parser.error(f"--deepcache must be in [2, 50] (1 would be the plain UNet), got {args.deepcache}")
    args.arch = args.arch or ("tiny" if args.quick else "sd15")
    args.size = args.size or (256 if args.quick else 512)
    args.steps = args.steps or (4 if args.quick else 20)
    return args


def build_model_folder(arch: str, folder: Path) -> Path:
    """A diffusers folder with random weights: the tiny test model or SD 1.5 from its shipped config."""
    if arch == "tiny":
        from mixkit.testing.tiny_models import build_tiny_sd1

        return build_tiny_sd1(folder, seed=0)
    from diffusers import AutoencoderKL, DPMSolverMultistepScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from mixkit.models.diffusion.single_file_configs import SHIPPED_CONFIGS
    from mixkit.models.diffusion.single_file_tokenizer import load_clip_tokenizer

    configs = SHIPPED_CONFIGS / "sd15"
    torch.manual_seed(0)
    pipe = StableDiffusionPipeline(
        unet=UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(configs / "unet")),
        vae=AutoencoderKL.from_config(AutoencoderKL.load_config(configs / "vae")),
        text_encoder=CLIPTextModel(CLIPTextConfig.from_pretrained(configs / "text_encoder")),
        tokenizer=load_clip_tokenizer(),
        scheduler=DPMSolverMultistepScheduler.from_config(
            DPMSolverMultistepScheduler.load_config(configs / "scheduler")),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder


def diffusers_row(name: str, folder: Path, args, *, fast: bool) -> Row:
    from diffusers import DPMSolverMultistepScheduler, StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(folder, torch_dtype=torch.bfloat16 if fast else torch.float32)
    pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)  # "DPM++ 2M"
    pipe.set_progress_bar_config(disable=True)
    if fast:  # the documented manual setup: bf16 weights, SDPA (diffusers' default processor), NHWC
        pipe.unet.to(memory_format=torch.channels_last)
        pipe.vae.to(memory_format=torch.channels_last)

    def generate(seed: int) -> np.ndarray:
        out = pipe(args.prompt, negative_prompt=NEGATIVE, width=args.size, height=args.size, num_inference_steps=args.steps,
                   guidance_scale=7.0, generator=torch.Generator().manual_seed(seed), output_type="np")
        return (out.images[0] * 255).round().astype(np.uint8)
    return Row(name, generate, pipe.unet, "diffusers")


def mixkit_row(name: str, folder: Path, args) -> Row:
    from pipelines.optimize import optimize
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(folder)
    preset = "exact" if name == "mixkit-exact" else "fast"
    backend = "openvino" if "openvino" in name else "torch"
    report = optimize(pipe, preset, backend, compile=name.endswith("compile"))
    print(f"[{name}]\n{report.summary()}")
    if name.endswith("-one-request"):  # the UNet's CFG rows as one request, not one per CPU stream
        pipe.model.unet.parallel_requests = 1
    ngms = name.endswith("-ngms")  # APPROXIMATE: NGMS, skipping the negative prompt on some late steps
    skip = dict(s_min_uncond=args.ngms, s_min_uncond_all=args.ngms_all_steps) if ngms else {}
    deepcache = args.deepcache if name.endswith("-deepcache") else None  # APPROXIMATE: DeepCache
    from pipelines.approx import Int8Calibration, approximate

    int8 = False
    if name.removesuffix("-ngms").removesuffix("-deepcache").endswith("int8"):
        # APPROXIMATE: calibrated on the model's (or the generic) prompts at this workload
        prompts = None
        if args.calibration_prompts is not None:  # fewer than the model's (or the generic) set: faster at 512 px
            from pipelines.approx import DEFAULT_CALIBRATION_PROMPTS

            own = pipe.model.recommended.calibration_prompts or DEFAULT_CALIBRATION_PROMPTS
            prompts = tuple(own[:args.calibration_prompts])
        int8 = Int8Calibration(prompts=prompts, width=args.size, height=args.size, steps=args.steps,
                               cfg_scale=7.0, sampler="DPM++ 2M")
    if int8 or deepcache:
        start = time.perf_counter()
        print(approximate(pipe, int8=int8, deepcache=deepcache).warning(), f"({time.perf_counter() - start:.0f} s)")

    def generate(seed: int) -> np.ndarray:
        result = pipe(prompt=args.prompt, negative_prompt=NEGATIVE, width=args.size, height=args.size, steps=args.steps,
                      cfg_scale=7.0, sampler="DPM++ 2M", seed=seed, **skip)
        return np.asarray(result.images[0])
    return Row(name, generate, pipe.model.unet, "mixkit")


class UnetTimer:
    """Accumulates wall time spent inside the UNet (torch module or OpenVINO stand-in)."""

    def __init__(self, unet) -> None:
        self.seconds, self.calls, self.unet = 0.0, 0, unet
        self._own = type(unet).__dict__.get("__call__")  # None: inherited from nn.Module
        self._call = type(unet).__call__
        timer = self

        def timed(module, *a, **k):
            start = time.perf_counter()
            try:
                return timer._call(module, *a, **k)
            finally:
                timer.seconds += time.perf_counter() - start
                # in CFG calls (batch 2, what `unet_flops` counts): a step that skips the negative prompt is half of one
                sample = a[0] if a else k.get("sample")
                timer.calls += sample.shape[0] / 2 if hasattr(sample, "shape") else 1
        self._timed = timed

    def __enter__(self):
        self.seconds, self.calls = 0.0, 0
        type(self.unet).__call__ = self._timed  # class-level: instance attributes are bypassed by call syntax
        return self

    def __exit__(self, *exc):
        if self._own is None:
            del type(self.unet).__call__
        else:
            type(self.unet).__call__ = self._own


class PeakRss:
    """Peak RSS (bytes) while inside the block, sampled by a thread."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def unet_flops(folder: Path, size: int) -> int:
    """FLOPs of one CFG UNet call (batch 2) at `size` px, counted by torch (matmuls and convs)."""
    from diffusers import UNet2DConditionModel
    from torch.utils.flop_counter import FlopCounterMode

    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()
    latent = size // 8
    sample = torch.randn(2, unet.config.in_channels, latent, latent)
    context = torch.randn(2, 77, unet.config.cross_attention_dim)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        unet(sample, torch.tensor(500), context)
    del unet
    return counter.get_total_flops()


def bf16_matmul_peak(seconds: float = 2.0, n: int = 2048) -> float:
    """Best-of FLOP/s of an n x n x n bf16 matmul on this machine, now (same threads as the rows)."""
    a, b = torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16)
    torch.mm(a, b)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * n ** 3 / (time.perf_counter() - start))
    return best


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255 ** 2 / mse))


def run(args) -> list[Row]:
    """The table for `args`; the work folder (random-weight model, exports: GBs at SD size) is removed after."""
    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="mixkit-bench-"))
    try:
        return _run_in(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_in(work: Path, args) -> list[Row]:
    if args.model:
        from mixkit.io.sources import resolve_model_source

        folder = Path(resolve_model_source(args.model))  # a folder, or a shipped name such as mixkit-tiny-sd
    else:
        folder = build_model_folder(args.arch, work / "model")
    flops = unet_flops(folder, args.size)
    peak = bf16_matmul_peak()
    rows = [diffusers_row(n, folder, args, fast=n.endswith("cl")) if n.startswith("diffusers") else mixkit_row(n, folder, args)
            for n in args.rows]
    server = None
    if args.optimum_venv:  # exports before the rounds; blocks until its process is ready
        server = OptimumIntelServer(args.optimum_python, folder, work, size=args.size, steps=args.steps,
                                    prompt=args.prompt, negative_prompt=NEGATIVE, threads=args.threads)
        rows.append(Row("optimum-intel", lambda seed: server.generate(seed)[0], None, "diffusers",
                        measure=server.generate))
    try:
        for row in rows:  # warm-up (first-call allocations, OpenVINO/compile build) outside the timings
            row.image = row.generate(1)
        gc.collect()
        for _ in range(args.rounds):
            for row in rows:
                image, cost = row.measure(1) if row.measure else measure_in_process(row, 1)
                row.times.append(cost["seconds"])
                row.unet_times.append(cost["unet_seconds"])
                row.unet_calls.append(cost["unet_calls"])
                row.rss_delta = None if cost["rss_delta"] is None else max(row.rss_delta, cost["rss_delta"])
                exact = not row.name.endswith(("openvino", "compile", "optimum-intel", "int8", "ngms", "deepcache"))
                assert np.array_equal(image, row.image) or not exact, row.name
    finally:
        if server is not None:
            server.close()
    print_table(rows, args, flops, peak, note=server.describe() if server else SKIP_REASON)
    return rows


def measure_in_process(row: Row, seed: int) -> tuple[np.ndarray, dict]:
    """One generation of an in-process row, with its seconds, UNet seconds and calls, ΔRSS (bytes)."""
    with PeakRss() as rss, UnetTimer(row.unet) as timer:
        start = time.perf_counter()
        image = row.generate(seed)
        seconds = time.perf_counter() - start
    return image, {"seconds": seconds, "unet_seconds": timer.seconds, "unet_calls": timer.calls,
                   "rss_delta": rss.peak - rss.start}


def print_table(rows: list[Row], args, flops: int, peak: float, note: str = "") -> None:
    base = next((r for r in rows if r.name == "diffusers-fp32"), rows[0])
    references = {"diffusers": next((r for r in rows if r.name == "diffusers-fp32"), None),
                  "mixkit": next((r for r in rows if r.name == "mixkit-exact"), None)}
    base_time = statistics.median(base.times)
    print(f"\n{args.model or (args.arch + ' architecture, random weights')}, {args.size}x{args.size}, {args.steps} steps, DPM++ 2M, CFG 7, batch 1; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; median of {args.rounds} alternating rounds")
    print(f"UNet: {flops / 1e9:.1f} GFLOP per CFG call; bf16 matmul peak measured now: {peak / 1e9:.0f} GFLOP/s\n")
    width = max(24, *(len(row.name) for row in rows))
    print(f"| {'row':{width}} | s/image | speed-up | ΔRSS MB | UNet GFLOP/s | % bf16 peak | PSNR dB |")
    print(f"|{'-' * (width + 2)}|---------|----------|---------|--------------|-------------|---------|")
    for row in rows:
        seconds = statistics.median(row.times)
        unet_rate = flops * statistics.median(row.unet_calls) / statistics.median(row.unet_times)
        ref = references[row.library]
        quality = "ref" if ref is row else "n/a" if ref is None else f"{psnr(row.image, ref.image):.1f}"
        rss = "n/a" if row.rss_delta is None else f"{row.rss_delta / 2**20:.0f}"
        print(f"| {row.name:{width}} | {seconds:7.2f} | {base_time / seconds:7.2f}x | {rss:>7} | "
              f"{unet_rate / 1e9:12.1f} | {100 * unet_rate / peak:10.0f}% | {quality:>7} |")
    if references["diffusers"] is not None and references["mixkit"] is not None:
        print(f"\nmixkit exact vs diffusers fp32 (schedules differ in detail): "
              f"{psnr(references['mixkit'].image, references['diffusers'].image):.1f} dB")
    if any("int8" in row.name for row in rows):
        print("\nint8 rows (APPROXIMATE) compute in int8, whose peak is above the bf16 one: their % can pass 100.")
    if any(row.name.endswith("-deepcache") for row in rows):
        print(f"\n-deepcache rows (APPROXIMATE, full UNet every {args.deepcache} steps): GFLOP/s counts each shallow call "
              "as a full one (the plain UNet's work per second).")
    if note:
        print(f"\n{note}")


if __name__ == "__main__":
    run(parse_args())
