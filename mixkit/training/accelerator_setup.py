"""Create the `Accelerator` every trainer uses, refusing a silently mis-detected multi-process launch.

On a machine without GPUs, `accelerate launch --multi_gpu --num_processes N` starts N processes and
initialises torch.distributed, yet accelerate reports a single process unless ACCELERATE_USE_CPU=1
is set: every process would then train on the same batches. We check and say what to do instead.
"""

from __future__ import annotations


def make_accelerator(*, mixed_precision: str = "no", gradient_accumulation_steps: int = 1):
    import torch
    from accelerate import Accelerator

    from accelerate.state import AcceleratorState, GradientState

    # accelerate keeps one process-wide state and refuses a second Accelerator with another precision
    # or accumulation; a long-lived process (web UI, notebook, tests) runs many trainings, so each one
    # starts from a fresh training state. The distributed state (PartialState) is kept.
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
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
