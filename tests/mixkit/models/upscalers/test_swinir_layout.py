"""SwinIR files of every variant load through `load_upscaler` with all hyper-parameters read from the weights."""

import re
from dataclasses import replace

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.upscalers.loading import load_upscaler, read_upscaler_weights
from mixkit.models.upscalers.swinir import SwinIR, SwinIRConfig
from mixkit.testing.tiny_upscalers import TINY_SWINIR, save_upscaler, tiny_upscaler, with_swinir_buffers

# num_feat is the pixelshuffle / nearest+conv heads' width: the other heads keep the default, which no file stores
CONFIGS = [
    replace(TINY_SWINIR, upsampler="pixelshuffle", upscale=2),
    replace(TINY_SWINIR, upsampler="pixelshuffle", upscale=3, window_size=2, num_feat=4),
    replace(TINY_SWINIR, upsampler="pixelshuffle", upscale=8, depths=(1, 2, 1), num_heads=(1, 2, 4), mlp_ratio=4.0),
    replace(TINY_SWINIR, upsampler="pixelshuffledirect", upscale=4, embed_dim=12, num_heads=(3, 2), mlp_ratio=1.5,
            num_feat=64),
    replace(TINY_SWINIR, upsampler="nearest+conv", upscale=4, resi_connection="3conv"),  # Real-SwinIR M/L
    replace(TINY_SWINIR, upsampler="nearest+conv", upscale=2, qkv_bias=False, patch_norm=False),
    replace(TINY_SWINIR, upsampler="", upscale=1, window_size=3, num_feat=64),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.upsampler or 'none'}-x{c.upscale}-w{c.window_size}")
@pytest.mark.parametrize("suffix, wrapper", [(".pth", "params_ema"), (".pth", "params"), (".pth", None),
                                             (".safetensors", None)])
def test_every_variant_round_trips_with_its_sizes_detected(tmp_path, config, suffix, wrapper):
    model = tiny_upscaler(config, seed=5)
    path = save_upscaler(model, tmp_path / f"swin{suffix}", "swinir", wrapper=wrapper)
    layout, found, _ = read_upscaler_weights(path)
    assert (layout, found) == ("swinir", config)
    loaded = load_upscaler(path)
    assert type(loaded).__name__ == "SwinIR" and loaded.scale == config.upscale
    for height, width in [(2 * config.window_size, 3 * config.window_size), (7, 5)]:
        x = torch.rand(1, 3, height, width)
        out = loaded(x)
        assert out.shape == (1, 3, height * config.upscale, width * config.upscale)
        assert torch.equal(out, model(x))


def test_the_released_x4_sizes_are_read_from_a_file_without_running_it(tmp_path):
    # SwinIR-L Real-SwinIR (A1111's "SwinIR 4x"): 9 layers of 6 blocks, 240 features, 8 heads, window 8, 3conv
    config = SwinIRConfig(embed_dim=240, depths=(6,) * 9, num_heads=(8,) * 9, window_size=8, mlp_ratio=2.0,
                          upsampler="nearest+conv", upscale=4, resi_connection="3conv")
    with torch.device("meta"):  # shapes only: no 12M random weights
        state = with_swinir_buffers(SwinIR(config).state_dict(), train_size=64)
    from mixkit.models.upscalers.layouts import TO_MODULE, detect_layout

    assert detect_layout(state) == "swinir" and TO_MODULE["swinir"](state)[0] == config
    assert state["layers.0.residual_group.blocks.1.attn_mask"].shape == (64, 64, 64)  # the file's, for 64x64 patches


def test_the_stored_buffers_are_dropped_and_not_required(tmp_path):
    model = tiny_upscaler(TINY_SWINIR, seed=6)
    state = with_swinir_buffers(model.state_dict())
    assert any(key.endswith("attn_mask") for key in state) and any(key.endswith("relative_position_index") for key in state)
    torch.save(state, tmp_path / "with.pth")
    torch.save(model.state_dict(), tmp_path / "without.pth")
    x = torch.rand(1, 3, 9, 6)
    assert torch.equal(load_upscaler(tmp_path / "with.pth")(x), load_upscaler(tmp_path / "without.pth")(x))


def _renumber(state, old, new):
    for key in [key for key in state if key.startswith(old)]:
        state[new + key[len(old):]] = state.pop(key)


