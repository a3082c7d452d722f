"""The folder a BLIP-2 stage-1 run writes: the trained Q-Former bridge, the stage-1 heads and the text tokenizer.

Stage 2 needs only the queries and the Q-Former (`blip2-stage2 --set qformer_from=...`); the
heads and tokenizer are kept so stage 1 can be continued or its ITC/ITM scores used. The folder is
assembled in a temporary folder and renamed into place, so a failed save leaves nothing behind.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from mixkit.io.atomic import atomic_output_folder

CONFIG_NAME = "mixkit_blip2_stage1.json"
WEIGHTS_NAME = "model.safetensors"


class Stage1Parts(nn.Module):
    """Bridge and heads under one module, so one safetensors file holds both with clear prefixes."""

    def __init__(self, bridge: nn.Module, heads: nn.Module) -> None:
        super().__init__()
        self.bridge = bridge
        self.heads = heads


def heads_config(heads) -> dict:
    return {"hidden_size": heads.vision_projection.in_features, "vocab_size": heads.lm_head.out_features,
            "embed_dim": heads.vision_projection.out_features}


def save_blip2_stage1(folder: str | Path, bridge, heads, tokenizer, config_json: str) -> Path:
    from safetensors.torch import save_model

    with atomic_output_folder(folder) as temp:
        save_model(Stage1Parts(bridge, heads), str(temp / WEIGHTS_NAME))
        config = {"bridge": bridge.config_dict(), "heads": heads_config(heads)}
        (temp / CONFIG_NAME).write_text(json.dumps(config, indent=2), encoding="utf-8")
        (temp / "mixkit_training_config.json").write_text(config_json, encoding="utf-8")
        if tokenizer is not None:
            tokenizer.save_pretrained(temp / "tokenizer")
    return Path(folder).absolute()


def load_blip2_stage1(folder: str | Path):
    """(QFormerBridge, Blip2Stage1Heads) from a folder written by `save_blip2_stage1`."""
    from safetensors.torch import load_model

    from mixkit.errors import CheckpointFormatError, ModelNotFoundError
    from mixkit.models.vlm.modular import build_bridge
    from mixkit.models.vlm.modular.stage1 import Blip2Stage1Heads

    folder = Path(folder)
    if not (folder / CONFIG_NAME).is_file() or not (folder / WEIGHTS_NAME).is_file():
        raise ModelNotFoundError(f"{str(folder)!r} is not a blip2-stage1 output: it needs {CONFIG_NAME} and {WEIGHTS_NAME}.")
    try:
        config = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
        parts = Stage1Parts(build_bridge(config["bridge"]), Blip2Stage1Heads(**config["heads"]))
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointFormatError(f"{str(folder / CONFIG_NAME)!r} is not a valid stage-1 config: {error!r}") from None
    try:
        load_model(parts, str(folder / WEIGHTS_NAME), strict=True)
    except Exception as error:  # safetensors raises several types for corrupt or mismatched files
        raise CheckpointFormatError(f"{str(folder / WEIGHTS_NAME)!r} does not match {CONFIG_NAME}: {error}") from None
    return parts.bridge.eval(), parts.heads.eval()
