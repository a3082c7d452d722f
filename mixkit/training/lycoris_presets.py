"""LyCORIS's layer presets (kohya `--network_args "preset=full"`): which UNet and text-encoder layers a run adapts.

The data is LyCORIS 4.1.3's `lycoris/config.py`, cut to the classes and paths an SD 1.x/2.x/SDXL UNet and a CLIP text
encoder have: a preset adapts every Linear and 1x1 Conv2d inside modules of its parent classes, the modules at its
paths themselves, and 3x3 convolutions only when it enables them (`convs`, LyCORIS's `enable_conv`). Presets are
given as they behave under kohya's sd-scripts, which LyCORIS is written for, on kohya's own UNet:

- `attn-only` names the attention class "CrossAttention" (kohya's UNet); in a diffusers UNet it is "Attention".
- The top-level paths (`conv_in`, `conv_out`, `time_embedding.linear_*`) exist in kohya's SD 1.x/2.x UNet; its SDXL
  UNet names those layers `input_blocks.0.0`, `out.2` and `time_embed.*`, which no preset names, so on SDXL they are
  not adapted (`LoraNetwork` is told so).
- LyCORIS 4.1.3 adds Anima's "TimestepEmbedding" class to full, full-lin, unet-only, attn-mlp and
  unet-transformer-only. kohya's SD 1.x/2.x UNet has that class at `time_embedding`: under 4.1.3 full, full-lin and
  unet-only stop there with "duplicated lora name" (class and paths reach the same two linears), and attn-mlp /
  unet-transformer-only adapt the time embedding too. It is left out here: full's layers are the same (its paths
  reach the time embedding), and attn-mlp's stay kohya networks.lora's LoRA layers (which DoRA files on those layers
  name, `NETWORK_PRESETS`). kohya's SDXL UNet has no such class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mixkit.registry import Registry


@dataclass(frozen=True)
class LayerPreset:
    """The layers one preset adapts (see the module docstring for how each field is read)."""

    unet_parents: tuple[str, ...]
    unet_paths: tuple[str, ...]
    text_encoder_parents: tuple[str, ...]
    convs: bool

    @property
    def adapts_text_encoder(self) -> bool:
        return bool(self.text_encoder_parents)


TRANSFORMER = ("Transformer2DModel",)
CONV_BLOCKS = ("ResnetBlock2D", "Downsample2D", "Upsample2D")
TIME_EMBEDDING = ("time_embedding.linear_1", "time_embedding.linear_2")
CONV_IN_OUT = ("conv_in", "conv_out")
TEXT_ENCODER_ATTENTION = ("CLIPAttention", "CLIPSdpaAttention")
TEXT_ENCODER_FULL = (*TEXT_ENCODER_ATTENTION, "CLIPMLP")

LYCORIS_PRESETS: Registry[LayerPreset] = Registry("LyCORIS preset")
LYCORIS_PRESETS.register("full", LayerPreset((*TRANSFORMER, *CONV_BLOCKS), (*CONV_IN_OUT, *TIME_EMBEDDING),
                                             TEXT_ENCODER_FULL, convs=True))
LYCORIS_PRESETS.register("full-lin", LayerPreset((*TRANSFORMER, "ResnetBlock2D"), TIME_EMBEDDING, TEXT_ENCODER_FULL,
                                                 convs=False))
LYCORIS_PRESETS.register("attn-mlp", LayerPreset(TRANSFORMER, (), TEXT_ENCODER_FULL, convs=False))
LYCORIS_PRESETS.register("attn-only", LayerPreset(("Attention",), (), TEXT_ENCODER_ATTENTION, convs=False))
LYCORIS_PRESETS.register("unet-only", LayerPreset((*TRANSFORMER, *CONV_BLOCKS), (*CONV_IN_OUT, *TIME_EMBEDDING), (),
                                                  convs=True))
LYCORIS_PRESETS.register("unet-transformer-only", LayerPreset(TRANSFORMER, (), (), convs=False))
LYCORIS_PRESETS.register("unet-convblock-only", LayerPreset(CONV_BLOCKS, CONV_IN_OUT, (), convs=True))

# mixkit's own networks as LyCORIS sees them, for the files of DoRA runs (LyCORIS's dora_wd) on those layers: kohya
# networks.lora's LoRA layers are LyCORIS's attn-mlp; no built-in preset builds LoCon's (full adds conv_in, conv_out
# and the time embedding on SD 1.x/2.x) or cross-kv's, so mixkit ships LyCORIS preset files that do (kohya's
# `--network_args "preset=<file>"` is how a LyCORIS user trains such a layer set, and kohya records the file's name).
PRESET_FILES_FOLDER = Path(__file__).with_name("lycoris_preset_files")
NETWORK_PRESET_FILES = {"locon": "mixkit_locon.toml", "cross-kv": "mixkit_cross_kv.toml"}
NETWORK_PRESETS = {"lora": "attn-mlp", **NETWORK_PRESET_FILES}


def network_of_preset_file(preset: str) -> str | None:
    """mixkit's network whose shipped LyCORIS preset file `preset` names (a path or a file name), else None."""
    name = preset.replace("\\", "/").rsplit("/", 1)[-1]
    return next((network for network, file in NETWORK_PRESET_FILES.items() if file == name), None)
