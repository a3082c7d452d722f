"""Time every attention backend that fits, on Stable-Diffusion-like shapes; print a table.

Run from the repository root:  python -m benchmarks.attention  [--heads 8 --repeats 5 ...]

Shapes follow SD 1.x at 512x512: the first UNet level attends over 64*64 = 4096 latent tokens
with head dim 40 (self-attention) and over the 77 CLIP tokens (cross-attention). Backends are
timed in alternation (A B C A B C ...) within one process, so drift in machine load (other jobs,
thermal throttling) spreads over all of them instead of biasing whichever ran last. Each time is
the median of the rounds; "vs math" is that median divided by the `math` reference's median.

The defaults (batch 1, 2 heads, 3 rounds, a time budget) keep a CPU run under a minute; pass
--heads 8 for SD's real head count on a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch

from mixkit.attention import ATTENTION_BACKENDS, AttentionBackend

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Shape:
    label: str
    query_tokens: int
    key_tokens: int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=4096, help="latent tokens (64*64 for SD 1.x at 512px)")
    parser.add_argument("--context", type=int, default=77, help="text tokens for cross-attention")
    parser.add_argument("--head-dim", type=int, default=40)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtypes", default="fp32,bf16", help=f"comma list of {', '.join(DTYPES)}")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: on a shared machine more threads spin-wait "
                             "against other jobs and times become noise; raise it on a dedicated machine)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per backend")
    parser.add_argument("--budget-seconds", type=float, default=40.0,
                        help="stop starting new rounds after this much time (at least one round always runs)")
    args = parser.parse_args(argv)
    unknown = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if unknown:
        parser.error(f"--dtypes: unknown {unknown}; choose from {list(DTYPES)}")
    for name in ("tokens", "context", "head_dim", "heads", "batch", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(backend: AttentionBackend, q, k, v) -> float:
    """Seconds for one call of `backend` (device work included)."""
    _sync(q.device)
    start = time.perf_counter()
    backend.fn(q, k, v)
    _sync(q.device)
    return time.perf_counter() - start


def benchmark_shape(shape: Shape, dtype: torch.dtype, args, deadline: float) -> list[tuple[str, float, int]]:
    """[(backend name, median seconds, rounds)] for the backends that fit this shape and dtype."""
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    make = lambda tokens: torch.randn(args.batch, args.heads, tokens, args.head_dim, generator=gen).to(device, dtype)  # noqa: E731
    q, k, v = make(shape.query_tokens), make(shape.key_tokens), make(shape.key_tokens)
    backends = [b for _, b in ATTENTION_BACKENDS.items() if b.is_available() and b.supports(q, k, v) is None]
    for backend in backends:  # warm-up: kernel selection, allocator, lazy imports
        backend.fn(q, k, v)
    samples: dict[str, list[float]] = {b.name: [] for b in backends}
    for round_index in range(args.repeats):
        if round_index > 0 and time.perf_counter() > deadline:
            break
        for backend in backends:  # alternate A B C A B C: load drift hits everyone alike
            samples[backend.name].append(time_call(backend, q, k, v))
    return [(name, statistics.median(times), len(times)) for name, times in samples.items()]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    shapes = [Shape(f"self {args.tokens}x{args.tokens}", args.tokens, args.tokens),
              Shape(f"cross {args.tokens}x{args.context}", args.tokens, args.context)]
    start = time.perf_counter()
    deadline = start + args.budget_seconds
    print(f"device {args.device}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"batch {args.batch}, heads {args.heads}, head_dim {args.head_dim}")
    print(f"{'shape':<18} {'dtype':<5} {'backend':<15} {'median ms':>10} {'vs math':>8} {'rounds':>6}")
    for shape in shapes:
        for dtype_name in args.dtypes.split(","):
            rows = benchmark_shape(shape, DTYPES[dtype_name], args, deadline)
            reference = dict((name, t) for name, t, _ in rows).get("math")
            for name, seconds, rounds in rows:
                ratio = f"{seconds / reference:.2f}x" if reference else "n/a"
                print(f"{shape.label:<18} {dtype_name:<5} {name:<15} {seconds * 1e3:>10.1f} {ratio:>8} {rounds:>6}")
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
