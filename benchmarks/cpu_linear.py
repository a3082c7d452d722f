"""fp32 linear on CPU: PyTorch's default kernel (MKL sgemm on x86) vs oneDNN, by rows and layer size.

This is the measurement behind `mixkit.runtime.cpu_linear`'s routing rule; run it on a new CPU
to check the rule's bounds there. Kernels alternate (default, oneDNN, default, ...) for
`--rounds` rounds in one process and each figure is the median.

    python -m benchmarks.cpu_linear            (from the repository root, ~1 minute)
"""

from __future__ import annotations

import argparse
import statistics
import time

# (out_features, in_features): OPT-2.7B FFN, OPT-2.7B attention, EVA ViT-g FFN, BERT-base attention
LAYERS = ((10240, 2560), (2560, 2560), (6144, 1408), (768, 768))
ROWS = (1, 2, 4, 8, 16, 64, 256, 1024, 2048)


def seconds(call, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)

    import torch

    from mixkit.runtime.cpu_linear import onednn_linear, onednn_linear_available, prefers_onednn

    if not onednn_linear_available():
        raise SystemExit("this torch build has no oneDNN linear op; nothing to compare")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.rounds} alternating rounds")
    print(f"{'out x in':>12} {'rows':>5} {'default ms':>11} {'oneDNN ms':>10} {'oneDNN speed-up':>16} {'mixkit routes':>14}")
    for out_features, in_features in LAYERS:
        weight, bias = torch.randn(out_features, in_features), torch.randn(out_features)
        for rows in ROWS:
            inputs = torch.randn(rows, in_features)
            repeats = max(1, int(2e8 // (rows * out_features * in_features)))
            default = lambda: torch.nn.functional.linear(inputs, weight, bias)  # noqa: E731
            onednn = lambda: onednn_linear(inputs, weight, bias)  # noqa: E731
            default(), onednn()
            times: dict[str, list[float]] = {"default": [], "onednn": []}
            for _ in range(args.rounds):
                times["default"].append(seconds(default, repeats))
                times["onednn"].append(seconds(onednn, repeats))
            base, fast = statistics.median(times["default"]), statistics.median(times["onednn"])
            routed = "oneDNN" if prefers_onednn(rows, weight) else "default"
            print(f"{out_features:>5}x{in_features:<6} {rows:>5} {base * 1e3:>11.3f} {fast * 1e3:>10.3f} "
                  f"{base / fast:>15.2f}x {routed:>14}")


if __name__ == "__main__":
    main()
