"""HAT files load through `load_upscaler` with every hyper-parameter read from the weights."""

import re
from dataclasses import replace

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.upscalers.hat import HAT, HATConfig
from mixkit.models.upscalers.layouts import TO_MODULE, detect_layout
from mixkit.models.upscalers.loading import load_upscaler, read_upscaler_weights
from mixkit.testing.tiny_upscalers import TINY_HAT, save_upscaler, tiny_upscaler, with_hat_buffers

CONFIGS = [
    TINY_HAT,
    replace(TINY_HAT, upscale=3, qkv_bias=False, patch_norm=False, mlp_ratio=1.5, cab_channels=4, squeeze_channels=2),
    replace(TINY_HAT, upscale=4, depths=(1, 2, 1), num_heads=(1, 2, 4), resi_connection="identity",
            overlap_window_size=8, num_feat=4),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["x2", "x3-nobias-nonorm", "x4-identity-wide-overlap"])
@pytest.mark.parametrize("suffix, wrapper", [(".pth", "params_ema"), (".safetensors", None)])
def test_every_variant_round_trips_with_its_sizes_detected(tmp_path, config, suffix, wrapper):
    model = tiny_upscaler(config, seed=3)
    path = save_upscaler(model, tmp_path / f"4xNomos8kHAT-L{suffix}", "hat", wrapper=wrapper)
    layout, found, _ = read_upscaler_weights(path)
    assert (layout, found) == ("hat", config)
    loaded = load_upscaler(path)
    assert type(loaded).__name__ == "HAT" and loaded.scale == config.upscale
    x = torch.rand(1, 3, 7, 9)
    assert torch.equal(loaded(x), model(x)) and loaded(x).shape == (1, 3, 7 * config.upscale, 9 * config.upscale)


@pytest.mark.parametrize("config", [
    HATConfig(depths=(6,) * 12, num_heads=(6,) * 12),  # HAT-L SRx4, Real_HAT_GAN_SRx4 is HAT (6 groups)
    HATConfig(embed_dim=144, cab_channels=6, squeeze_channels=6, upscale=2),  # HAT-S SRx2: compress / squeeze 24
], ids=["HAT-L", "HAT-S"])
def test_the_released_hat_sizes_are_read_without_building_weights(config):
    with torch.device("meta"):
        state = HAT(config).state_dict()
    state = with_hat_buffers(state, config)
    assert detect_layout(state) == "hat" and TO_MODULE["hat"](state)[0] == config


def _saved(tmp_path, state):
    torch.save(state, tmp_path / "x.pth")
    return tmp_path / "x.pth"


def _tiny_state():
    return with_hat_buffers(tiny_upscaler(TINY_HAT).state_dict(), TINY_HAT)


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update({"absolute_pos_embed": torch.zeros(1, 64, 8)}), r"HAT with an absolute position embedding"),
    (lambda s: [s.pop(k) for k in list(s) if k.startswith(("conv_before_upsample", "upsample."))] and
     s.update({"conv_last.weight": torch.zeros(3, 8, 3, 3)}), r"HAT whose reconstruction head is 'none'"),
    (lambda s: s.update({"conv_first.weight": torch.zeros(8, 1, 3, 3)}), r"HAT of 1 input / 3 output channels"),
    (lambda s: s.update({"layers.1.residual_group.blocks.0.attn.relative_position_bias_table": torch.zeros(9, 1)}),
     "HAT whose layers have different window sizes"),
    (lambda s: s.update({"layers.0.residual_group.blocks.0.attn.relative_position_bias_table": torch.zeros(36, 2),
                         "layers.1.residual_group.blocks.0.attn.relative_position_bias_table": torch.zeros(36, 1)}),
     r"HAT whose relative_position_bias_table has 36 rows, not \(2 \* window - 1\) \*\* 2"),
    (lambda s: s.update({"layers.0.residual_group.overlap_attn.relative_position_bias_table": torch.zeros(80, 2)}),
     r"HAT whose overlap_attn.relative_position_bias_table has 80 rows"),
    (lambda s: s.update({"layers.0.residual_group.overlap_attn.relative_position_bias_table": torch.zeros(64, 2)}),
     r"HAT whose shapes do not make a network: HAT overlap_window_size must exceed window_size 4 by an even number"),
    (lambda s: s.pop("layers.0.residual_group.overlap_attn.relative_position_bias_table"),
     r"HAT-like file without 'layers\.0\.residual_group\.overlap_attn\.relative_position_bias_table'"),
])
def test_hat_files_it_cannot_run_are_refused_naming_why_and_the_supported_layouts(tmp_path, edit, message):
    state = _tiny_state()
    edit(state)
    with pytest.raises(CheckpointFormatError, match=rf"x\.pth' is a {message}.*; expected ESRGAN.*HAT"):
        load_upscaler(_saved(tmp_path, state))


def test_a_hat_file_whose_shapes_do_not_fit_is_refused_naming_the_key(tmp_path):
    state = _tiny_state()
    state["layers.1.residual_group.blocks.0.conv_block.cab.2.weight"] = torch.zeros(8, 3, 3, 3)
    with pytest.raises(CheckpointFormatError, match=re.escape("hat layout but does not fit it: missing [], unexpected "
                                                              "[], wrong shapes ['layers.1.residual_group.blocks.0."
                                                              "conv_block.cab.2.weight (8, 3, 3, 3) (expected (8, 2, 3, "
                                                              "3))']")):
        load_upscaler(_saved(tmp_path, state))


def test_a_hat_file_with_non_finite_weights_is_refused(tmp_path):
    state = _tiny_state()
    state["layers.0.residual_group.overlap_attn.proj.weight"][0, 0] = float("nan")
    with pytest.raises(CheckpointFormatError, match=r"overlap_attn\.proj\.weight"):
        load_upscaler(_saved(tmp_path, state))


def test_the_stored_position_indices_are_not_needed():
    model = tiny_upscaler(TINY_HAT)
    assert TO_MODULE["hat"](model.state_dict())[0] == TINY_HAT
