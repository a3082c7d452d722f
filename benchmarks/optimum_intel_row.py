"""The optimum-intel row of the txt2img table (issue 8), run in a virtualenv of its own.

optimum-intel pins an older transformers (5.5.x at the time of writing) than mixkit needs, so it
cannot share mixkit's environment. This script therefore imports neither mixkit nor anything
from this repository: it exports a diffusers folder with `OVStableDiffusionPipeline` (static
shape, optimum's default precision) and runs it on the same workload as `benchmarks/txt2img.py`:
DPM++ 2M (diffusers' DPMSolverMultistepScheduler from the folder's scheduler config), CFG 7,
batch 1, the same prompts and a CPU `torch.Generator` seeded per image, so its image can be
compared with the diffusers fp32 row's.

Create the environment once (about 1.6 GB, PyPI only; SETUP_HINT says why torch and torchvision
are pinned and torchvision then removed):

    python -m venv ~/.venvs/optimum-intel
    ~/.venvs/optimum-intel/bin/pip install torch==2.13.0 torchvision==0.28.0 "optimum-intel[openvino]" \\
        diffusers pillow accelerate
    ~/.venvs/optimum-intel/bin/pip uninstall -y torchvision

Two ways to use it:
- `python -m benchmarks.txt2img --optimum-venv ~/.venvs/optimum-intel` adds an "optimum-intel"
  row to the main table, timed in alternation with the other rows. It starts this file with
  `--serve`: export once, print `ready {json}`, then answer each stdin line
  `generate SEED OUT.npy` with `done {json}` (seconds, UNet seconds and calls, ΔRSS) after saving
  the HxWx3 uint8 image to OUT.npy; `quit` or end of input stops it.
- On its own, printing one row to paste next to mixkit's `openvino` row:
      ~/.venvs/optimum-intel/bin/python benchmarks/optimum_intel_row.py --model PATH/TO/diffusers-folder
  or from mixkit's environment with `--venv ~/.venvs/optimum-intel` (or MIXKIT_OPTIMUM_VENV set),
  which re-runs this file under that interpreter. Without such an environment it says how to
  make one and exits with status 2; it never installs anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"  # = benchmarks/txt2img.py
NEGATIVE = "blurry, low quality"
SETUP_HINT = ("optimum-intel is not importable here. Create its own environment (it pins transformers 5.5.x, "
              "so it must not go into mixkit's):\n"
              "    python -m venv ~/.venvs/optimum-intel\n"
              "    ~/.venvs/optimum-intel/bin/pip install torch==2.13.0 torchvision==0.28.0 "
              "\"optimum-intel[openvino]\" diffusers pillow accelerate\n"
              "    ~/.venvs/optimum-intel/bin/pip uninstall -y torchvision\n"
              "(torch and torchvision pinned to a pair, with torch a CPU build: unpinned, optimum-intel's torchvision "
              "requirement pulls the newest torch, a multi-GB CUDA build. PyPI's torchvision is built against CUDA "
              "torch and fails to import beside the CPU build ('operator torchvision::nms does not exist'), which "
              "makes transformers refuse AutoProcessor and so optimum.intel; optimum-intel imports torchvision only "
              "for vision-language models, so it is uninstalled.)\n"
              "then run: python benchmarks/optimum_intel_row.py --venv ~/.venvs/optimum-intel --model FOLDER")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a diffusers Stable Diffusion folder (save_pretrained layout)")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="timed generations (>= 1); the median is printed")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--negative-prompt", default=NEGATIVE)
    parser.add_argument("--seed", type=int, default=1, help="seed of every generation when not serving")
    parser.add_argument("--out", help="save the last image here (.npy, HxWx3 uint8) when not serving")
    parser.add_argument("--threads", type=int, default=None, help="OpenVINO inference threads (default: its own)")
    parser.add_argument("--cache", default=None, help="folder for the exported OpenVINO model (default: a temp dir)")
    parser.add_argument("--serve", action="store_true", help="answer `generate SEED OUT.npy` lines on stdin")
    parser.add_argument("--venv", default=os.environ.get("MIXKIT_OPTIMUM_VENV"),
                        help="virtualenv with optimum-intel; this file is re-run with its python")
    args = parser.parse_args(argv)
    for name in ("size", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if args.size % 8:
        parser.error(f"--size must be a multiple of 8 (the VAE's factor), got {args.size}")
    if not (Path(args.model) / "model_index.json").is_file():
        parser.error(f"--model {args.model!r} is not a diffusers folder (no model_index.json)")
    return args


def venv_python_path(venv: str) -> Path:
    """Where virtualenv `venv` keeps its interpreter (it may not exist)."""
    return Path(venv).expanduser() / "bin" / "python"


def reexec_in_venv(venv: str, argv: list[str]) -> int:
    python = venv_python_path(venv)
    if not python.is_file():
        print(f"--venv {venv!r} has no bin/python.\n{SETUP_HINT}", file=sys.stderr)
        return 2
    # sys.prefix, not the interpreter's resolved path: every venv's python links to the same base one.
    if Path(sys.prefix).resolve() == Path(venv).expanduser().resolve():
        return -1  # already running in it
    rest = [a for i, a in enumerate(argv) if a != "--venv" and (i == 0 or argv[i - 1] != "--venv")]
    env = {k: v for k, v in os.environ.items() if k != "MIXKIT_OPTIMUM_VENV"}
    return subprocess.run([str(python), __file__, *rest], env=env, check=False).returncode


def loadable_source(model: Path, staging: Path) -> Path:
    """`model`, or a linked copy of it whose CLIP text encoder this environment's transformers reads.

    Newer transformers (5.23 in mixkit's environment) save CLIPTextModel weights without the
    `text_model.` prefix; 5.5.x reads such a file as all "unexpected" keys and silently exports
    the randomly initialised encoder, which would change every image. Real SD 1.x folders keep
    the prefix and are used as they are.
    """
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    encoder = model / "text_encoder"
    files = sorted(encoder.glob("*.safetensors"))
    if not files:
        return model
    with safe_open(files[0], "pt") as f:
        if any(key.startswith("text_model.") for key in f.keys()):
            return model
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "text_encoder").mkdir(parents=True)
    for entry in model.iterdir():
        if entry.name != "text_encoder":
            (staging / entry.name).symlink_to(entry.resolve())
    for entry in encoder.iterdir():
        target = staging / "text_encoder" / entry.name
        if entry.suffix == ".safetensors":
            save_file({f"text_model.{k}": v for k, v in load_file(entry).items()}, target, metadata={"format": "pt"})
        elif entry.name.endswith(".safetensors.index.json"):
            index = json.loads(entry.read_text())
            index["weight_map"] = {f"text_model.{k}": v for k, v in index["weight_map"].items()}
            target.write_text(json.dumps(index))
        else:
            target.symlink_to(entry.resolve())
    return staging


class Generator:
    """The exported, statically shaped pipeline and one measured generation at a time."""

    def __init__(self, args: argparse.Namespace) -> None:
        from diffusers import DPMSolverMultistepScheduler
        from optimum.intel import OVStableDiffusionPipeline

        self.args = args
        cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="optimum-intel-"))
        ov_config = {"INFERENCE_NUM_THREADS": args.threads} if args.threads else None
        start = time.perf_counter()
        if (cache / "model_index.json").is_file():
            pipe = OVStableDiffusionPipeline.from_pretrained(cache, compile=False, ov_config=ov_config)
            how = "reused export"
        else:
            source = loadable_source(Path(args.model), cache.with_name(cache.name + "-source"))
            pipe = OVStableDiffusionPipeline.from_pretrained(source, export=True, compile=False, ov_config=ov_config)
            pipe.save_pretrained(cache)
            how = "exported" + (" (text encoder keys re-prefixed for this transformers)" if source != Path(args.model)
                                else "")
        # Same construction as txt2img's diffusers rows: DPM++ 2M is the scheduler's default algorithm.
        pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
        pipe.set_progress_bar_config(disable=True)
        pipe.reshape(batch_size=1, height=args.size, width=args.size, num_images_per_prompt=1)
        pipe.compile()
        self.pipe = pipe
        self.unet_seconds, self.unet_calls = 0.0, 0
        forward = pipe.unet.forward

        def timed_forward(*a, **k):  # the OV UNet's __call__ looks up forward on the instance
            start = time.perf_counter()
            try:
                return forward(*a, **k)
            finally:
                self.unet_seconds += time.perf_counter() - start
                self.unet_calls += 1
        pipe.unet.forward = timed_forward
        self.info = {
            "how": how, "prepare_seconds": time.perf_counter() - start, "cache": str(cache),
            "precision": pipe.unet.request.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
            # What the export stored (optimum compresses weights of large models by default), as opposed
            # to the precision the CPU plugin computes in.
            "unet_weights": sorted({op.get_output_element_type(0).get_type_name() for op in pipe.unet.model.get_ops()
                                    if op.get_type_name() == "Constant" and op.get_output_element_type(0).is_real()}),
            "threads": int(pipe.unet.request.get_property("INFERENCE_NUM_THREADS")),
            "versions": {name: _version(name)
                         for name in ("optimum-intel", "openvino", "transformers", "diffusers", "torch")},
        }
        self.process_peak_rss = _status_bytes("VmHWM")  # includes the export; per-image peaks are reset below

    def generate(self, seed: int):
        """One image for `seed` (HxWx3 uint8) and what it cost: seconds, UNet seconds and calls, ΔRSS."""
        import numpy as np
        import torch

        self.unet_seconds, self.unet_calls = 0.0, 0
        rss_reset = _reset_peak_rss()
        rss_before = _status_bytes("VmRSS")
        start = time.perf_counter()
        out = self.pipe(self.args.prompt, negative_prompt=self.args.negative_prompt, width=self.args.size,
                        height=self.args.size, num_inference_steps=self.args.steps, guidance_scale=7.0,
                        generator=torch.Generator().manual_seed(seed), output_type="np")
        image = (out.images[0] * 255).round().astype(np.uint8)
        seconds = time.perf_counter() - start
        peak = _status_bytes("VmHWM")
        self.process_peak_rss = max(self.process_peak_rss, peak)
        return image, {"seconds": seconds, "unet_seconds": self.unet_seconds, "unet_calls": self.unet_calls,
                       "rss_delta": peak - rss_before if rss_reset else None,
                       "process_peak_rss": self.process_peak_rss}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so it becomes the peak of what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def serve(args: argparse.Namespace) -> int:
    """The stdin/stdout protocol txt2img.py speaks (see the module docstring)."""
    import numpy as np

    # Libraries print to stdout (and OpenVINO from C++); keep the real stdout for protocol lines only.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    generator = Generator(args)
    print("ready " + json.dumps(generator.info), file=protocol)
    for line in sys.stdin:
        words = line.strip().split(maxsplit=2)
        if words == ["quit"]:
            break
        if len(words) != 3 or words[0] != "generate" or not words[1].lstrip("-").isdigit():
            print(f"error expected `generate SEED OUT.npy` or `quit`, got {line.strip()!r}", file=protocol)
            continue
        image, stats = generator.generate(int(words[1]))
        np.save(words[2], image)
        print("done " + json.dumps(stats), file=protocol)
    return 0


def print_row(args: argparse.Namespace) -> None:
    import numpy as np

    generator = Generator(args)
    info = generator.info
    generator.generate(args.seed)  # warm-up: first inference allocates and tunes kernels
    runs = [generator.generate(args.seed) for _ in range(args.rounds)]
    if args.out:
        np.save(args.out, runs[-1][0])
    median = statistics.median(stats["seconds"] for _, stats in runs)
    print(f"\noptimum-intel {info['how']} in {info['prepare_seconds']:.1f} s (export/load + static reshape + "
          f"compile), cached in {info['cache']}; OpenVINO inference precision {info['precision']}, "
          f"{info['threads']} threads; {info['versions']}")
    print(f"{args.size}x{args.size}, {args.steps} steps, DPM++ 2M, CFG 7, batch 1; median of {args.rounds}\n")
    print(f"| {'row':24} | s/image |")
    print(f"|{'-' * 26}|---------|")
    print(f"| {'optimum-intel':24} | {median:7.2f} |")


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
    if args.serve:
        return serve(args)
    print_row(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
