"""The arithmetic of A1111's Checkpoint Merger, one tensor at a time, as pure functions.

"Weighted sum" is A * (1 - M) + B * M, "Add difference" A + (B - C) * M (modules/extras.py `run_modelmerger`).
A1111 merges only keys whose name contains "model" (every UNet, text encoder and VAE weight of an LDM checkpoint;
the noise-schedule buffers such as `alphas_cumprod` stay A's) and never the CLIP `position_ids` (an index table).
An inpainting (9 input channels) or instruct-pix2pix (8) A merged with a normal (4) B keeps its extra channels and
merges the first four, which carry the same latent meaning in both; the reverse order is refused, as in A1111.

Arithmetic runs in float32 at least (fp16 / bf16 inputs are upcast, then the result is cast back to the dtype torch
would promote the inputs to): A1111 computes in the inputs' own dtype, which rounds an fp16 merge twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

WEIGHTED_SUM = "Weighted sum"
ADD_DIFFERENCE = "Add difference"
NO_INTERPOLATION = "No interpolation"
MERGE_METHODS = (NO_INTERPOLATION, WEIGHTED_SUM, ADD_DIFFERENCE)  # A1111's radio, in its order

# A1111's checkpoint_dict_skip_on_merge: an integer index table, never averaged.
SKIPPED_KEYS = frozenset({"cond_stage_model.transformer.text_model.embeddings.position_ids"})
LATENT_CHANNELS = 4
INPAINTING_CHANNELS = 9
INSTRUCT_PIX2PIX_CHANNELS = 8


class MergeShapeError(ValueError):
    """Two checkpoints disagree on a weight's shape in a way no merge rule covers."""


def weighted_sum(a: "torch.Tensor", b: "torch.Tensor", multiplier: float) -> "torch.Tensor":
    """A * (1 - M) + B * M."""
    return (1 - multiplier) * a + multiplier * b


def add_difference(a: "torch.Tensor", b: "torch.Tensor", c: "torch.Tensor", multiplier: float) -> "torch.Tensor":
    """A + (B - C) * M."""
    return a + multiplier * (b - c)


def is_merged_key(key: str) -> bool:
    """Whether A1111 merges this key (rather than keeping A's tensor)."""
    return "model" in key and key not in SKIPPED_KEYS


def extra_channel_kind(a_shape: tuple, b_shape: tuple) -> str | None:
    """"inpainting" / "instruct-pix2pix" when A's shape is B's with 9 / 8 instead of 4 input channels (dimension 1),
    None when the shapes are equal; raises MergeShapeError for any other difference (the key is added by the caller).
    """
    if a_shape == b_shape:
        return None
    same_elsewhere = len(a_shape) == len(b_shape) >= 2 and a_shape[:1] + a_shape[2:] == b_shape[:1] + b_shape[2:]
    if same_elsewhere and a_shape[1] == LATENT_CHANNELS and b_shape[1] in (INPAINTING_CHANNELS, INSTRUCT_PIX2PIX_CHANNELS):
        kind = "inpainting" if b_shape[1] == INPAINTING_CHANNELS else "instruct-pix2pix"
        raise MergeShapeError(f"B is an {kind} model and A is not: when merging an {kind} model with a normal one, "
                              f"A must be the {kind} model (swap A and B)")
    if same_elsewhere and b_shape[1] == LATENT_CHANNELS and a_shape[1] == INPAINTING_CHANNELS:
        return "inpainting"
    if same_elsewhere and b_shape[1] == LATENT_CHANNELS and a_shape[1] == INSTRUCT_PIX2PIX_CHANNELS:
        return "instruct-pix2pix"
    raise MergeShapeError(f"shapes differ: A {list(a_shape)}, B {list(b_shape)}; the checkpoints are of different "
                          "architectures (SD1 / SD2 / SDXL) and cannot be merged")


def merge_tensor(method: str, a: "torch.Tensor", b: "torch.Tensor", c: "torch.Tensor | None",
                 multiplier: float) -> tuple["torch.Tensor", str | None]:
    """The merged tensor for one key and its extra-channel kind (see `extra_channel_kind`).

    `c` is None for a weighted sum, and for an add difference whose C lacks the key (A1111 then adds nothing: A).
    Raises MergeShapeError when the shapes do not fit (B and C must match exactly).
    """
    import torch

    kind = extra_channel_kind(tuple(a.shape), tuple(b.shape))
    if method == ADD_DIFFERENCE and c is not None and tuple(c.shape) != tuple(b.shape):
        raise MergeShapeError(f"shapes differ: B {list(b.shape)}, C {list(c.shape)}; B and C must be of the same "
                              "architecture")
    dtype = torch.promote_types(a.dtype, b.dtype) if c is None else torch.promote_types(
        torch.promote_types(a.dtype, b.dtype), c.dtype)
    compute = torch.promote_types(dtype, torch.float32)
    a_part = a[:, :LATENT_CHANNELS] if kind else a
    if method == WEIGHTED_SUM:
        merged = weighted_sum(a_part.to(compute), b.to(compute), multiplier)
    elif c is None:
        merged = a_part.to(compute)
    else:
        merged = add_difference(a_part.to(compute), b.to(compute), c.to(compute), multiplier)
    if kind:
        whole = a.to(dtype, copy=True)  # a copy: the caller's A tensor (maybe memory-mapped) is never written
        whole[:, :LATENT_CHANNELS] = merged.to(dtype)
        return whole, kind
    return merged.to(dtype), None


def to_half(tensor: "torch.Tensor") -> "torch.Tensor":
    """"Save as float16": float32 tensors become float16; other dtypes (fp16, bf16, integer tables) stay, as A1111."""
    import torch

    return tensor.half() if tensor.dtype == torch.float32 else tensor
