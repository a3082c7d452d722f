"""How far the fast paths move a trained model's images: PSNR against the float32 torch image, over many prompts.

Run from the repository root:  python -m benchmarks.fidelity [--prompts 24] [--rows ...]

The performance issue's fidelity bar (PSNR >= 30 dB against the fp32 reference image) needs a
trained model; mixkit-tiny-sd is the one shipped. One prompt says little (diffusion is chaotic:
a small change in one step can move a shape), so this prints the median, the minimum and the
share of prompts at >= 30 dB over held-out shapes-world captions that are not among the model's
int8 calibration prompts. Workload: the model's native size, 20 steps, DPM++ 2M, its recommended
CFG, seed i for prompt i. Rows: "fast" (torch bf16), "fast+openvino" (bf16 graphs), and the
APPROXIMATE int8 paths calibrated on the model's own calibration prompts: "fast+int8" (torch UNet:
torchao + inductor), "fast+openvino+int8" (NNCF: UNet and VAE decoder) and
"fast+openvino+int8-unet" (NNCF, the UNet only: what the int8 decoder adds). A row ending in "+ngms"
also skips the negative prompt on some steps (APPROXIMATE, A1111's NGMS: `--ngms SIGMA`, and
`--ngms-all-steps`), as `python -m benchmarks.txt2img --ngms ...` times it. A row ending in "+deepcache" runs
the full UNet every `--deepcache N` steps (default 2) and DeepCache's shallow branch between (APPROXIMATE).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

ROWS = ("fast", "fast+int8", "fast+openvino", "fast+openvino+int8", "fast+openvino+int8-unet", "fast+ngms",
        "fast+openvino+ngms", "fast+openvino+int8+ngms", "fast+deepcache", "fast+openvino+deepcache",
        "fast+openvino+int8+deepcache")
DEFAULT_ROWS = ROWS[:4]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mixkit-tiny-sd")
    parser.add_argument("--prompts", type=int, default=24, help="held-out shapes-world captions (>= 3)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(DEFAULT_ROWS))
    parser.add_argument("--ngms", type=float, default=1.0, metavar="SIGMA", help="+ngms rows: s_min_uncond (default 1)")
    parser.add_argument("--ngms-all-steps", action="store_true", help="+ngms rows: skip on every step below that sigma")
    parser.add_argument("--deepcache", type=int, default=2, metavar="N", help="+deepcache rows: full UNet every N steps")
    args = parser.parse_args(argv)
    if not 2 <= args.deepcache <= 50:
        parser.error(f"--deepcache must be in [2, 50] (1 would be the plain UNet), got {args.deepcache}")
    if args.prompts < 3:
        parser.error(f"--prompts must be >= 3 for a median that means something, got {args.prompts}")
    return args


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255 ** 2 / mse))


def held_out_prompts(count: int, calibration: tuple[str, ...]) -> list[str]:
    from mixkit.data.shapes import generate_samples

    prompts, start = [], 0
    while len(prompts) < count:
        for sample in generate_samples(count, seed=77, start=start):
            if sample.caption not in calibration and sample.caption not in prompts and len(prompts) < count:
                prompts.append(sample.caption)
        start += count
    return prompts


def build_row(name: str, model: str, steps: int, deepcache: int):
    from pipelines.approx import Int8Calibration, approximate
    from pipelines.optimize import optimize
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(model)
    optimize(pipe, "fast", "openvino" if "openvino" in name else "torch")
    int8 = (Int8Calibration(steps=steps, vae_decoder=False if name.endswith("-unet") else None)
            if "int8" in name else False)
    cache = deepcache if name.endswith("+deepcache") else None
    if int8 or cache:
        start = time.perf_counter()
        print(approximate(pipe, int8=int8, deepcache=cache).warning(), f"({time.perf_counter() - start:.0f} s)")
    return pipe


def run(args) -> dict[str, list[float]]:
    from pipelines.txt2img import TextToImage

    reference = TextToImage.from_pretrained(args.model)
    prompts = held_out_prompts(args.prompts, reference.model.recommended.calibration_prompts)

    size = reference.model.native_size

    def images(pipe, ngms: bool = False) -> list[np.ndarray]:
        skip = dict(s_min_uncond=args.ngms, s_min_uncond_all=args.ngms_all_steps) if ngms else {}
        return [np.asarray(pipe(prompt=p, seed=i, steps=args.steps, sampler="DPM++ 2M", width=size, height=size,
                                **skip).images[0]) for i, p in enumerate(prompts)]

    expected = images(reference)
    scores = {}
    for name in args.rows:
        pipe = build_row(name.removesuffix("+ngms"), args.model, args.steps, args.deepcache)
        scores[name] = [psnr(a, b) for a, b in zip(images(pipe, ngms=name.endswith("+ngms")), expected)]
    notes = f"; +ngms: NGMS {args.ngms}{' all steps' if args.ngms_all_steps else ''}" if any(
        name.endswith("+ngms") for name in args.rows) else ""
    if any(name.endswith("+deepcache") for name in args.rows):
        notes += f"; +deepcache: full UNet every {args.deepcache} steps"
    print(f"\n{args.model}, {len(prompts)} held-out prompts, {args.steps} steps, DPM++ 2M, recommended CFG{notes}; "
          f"PSNR against the float32 torch image of the same prompt and seed\n")
    print(f"| {'row':28} | median dB | min dB | prompts >= 30 dB |")
    print(f"|{'-' * 30}|-----------|--------|------------------|")
    for name, values in scores.items():
        share = sum(v >= 30 for v in values) / len(values)
        print(f"| {name:28} | {statistics.median(values):9.1f} | {min(values):6.1f} | {100 * share:15.0f}% |")
    return scores


if __name__ == "__main__":
    run(parse_args())
