"""Peak memory of loading a model: mixkit's loader against a naive load, in one run; prints a table.

Run from the repository root:  python -m benchmarks.load_memory  [--channels 128 256 512]

A random SD 1.x-layout model with a mid-size UNet (about 230 MB in fp32 at the default
channels; pass `--channels 320 640 1280 1280` for SD 1.5's real size) is saved once as a diffusers
folder and as an A1111 single file. Each load then runs in a fresh Python process, so the
numbers cannot share allocator state: "peak" is that process's peak resident memory (ru_maxrss)
minus its resident memory just before the load (all imports done), and "x weights" divides it by
the weights' size on disk. A load that holds one copy of the weights stays near 1x; one that
builds randomly initialised modules and then copies a fully read state dict into them is near
2x. The naive rows are the baseline, measured in the same run as mixkit's rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each snippet runs after `prepare()` (imports) and before `done()` (peak measurement).
LOADS = {
    "folder, naive (random init, then copy)": (
        "from diffusers import UNet2DConditionModel\n"
        "model = UNet2DConditionModel.from_pretrained(FOLDER, subfolder='unet', low_cpu_mem_usage=False)\n"),
    "folder, mixkit load_diffusion_model": (
        "from mixkit.models.diffusion.loading import load_diffusion_model\n"
        "model = load_diffusion_model(FOLDER, attention='diffusers').unet\n"),
    "single file, naive (read all, init, copy)": (
        "from safetensors.torch import load_file\n"
        "from mixkit.models.diffusion.single_file_configs import read_model_configs\n"
        "from diffusers import UNet2DConditionModel\n"
        "from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint\n"
        "state = {k: v.clone() for k, v in load_file(FILE).items()}\n"
        "model = UNet2DConditionModel.from_config(read_model_configs(FOLDER).unet)\n"
        "prefix = 'model.diffusion_model.'\n"
        "unet_state = {k: v for k, v in state.items() if k.startswith(prefix)}\n"
        "model.load_state_dict(convert_ldm_unet_checkpoint(unet_state, dict(model.config)), strict=False)\n"
        "del state, unet_state\n"),
    "single file, mixkit load_diffusion_model": (
        "from mixkit.models.diffusion.loading import load_diffusion_model\n"
        "model = load_diffusion_model(FILE, config_dir=FOLDER, attention='diffusers').unet\n"),
}

CHILD = """
import gc, json, resource, sys
sys.path.insert(0, {root!r})
import torch
def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
# Warm-up: the same load on the tiny model imports every module the real load needs (diffusers,
# transformers, accelerate... about 170 MB), so the baseline below holds code, not weights.
FOLDER, FILE = {warm_folder!r}, {warm_file!r}
{body}
del model
gc.collect()
FOLDER, FILE = {folder!r}, {file!r}
before = rss_kib()
{body}
# Touch every weight, as the first generation would: memory-mapped weights become resident here.
total = sum(float(t.float().sum()) for t in model.state_dict().values() if t.is_floating_point())
print(json.dumps({{"before_kib": before, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "after_kib": rss_kib()}}))
"""


def build_model(folder: Path, channels: tuple[int, ...]) -> tuple[Path, Path]:
    """A tiny SD 1.x folder whose UNet is replaced by a random one with `channels`, and its single file."""
    import torch
    from diffusers import UNet2DConditionModel

    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    build_tiny_sd1(folder, seed=0)
    torch.manual_seed(0)
    levels = len(channels)
    unet = UNet2DConditionModel(
        block_out_channels=channels, layers_per_block=2, sample_size=8, cross_attention_dim=32,
        down_block_types=("CrossAttnDownBlock2D",) * (levels - 1) + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * (levels - 1), attention_head_dim=8,
    )
    unet.save_pretrained(folder / "unet", safe_serialization=True)
    del unet
    file = folder.parent / "model.safetensors"
    save_ldm_checkpoint(load_diffusion_model(folder, attention="diffusers"), file)
    return folder, file


def measure(label: str, folder: Path, file: Path, warm: tuple[Path, Path]) -> dict:
    code = CHILD.format(root=str(ROOT), folder=str(folder), file=str(file), body=LOADS[label],
                        warm_folder=str(warm[0]), warm_file=str(warm[1]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{label}: child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, nargs="+", default=[128, 256, 512],
                        help="UNet block_out_channels (default about 230 MB of fp32 weights)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder, file = build_model(Path(tmp) / "model", tuple(args.channels))
        warm = build_model(Path(tmp) / "warm" / "model", (32, 64))
        weights_mib = sum(f.stat().st_size for f in (folder / "unet").glob("*.safetensors")) / 2**20
        print(f"UNet weights: {weights_mib:.0f} MiB (channels {tuple(args.channels)}; VAE and text encoder tiny)")
        print(f"{'load':45s} {'peak MiB':>9s} {'x weights':>9s} {'kept MiB':>9s}")
        rows = {}
        for label in LOADS:
            result = measure(label, folder, file, warm)
            peak = (result["peak_kib"] - result["before_kib"]) / 1024
            kept = (result["after_kib"] - result["before_kib"]) / 1024
            rows[label] = peak
            print(f"{label:45s} {peak:9.0f} {peak / weights_mib:9.2f} {kept:9.0f}")
        for kind in ("folder", "single file"):
            naive = next(v for k, v in rows.items() if k.startswith(kind + ", naive"))
            ours = next(v for k, v in rows.items() if k.startswith(kind + ", mixkit"))
            print(f"{kind}: mixkit peak / naive peak = {ours / naive:.2f}")


if __name__ == "__main__":
    main()
