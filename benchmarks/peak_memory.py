"""Peak memory of a whole generation (load + one image), each setup in a fresh process; prints a table.

Run from the repository root:  python -m benchmarks.peak_memory [--arch sd15|sdxl] [--size 512] [--steps 4]
    [--rows ...]

Issue 8's memory targets: mixkit's peak RSS <= 0.6x diffusers' default, and SDXL-size models in
<= 8 GB with the low-memory preset. A random-weight model of the chosen architecture (mixkit's
shipped configs) is written once as a diffusers folder in float16, as most shared checkpoints are
stored. Each row then runs in its own Python process: import, load the folder the way a user would,
generate one image (DPM++ 2M, CFG 7), and report the process's peak resident memory (ru_maxrss,
which includes the interpreter and libraries: the figure a user's machine must have free). Rows
run one after another, not in alternation: memory does not drift with machine load the way time
does, and two processes of an SDXL-size model would not fit in RAM together.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"
NEGATIVE = "blurry, low quality"

_DIFFUSERS = """
from diffusers import AutoPipelineForText2Image, DPMSolverMultistepScheduler
pipe = AutoPipelineForText2Image.from_pretrained(FOLDER{dtype})
pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
pipe.set_progress_bar_config(disable=True)
loaded()
pipe(PROMPT, negative_prompt=NEGATIVE, num_inference_steps=STEPS, guidance_scale=7.0, height=SIZE, width=SIZE,
     generator=torch.Generator().manual_seed(0))
"""
_MIXKIT = """
from pipelines.optimize import load_options_for, optimize
from pipelines.txt2img import TextToImage
pipe = TextToImage.from_pretrained(FOLDER, **load_options_for({preset!r}, backend={backend!r}))
if {preset!r} != "exact" or {backend!r} != "torch":
    optimize(pipe, {preset!r}, {backend!r})
loaded()
pipe(prompt=PROMPT, negative_prompt=NEGATIVE, steps=STEPS, cfg_scale=7.0, width=SIZE, height=SIZE, seed=0,
     sampler="DPM++ 2M")
"""
ROWS = {
    # float32 named explicitly: on a float16 folder transformers 5 would load the text encoder in the
    # file's dtype next to a float32 UNet (and fail); float32 is what a float32 download gives.
    "diffusers fp32 (default)": _DIFFUSERS.format(dtype=", torch_dtype=torch.float32"),
    "diffusers bf16": _DIFFUSERS.format(dtype=", torch_dtype=torch.bfloat16"),
    "mixkit exact": _MIXKIT.format(preset="exact", backend="torch"),
    "mixkit fast": _MIXKIT.format(preset="fast", backend="torch"),
    "mixkit low-memory": _MIXKIT.format(preset="low-memory", backend="torch"),
    # needs the openvino extra; its graphs are converted on the first run and cached on disk, so
    # run the benchmark twice to measure a generation with the cache warm (the usual case)
    "mixkit fast + openvino": _MIXKIT.format(preset="fast", backend="openvino"),
}
DEFAULT_ROWS = [name for name in ROWS if "openvino" not in name]
_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
import torch
FOLDER, PROMPT, NEGATIVE, STEPS, SIZE = {folder!r}, {prompt!r}, {negative!r}, {steps}, {size}
marks = {{"start": time.perf_counter()}}
def loaded():
    marks["loaded"] = time.perf_counter()
{body}
end = time.perf_counter()
print("RESULT " + json.dumps({{"peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              "load_s": marks["loaded"] - marks["start"], "generate_s": end - marks["loaded"]}}))
"""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=("sd15", "sdxl"), default="sd15")
    parser.add_argument("--size", type=int, default=512, help="image side in px")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=DEFAULT_ROWS)
    parser.add_argument("--folder", help="reuse (or write) the random model folder here instead of a temporary one")
    args = parser.parse_args(argv)
    if args.size % 64 or args.size < 64:
        parser.error(f"--size must be a multiple of 64, got {args.size}")
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    return args


