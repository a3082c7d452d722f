"""What a LoRA family is: how its tensor group is recognised, checked and turned into a weight change.

The families themselves live in `families_factored.py` (low-rank factors) and `families_per_weight.py` (changes
stored whole or per channel/block); `algorithms.py` registers them by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class AlgorithmFamily:
    """How to recognise one family's tensor group and turn it into a weight change."""

    name: str
    label: str
    marker_keys: tuple[str, ...]
    known_keys: tuple[str, ...]
    rank: Callable[[dict], int | None]
    implied_shape: Callable[[dict], tuple[int, int]]
    # (tensors, scale, original float32 weight) -> the change at full strength, in the weight's shape.
    delta: Callable[[dict, float, torch.Tensor], torch.Tensor]
    # tensors -> what does not fit together inside the module (named by tensor and shape), or None.
    check: Callable[[dict], str | None] | None = None
    additive: bool = True  # False: the change depends on the original weight (IA3, GLoRA, OFT)
    scaled: bool = True  # False: alpha/rank and `.scale` do not apply (OFT's alpha is its constraint)
    bias_key: str | None = None
    # True: the bias change is scaled like the weight change (alpha/rank), as PEFT merges `lora_B.bias`.
    bias_scaled: bool = False
    # A tensor stored in the target's own layout (2-D for Linear, 4-D for Conv), to catch Linear/Conv mix-ups.
    layout_key: str | None = None
    # Alternatives of key sets; the group is complete when one alternative is fully present, per entry.
    required: tuple[tuple[tuple[str, ...], ...], ...] = ()

    def missing(self, suffixes: set[str]) -> list[str]:
        """Required tensors absent from a group (first alternative of each unmet requirement)."""
        absent: list[str] = []
        for alternatives in self.required:
            if not any(all(k in suffixes for k in option) for option in alternatives):
                absent.extend(k for k in alternatives[0] if k not in suffixes)
        return absent

    def matches(self, suffixes: set[str]) -> bool:
        return any(marker in suffixes for marker in self.marker_keys)


def float_tensor(tensors: dict, key: str) -> torch.Tensor | None:
    value = tensors.get(key)
    return None if value is None else value.float()


def flat_in(shape) -> int:
    return int(math.prod(shape[1:]))


def shapes_text(tensors: dict, *keys: str) -> str:
    return ", ".join(f"{k} {list(tensors[k].shape)}" for k in keys if k in tensors)
