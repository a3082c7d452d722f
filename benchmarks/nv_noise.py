"""A1111's NV noise (Philox 4x32-10 on the CPU, `mixkit.random.philox`) vs torch.randn with a CPU generator.

NV draws one latent per image plus one per noisy step of an ancestral sampler, so its cost is per draw: this times a
draw of each latent shape, the two sources alternating (NV, CPU, NV, CPU, ...) for `--rounds` rounds in one process;
each figure is the median. The NV draw is NumPy (ten rounds of uint64 multiplies written in place, then a float64
Box-Muller whose sine is most of its cost), so it stays many times slower than torch's kernel, but a few
milliseconds per draw against seconds per UNet step.

The in-place rewrite against the first version (both NumPy, the same bits), alternating A B A B in one process,
medians of 15 rounds of 3 draws, on a busy 2-core machine:

            latent   before ms   after ms   speed-up
           4x64x64        4.28       1.78      2.40x
           4x96x96        8.67       3.34      2.60x
         4x128x128       16.14       7.51      2.15x
        16x128x128       67.29      26.12      2.58x

    python -m benchmarks.nv_noise            (from the repository root, a few seconds)
"""

from __future__ import annotations

import argparse
import statistics
import time

SHAPES = ((4, 64, 64), (4, 96, 96), (4, 128, 128), (16, 128, 128))  # SD 1.x 512 px, 768 px, SDXL 1024 px, a batch


def seconds(call, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5, help="draws per timing")
    args = parser.parse_args(argv)

    import torch

    from mixkit.random import PhiloxGenerator

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.rounds} alternating rounds")
    print(f"{'latent':>14} {'NV ms':>8} {'CPU ms':>8} {'NV / CPU':>9}")
    for shape in SHAPES:
        philox, generator = PhiloxGenerator(1), torch.Generator("cpu").manual_seed(1)
        nv = lambda: philox.randn(shape)  # noqa: E731
        cpu = lambda: torch.randn(shape, generator=generator)  # noqa: E731
        nv(), cpu()
        times: dict[str, list[float]] = {"nv": [], "cpu": []}
        for _ in range(args.rounds):
            times["nv"].append(seconds(nv, args.repeats))
            times["cpu"].append(seconds(cpu, args.repeats))
        slow, fast = statistics.median(times["nv"]), statistics.median(times["cpu"])
        print(f"{'x'.join(map(str, shape)):>14} {slow * 1e3:>8.2f} {fast * 1e3:>8.2f} {slow / fast:>8.1f}x")


if __name__ == "__main__":
    main()
