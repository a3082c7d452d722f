"""The optimum-intel row of the txt2img table (issue 8), run in a virtualenv of its own.

optimum-intel pins an older transformers (5.5.x at the time of writing) than mixkit needs, so it
cannot share mixkit's environment. This script therefore imports neither mixkit nor anything
from this repository: it exports a diffusers folder with `OVStableDiffusionPipeline` and times
it on the same workload as `benchmarks/txt2img.py` (DPM++ 2M, CFG 7, batch 1), printing one
row in that table's format, to be pasted next to mixkit's `openvino` row.

Create the environment once (a few hundred MB, PyPI only):

    python -m venv ~/.venvs/optimum-intel
    ~/.venvs/optimum-intel/bin/pip install "optimum-intel[openvino]" diffusers pillow

then, from the repository root, either run it with that interpreter directly:

    ~/.venvs/optimum-intel/bin/python benchmarks/optimum_intel_row.py --model PATH/TO/diffusers-folder

or from mixkit's environment with `--venv ~/.venvs/optimum-intel` (or MIXKIT_OPTIMUM_VENV set),
which re-runs this file under that interpreter. Without such an environment it says how to make
one and exits with status 2; it never installs anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SETUP_HINT = ("optimum-intel is not importable here. Create its own environment (it pins transformers 5.5.x, "
              "so it must not go into mixkit's):\n"
              "    python -m venv ~/.venvs/optimum-intel\n"
              "    ~/.venvs/optimum-intel/bin/pip install \"optimum-intel[openvino]\" diffusers pillow\n"
              "then run: python benchmarks/optimum_intel_row.py --venv ~/.venvs/optimum-intel --model FOLDER")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a diffusers Stable Diffusion folder (save_pretrained layout)")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="timed generations (>= 1); the median is printed")
    parser.add_argument("--cache", default=None, help="folder for the exported OpenVINO model (default: a temp dir)")
    parser.add_argument("--venv", default=os.environ.get("MIXKIT_OPTIMUM_VENV"),
                        help="virtualenv with optimum-intel; this file is re-run with its python")
    args = parser.parse_args(argv)
    for name in ("size", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.size % 8:
        parser.error(f"--size must be a multiple of 8 (the VAE's factor), got {args.size}")
    if not (Path(args.model) / "model_index.json").is_file():
        parser.error(f"--model {args.model!r} is not a diffusers folder (no model_index.json)")
    return args


def reexec_in_venv(venv: str, argv: list[str]) -> int:
    python = Path(venv).expanduser() / "bin" / "python"
    if not python.is_file():
        print(f"--venv {venv!r} has no bin/python.\n{SETUP_HINT}", file=sys.stderr)
        return 2
    if Path(sys.executable).resolve() == python.resolve():
        return -1  # already running in it
    rest = [a for i, a in enumerate(argv) if a != "--venv" and (i == 0 or argv[i - 1] != "--venv")]
    env = {k: v for k, v in os.environ.items() if k != "MIXKIT_OPTIMUM_VENV"}
    return subprocess.run([str(python), __file__, *rest], env=env, check=False).returncode


def run_row(args: argparse.Namespace) -> None:
    import tempfile

    from diffusers import DPMSolverMultistepScheduler
    from optimum.intel import OVStableDiffusionPipeline

    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="optimum-intel-"))
    start = time.perf_counter()
    if (cache / "model_index.json").is_file():
        pipe = OVStableDiffusionPipeline.from_pretrained(cache, compile=False)
        how = "reused export"
    else:
        pipe = OVStableDiffusionPipeline.from_pretrained(args.model, export=True, compile=False)
        pipe.save_pretrained(cache)
        how = "exported"
    # DPM++ 2M as A1111 names it; optimum-intel pipelines accept diffusers schedulers.
    pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config, algorithm_type="dpmsolver++")
    pipe.reshape(batch_size=1, height=args.size, width=args.size, num_images_per_prompt=1)
    pipe.compile()
    prepare = time.perf_counter() - start

    def generate():
        # No generator: the noise does not change the time, and optimum-intel versions differ in
        # which generator type they accept.
        return pipe("a photo of a red cube on a table", negative_prompt="blurry", num_inference_steps=args.steps,
                    guidance_scale=7.0, height=args.size, width=args.size)

    generate()  # warm-up: first inference allocates and tunes kernels
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        generate()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"\noptimum-intel {how} in {prepare:.1f} s (export/load + static reshape + compile), cached in {cache}")
    print(f"{args.size}x{args.size}, {args.steps} steps, DPM++ 2M, CFG 7, batch 1; median of {args.rounds}\n")
    print(f"| {'row':24} | s/image |")
    print(f"|{'-' * 26}|---------|")
    print(f"| {'optimum-intel openvino':24} | {median:7.2f} |")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.venv:
        code = reexec_in_venv(args.venv, argv)
        if code != -1:
            return code
    try:
        import optimum.intel  # noqa: F401
    except ImportError:
        print(SETUP_HINT, file=sys.stderr)
        return 2
    run_row(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