def _saved(tmp_path, state, name="x.pth"):
    torch.save(state, tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("edit, message", [
    # a HAT's keys are told apart before SwinIR's: this one is read as a HAT, and lacks the rest of one
    (lambda s: s.update({"layers.0.residual_group.blocks.0.conv_block.cab.0.weight": torch.zeros(1)}),
     r"HAT-like file without 'layers\.0\.residual_group\.overlap_attn\.relative_position_bias_table'"),
    (lambda s: s.update({"layers.0.residual_group.blocks.0.attn.logit_scale": torch.zeros(2, 1, 1)}), "Swin2SR network"),
    (lambda s: s.update({"absolute_pos_embed": torch.zeros(1, 64, 8)}), r"SwinIR with an absolute position embedding \(ape=True\)"),
    (lambda s: _renumber(s, "layers.0.residual_group.blocks.1.", "layers.0.residual_group.blocks.2."),
     r"SwinIR whose layers/blocks are not numbered 0, 1, 2"),
    (lambda s: s.update({"layers.1.residual_group.blocks.0.attn.relative_position_bias_table": torch.zeros(9, 1)}),
     "SwinIR whose layers have different window sizes"),
    (lambda s: s.update({"layers.0.residual_group.blocks.0.attn.relative_position_bias_table": torch.zeros(48, 2)}),
     r"SwinIR whose relative position bias table has 48 rows, not \(2 \* window - 1\) \*\* 2"),
    (lambda s: s.update({"conv_first.weight": torch.zeros(8, 1, 3, 3)}), r"SwinIR of 1 input / 3 output channels \(grayscale"),
    (lambda s: s.update({"upsample.0.weight": torch.zeros(40, 8, 3, 3)}), r"SwinIR whose upsample convolutions widen 5x, not 4x"),
])
def test_swinir_like_files_it_cannot_run_are_refused_naming_why_and_the_supported_layouts(tmp_path, edit, message):
    state = tiny_upscaler(TINY_SWINIR).state_dict()
    edit(state)
    with pytest.raises(CheckpointFormatError, match=rf"x\.pth' is a {message}.*; expected ESRGAN.*SRVGGNetCompact.*SwinIR"):
        load_upscaler(_saved(tmp_path, state))


def test_a_swinir_file_whose_shapes_do_not_fit_is_refused_naming_the_key(tmp_path):
    state = tiny_upscaler(TINY_SWINIR).state_dict()
    state["layers.0.residual_group.blocks.1.attn.proj.weight"] = torch.zeros(8, 4)
    with pytest.raises(CheckpointFormatError, match=re.escape("blocks.1.attn.proj.weight (8, 4) (expected (8, 8))")):
        load_upscaler(_saved(tmp_path, state))


def test_a_window_too_large_to_index_is_refused_before_anything_is_built(tmp_path):
    # a 33 x 33 window is a 65 x 65 x 1 table (17 kB) but a 1089 x 1089 index per block and masks to match
    state = tiny_upscaler(TINY_SWINIR).state_dict()
    for key in [key for key in state if key.endswith("relative_position_bias_table")]:
        state[key] = torch.zeros(65 * 65, state[key].shape[1])
    with pytest.raises(CheckpointFormatError, match=r"x\.pth' is a SwinIR whose shapes do not make a network: SwinIR "
                                                    r"window_size must be 1 to 32 \(released models use 8\), got 33"):
        load_upscaler(_saved(tmp_path, state))


@pytest.mark.parametrize("key, shape", [
    ("conv_first.weight", ()), ("conv_first.weight", (0, 3, 3, 3)), ("conv_last.weight", (8,)),
    ("upsample.0.weight", ()), ("layers.0.residual_group.blocks.0.attn.relative_position_bias_table", (49,)),
    ("layers.0.residual_group.blocks.0.mlp.fc1.weight", ())])
def test_a_size_giving_tensor_of_the_wrong_rank_is_refused_naming_it(tmp_path, key, shape):
    state = tiny_upscaler(TINY_SWINIR).state_dict()
    state[key] = torch.zeros(shape)
    with pytest.raises(CheckpointFormatError, match=rf"x\.pth' is a SwinIR-like file whose {re.escape(repr(key))} has "
                                                    rf"shape {re.escape(str(shape))}; expected \d non-empty dimensions"):
        load_upscaler(_saved(tmp_path, state))


def test_a_file_naming_more_blocks_than_any_network_has_is_refused_before_laying_them_out(tmp_path):
    # 2000 one-number keys (a 0.7 MB file) took 15 s of CPU to lay out on the meta device before being found short
    state = tiny_upscaler(TINY_SWINIR).state_dict()
    state.update({f"layers.0.residual_group.blocks.{index}.norm1.weight": torch.zeros(1) for index in range(2, 2000)})
    with pytest.raises(CheckpointFormatError, match=r"x\.pth' is a SwinIR whose shapes do not make a network: SwinIR "
                                                    r"may have at most 1024 blocks in all, got 2001 \(depths \(2000, 1\)\)"):
        load_upscaler(_saved(tmp_path, state))


def test_a_swinir_file_whose_only_block_keys_are_stored_buffers_is_refused_naming_the_numbering(tmp_path):
    # the stored buffers are dropped before blocks are counted: none are left (this was an IndexError)
    state = {"conv_first.weight": torch.zeros(8, 3, 3, 3),
             "layers.0.residual_group.blocks.0.attn.relative_position_index": torch.zeros(16, 16)}
    with pytest.raises(CheckpointFormatError, match=r"SwinIR whose layers/blocks are not numbered 0, 1, 2 \.\.\.: \[\]"):
        load_upscaler(_saved(tmp_path, state))