def build_half_model_folder(arch: str, folder: Path) -> Path:
    """A diffusers folder of the architecture's shipped configs with random float16 weights.

    Each component is built on the meta device and filled in float16 directly (scaled normal
    weights, unit norms, zero biases), so building SDXL never holds its 13 GB float32 form.
    """
    import torch
    from diffusers import AutoencoderKL, DPMSolverMultistepScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    from mixkit.models.diffusion.single_file_configs import SHIPPED_CONFIGS

    if (folder / "model_index.json").is_file():
        return folder
    configs = SHIPPED_CONFIGS / ("sd15" if arch == "sd15" else "sdxl-base")
    generator = torch.Generator().manual_seed(0)
    parts = {"unet": lambda: UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(configs / "unet")),
             "vae": lambda: AutoencoderKL.from_config(AutoencoderKL.load_config(configs / "vae")),
             "text_encoder": lambda: CLIPTextModel(CLIPTextConfig.from_pretrained(configs / "text_encoder"))}
    if arch == "sdxl":
        parts["text_encoder_2"] = lambda: CLIPTextModelWithProjection(
            CLIPTextConfig.from_pretrained(configs / "text_encoder_2"))
    for name, build in parts.items():
        with torch.device("meta"):
            module = build()
        module.to_empty(device="cpu").to(torch.float16)
        with torch.no_grad():
            for key, tensor in list(module.named_parameters()) + list(module.named_buffers()):
                if not tensor.is_floating_point():
                    continue
                if key.endswith("bias"):
                    tensor.zero_()
                elif tensor.dim() == 1:
                    tensor.fill_(1.0)
                else:
                    tensor.normal_(0.0, 1.0 / math.sqrt(tensor[0].numel()), generator=generator)
            for key, buffer in module.named_buffers():  # integer buffers left empty by to_empty()
                if key.endswith("position_ids"):
                    buffer.copy_(torch.arange(buffer.shape[-1]).expand_as(buffer))
        module.save_pretrained(folder / name, safe_serialization=True)
        del module
    scheduler = DPMSolverMultistepScheduler.from_config(DPMSolverMultistepScheduler.load_config(configs / "scheduler"))
    scheduler.save_pretrained(folder / "scheduler")
    for tokenizer in ("tokenizer", "tokenizer_2") if arch == "sdxl" else ("tokenizer",):
        from mixkit.models.diffusion.single_file_tokenizer import load_clip_tokenizer

        load_clip_tokenizer().save_pretrained(folder / tokenizer)
    pipeline = "StableDiffusionXLPipeline" if arch == "sdxl" else "StableDiffusionPipeline"
    index = {"_class_name": pipeline, "_diffusers_version": "0.42.1",
             "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"],
             "text_encoder": ["transformers", "CLIPTextModel"], "tokenizer": ["transformers", "CLIPTokenizer"],
             "scheduler": ["diffusers", "DPMSolverMultistepScheduler"]}
    if arch == "sdxl":
        index.update(text_encoder_2=["transformers", "CLIPTextModelWithProjection"],
                     tokenizer_2=["transformers", "CLIPTokenizer"], force_zeros_for_empty_prompt=True)
    else:
        index.update(safety_checker=[None, None], feature_extractor=[None, None], requires_safety_checker=False)
    (folder / "model_index.json").write_text(json.dumps(index, indent=2))
    return folder


def run_row(name: str, folder: Path, args) -> dict:
    code = _CHILD.format(root=str(ROOT), folder=str(folder), prompt=PROMPT, negative=NEGATIVE, steps=args.steps,
                         size=args.size, body=ROWS[name])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1][len("RESULT "):])


def main(argv=None) -> None:
    import torch

    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mixkit-peak-memory-") as scratch:
        folder = build_half_model_folder(args.arch, Path(args.folder or Path(scratch) / args.arch))
        weights = sum(p.stat().st_size for p in folder.rglob("*.safetensors"))
        print(f"{args.arch} architecture, random weights, {weights / 1e9:.2f} GB of float16 safetensors; "
              f"{args.size}x{args.size}, {args.steps} steps, DPM++ 2M, CFG 7, batch 1; torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads\n")
        results = {}
        for name in args.rows:
            results[name] = run_row(name, folder, args)
            print(f"  {name}: {results[name]}", file=sys.stderr)
    base = results.get("diffusers fp32 (default)", {}).get("peak_kb")
    print(f"| {'row':26} | peak RSS GiB | vs diffusers fp32 | load s | generate s |")
    print(f"|{'-' * 28}|--------------|-------------------|--------|------------|")
    for name, result in results.items():
        if "error" in result:
            print(f"| {name:26} | failed: {result['error']}")
            continue
        ratio = f"{result['peak_kb'] / base:.2f}x" if base else "n/a"
        print(f"| {name:26} | {result['peak_kb'] / 1024 ** 2:12.2f} | {ratio:>17} | {result['load_s']:6.1f} | "
              f"{result['generate_s']:10.1f} |")


if __name__ == "__main__":
    main()
