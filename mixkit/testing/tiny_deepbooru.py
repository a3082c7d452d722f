"""Tiny DeepDanbooru tagger files for tests, saved as A1111's `model-resnet_custom_v3.pt` is (state dict + `tags`).

The full resnet_custom_v3 structure (179 convolutions) at a few channels. `crafted_deepbooru_state` makes the
scores known exactly: with every weight zero the features are each layer's bias, spatially constant (zero padding
then meets zero weights), so the last block's expand bias of 1 leaves a feature map of ones and the classifier's
first input column is each tag's logit: the score of tag i is exactly sigmoid(logits[i]), whatever the image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from mixkit.interrogate.deepbooru_network import CONV_COUNT, DeepDanbooruNetwork, DeepDanbooruSizes


def tiny_deepbooru_sizes(num_tags: int) -> DeepDanbooruSizes:
    """Widths of a few channels (stem 4, stages 8 wide with an inner width of 2)."""
    return DeepDanbooruSizes(stem=4, widths=(8,) * 6, inners=(2,) * 6, num_tags=num_tags)


def random_deepbooru_state(num_tags: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A seeded random tiny network's state dict, in the port's key order."""
    torch.manual_seed(seed)
    return {key: value.detach().clone() for key, value in DeepDanbooruNetwork(tiny_deepbooru_sizes(num_tags))
            .state_dict().items()}


def crafted_deepbooru_state(logits: Sequence[float]) -> dict[str, torch.Tensor]:
    """A tiny network whose score for tag i is sigmoid(logits[i]) on every image (see the module docstring)."""
    state = {key: torch.zeros_like(value) for key, value in random_deepbooru_state(len(logits)).items()}
    last_expand = CONV_COUNT - 2
    state[f"n_Conv_{last_expand}.bias"] = torch.ones_like(state[f"n_Conv_{last_expand}.bias"])
    state[f"n_Conv_{CONV_COUNT - 1}.weight"][:, 0, 0, 0] = torch.tensor(list(logits), dtype=torch.float32)
    return state


def save_deepbooru(path: str | Path, state: dict[str, torch.Tensor], tags: Sequence[str]) -> Path:
    """Write `state` plus the `tags` list with torch.save, as A1111's TorchDeepDanbooru file is stored."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({**state, "tags": list(tags)}, path)
    return path
