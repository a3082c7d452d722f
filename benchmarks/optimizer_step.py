"""Optimizer step time on a real LoRA's tensors: mixkit's optimizers vs the packages kohya users install.

Run from the repository root:  python -m benchmarks.optimizer_step  [--rank 8] [--rounds 30]

The parameters are those of a LoRA on mixkit-tiny-sd (UNet and text encoder, kohya's target set: a few
hundred small tensors, where per-tensor Python overhead is most of an optimizer step). Rows: mixkit's
multi-tensor Lion against lion-pytorch's per-tensor loop (kohya's `Lion`), and torch's AdamW with the
fused kernel mixkit uses against torch's default (for-each) AdamW. Variants alternate in one process;
each figure is the median over rounds, with the same random gradients for every variant.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mixkit-tiny-sd")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def lora_tensors(model_name: str, rank: int) -> list[torch.Tensor]:
    from mixkit.io.sources import resolve_model_source
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.training.lora_network import LoraNetwork

    model = load_diffusion_model(str(resolve_model_source(model_name)))
    network = LoraNetwork(model.unet, model.text_encoders, rank=rank, alpha=float(rank), train_text_encoder=True)
    return [p.detach().clone() for p in network.parameters()]


def variants(learning_rate: float):
    from mixkit.training.optimizers import make_optimizer

    rows = {
        "mixkit lion (multi-tensor)": lambda ps: make_optimizer("lion", [{"params": ps}], learning_rate / 10),
        "mixkit adamw (fused, mixkit's default)": lambda ps: make_optimizer("adamw", [{"params": ps}], learning_rate),
        "torch adamw (default: for-each)": lambda ps: torch.optim.AdamW(ps, lr=learning_rate, weight_decay=1e-2),
    }
    try:
        from lion_pytorch import Lion

        rows["lion-pytorch (kohya's Lion)"] = lambda ps: Lion(ps, lr=learning_rate / 10, weight_decay=0.1)
    except ImportError:
        print("lion-pytorch is not installed (pip install lion-pytorch): its row is left out")
    return rows


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tensors = lora_tensors(args.model, args.rank)
    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(t.shape, generator=generator) for t in tensors]
    optimizers = {}
    for name, make in variants(2e-3).items():
        params = [torch.nn.Parameter(t.clone()) for t in tensors]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizers[name] = make(params)
        optimizers[name].step()  # states allocated outside the timing
    times = {name: [] for name in optimizers}
    for _ in range(args.rounds):
        for name, optimizer in optimizers.items():
            start = time.perf_counter()
            optimizer.step()
            times[name].append(time.perf_counter() - start)
    print(f"{len(tensors)} LoRA tensors ({sum(t.numel() for t in tensors)} values) of {args.model}, rank {args.rank}, "
          f"{torch.get_num_threads()} thread(s), median of {args.rounds} alternating steps\n")
    print(f"| {'optimizer':40} | ms / step |")
    print(f"|{'-' * 42}|-----------|")
    for name, values in times.items():
        print(f"| {name:40} | {1000 * statistics.median(values):9.2f} |")


if __name__ == "__main__":
    main()
