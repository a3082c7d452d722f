"""Peak memory of a three-model merge ("Add difference"): mixkit's tensor-by-tensor merge against A1111's way.

Run from the repository root:  python -m benchmarks.checkpoint_merge  [--megabytes 256 --tensors 64]

Three random fp32 models of `--megabytes` each are saved as safetensors. Each merge then runs in a fresh Python
process: "peak" is that process's peak resident memory (ru_maxrss) minus its resident memory just before the merge
(imports done), and "x model" divides it by one model's size. A1111's run_modelmerger loads B and C whole, folds
C into B, then loads A whole and merges into it: about 3 models resident at its peak. mixkit reads each tensor when
its key comes (`mixkit.io.merge_inputs`) and holds the output plus the tensors of the key in hand.
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

MERGES = {
    "A1111's way (three whole state dicts)": (
        "from safetensors.torch import load_file, save_file\n"
        "b = load_file(B); c = load_file(C)\n"
        "for k in b: b[k] = b[k] - c[k]\n"
        "del c\n"
        "a = load_file(A)\n"
        "for k in a: a[k] = a[k] + 0.5 * b[k]\n"
        "del b\n"
        "save_file(a, OUT)\n"
    ),
    "mixkit merge_checkpoints": (
        "from mixkit.io.checkpoint_merge import merge_checkpoints\n"
        "merge_checkpoints(A, B, C, output_dir=os.path.dirname(OUT), method='Add difference', multiplier=0.5,\n"
        "                  custom_name='mixkit', save_metadata=False)\n"
    ),
}

TEMPLATE = """
import os, resource, json
import torch, safetensors.torch, mixkit.io.checkpoint_merge
A, B, C, OUT = {paths!r}
def rss_kib():
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS'))
before = rss_kib()
{snippet}
print(json.dumps({{"before_kib": before, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""


def make_models(folder: Path, megabytes: int, tensors: int) -> list[Path]:
    import torch
    from safetensors.torch import save_file

    values = megabytes * 2**20 // 4 // tensors
    paths = []
    for seed, name in enumerate("abc"):
        generator = torch.Generator().manual_seed(seed)
        state = {f"model.diffusion_model.block{i}.weight": torch.randn(values, generator=generator)
                 for i in range(tensors)}
        paths.append(folder / f"{name}.safetensors")
        save_file(state, paths[-1])
    return paths


def measure(snippet: str, paths: list[Path], out: Path) -> dict:
    code = TEMPLATE.format(paths=tuple(str(p) for p in [*paths, out]), snippet=snippet)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256, help="size of each model (default 256)")
    parser.add_argument("--tensors", type=int, default=64, help="tensors per model (default 64)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        paths = make_models(folder, args.megabytes, args.tensors)
        print(f"{'merge':45} {'peak MiB':>9} {'x model':>8}")
        for label, snippet in MERGES.items():
            numbers = measure(snippet, paths, folder / "out.safetensors")
            peak = (numbers["peak_kib"] - numbers["before_kib"]) / 1024
            print(f"{label:45} {peak:9.0f} {peak / args.megabytes:8.2f}")


if __name__ == "__main__":
    main()
