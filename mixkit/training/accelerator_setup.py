"""Create the `Accelerator` every trainer uses, refusing a silently mis-detected multi-process launch.

On a machine without GPUs, `accelerate launch --multi_gpu --num_processes N` starts N processes and
initialises torch.distributed, yet accelerate reports a single process unless ACCELERATE_USE_CPU=1
is set: every process would then train on the same batches. We check and say what to do instead.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def resolve_mixed_precision(mixed_precision: str, *, cuda: bool | None = None, cuda_bf16: bool | None = None,
                            cpu_bf16: bool | None = None) -> str:
    """`auto` -> the fastest precision that trains well here: bf16 on GPUs that have it and on CPUs with
    AVX512-BF16/AMX (measured 3-4x faster matmuls than fp32 on this machine), fp16 on older GPUs,
    else fp32 ("no"). Other values pass through. The LoRA / model weights stay fp32 either way
    (autocast), so only the speed and the rounding of activations change."""
    if mixed_precision != "auto":
        return mixed_precision
    import torch

    from mixkit.runtime.capability import cpu_has_native_bf16

    cuda = torch.cuda.is_available() if cuda is None else cuda
    if cuda:
        bf16 = torch.cuda.is_bf16_supported() if cuda_bf16 is None else cuda_bf16
        return "bf16" if bf16 else "fp16"
    return "bf16" if (cpu_has_native_bf16() if cpu_bf16 is None else cpu_bf16) else "no"


def make_accelerator(*, mixed_precision: str = "no", gradient_accumulation_steps: int = 1):
    import torch
    from accelerate import Accelerator

    from accelerate.state import AcceleratorState, GradientState

    # accelerate keeps one process-wide state and refuses a second Accelerator with another precision
    # or accumulation; a long-lived process (web UI, notebook, tests) runs many trainings, so each one
    # starts from a fresh training state. The distributed state (PartialState) is kept.
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    if mixed_precision == "auto":
        mixed_precision = resolve_mixed_precision("auto")
        logger.info("mixed_precision=auto: training with %s", "fp32" if mixed_precision == "no" else mixed_precision)
    accelerator = Accelerator(mixed_precision=mixed_precision, gradient_accumulation_steps=gradient_accumulation_steps)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        world = torch.distributed.get_world_size()
        if world != accelerator.num_processes:
            raise RuntimeError(
                f"torch.distributed runs {world} processes but accelerate sees {accelerator.num_processes} "
                f"({accelerator.distributed_type}); on CPU set ACCELERATE_USE_CPU=1 (or pass --cpu with an "
                "accelerate config for MULTI_CPU) so each process gets its own share of the data."
            )
    return accelerator
