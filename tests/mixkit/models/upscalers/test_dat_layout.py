"""DAT files load through `load_upscaler` with every hyper-parameter read from the weights and buffers."""

from dataclasses import replace

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.upscalers.dat import DAT, DATConfig
from mixkit.models.upscalers.loading import load_upscaler, read_upscaler_weights
from mixkit.testing.tiny_upscalers import TINY_DAT, save_upscaler, tiny_upscaler, with_dat_buffers

CONFIGS = [
    TINY_DAT,
    replace(TINY_DAT, upscale=3, split_size=(4, 2), expansion_factor=1.5, qkv_bias=False),
    replace(TINY_DAT, upscale=4, depths=(2, 1, 3), num_heads=(4, 2, 8), embed_dim=64, resi_connection="3conv"),
    replace(TINY_DAT, upsampler="pixelshuffledirect", upscale=2, depths=(1,), num_heads=(2,), num_feat=64),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["x2", "x3-qkv-nobias", "x4-3conv", "light-x2"])
@pytest.mark.parametrize("suffix, wrapper", [(".pth", "params"), (".pth", "params_ema"), (".safetensors", None)])
def test_every_variant_round_trips_with_its_sizes_detected(tmp_path, config, suffix, wrapper):
    model = tiny_upscaler(config, seed=3)
    path = save_upscaler(model, tmp_path / f"4xNomos8kDAT{suffix}", "dat", wrapper=wrapper)
    layout, found, _ = read_upscaler_weights(path)
    assert (layout, found) == ("dat", config)
    loaded = load_upscaler(path)
    assert type(loaded).__name__ == "DAT" and loaded.scale == config.upscale
    x = torch.rand(1, 3, 7, 9)
    assert torch.equal(loaded(x), model(x)) and loaded(x).shape == (1, 3, 7 * config.upscale, 9 * config.upscale)


def test_the_released_dat_x4_sizes_are_read_without_building_weights():
    # DAT x4 (A1111's "DAT x4"): 6 groups of 6 blocks, 180 features, 6 heads, 8 x 32 windows, expansion 2
    config = DATConfig(embed_dim=180, depths=(6,) * 6, num_heads=(6,) * 6, split_size=(8, 32), expansion_factor=2.0,
                       upscale=4)
    with torch.device("meta"):
        state = DAT(config).state_dict()
    from mixkit.models.upscalers.layouts import TO_MODULE, detect_layout

    state = with_dat_buffers(state, config.split_size)
    assert detect_layout(state) == "dat" and TO_MODULE["dat"](state)[0] == config


def _saved(tmp_path, state):
    torch.save(state, tmp_path / "x.pth")
    return tmp_path / "x.pth"


def test_a_dat_file_without_its_window_buffers_is_refused_saying_so(tmp_path):
    state = tiny_upscaler(TINY_DAT).state_dict()  # the module keeps its buffers out of state_dict
    with pytest.raises(CheckpointFormatError, match=r"x\.pth' is a DAT file without its "
                                                    r"'layers\.0\.blocks\.0\.attn\.attns\.0\.rpe_biases' buffer.*SwinIR.*DAT"):
        load_upscaler(_saved(tmp_path, state))


def test_a_dat_file_whose_shapes_do_not_fit_is_refused_naming_the_key(tmp_path):
    model = tiny_upscaler(TINY_DAT)
    state = with_dat_buffers(model.state_dict(), TINY_DAT.split_size)
    state["layers.1.blocks.0.ffn.fc2.weight"] = torch.zeros(32, 8)
    with pytest.raises(CheckpointFormatError, match=r"dat layout but does not fit.*blocks\.0\.ffn\.fc2\.weight \(32, 8\)"):
        load_upscaler(_saved(tmp_path, state))


@pytest.mark.parametrize("offsets, message", [
    ([[63.0, 63.0]], r"a DAT whose shapes do not make a network: DAT's split_size windows may hold at most 1024 tokens "
                     r"\(released models use 8 x 32\), got \(64, 64\)"),
    ([[1e30, 1e30]], r"a DAT.*split_size windows may hold at most 1024 tokens .*got \(1048577, 1048577\)"),
    ([[float("nan"), 1.0]], r"a DAT whose 'layers\.0\.blocks\.0\.attn\.attns\.0\.rpe_biases' buffer is not finite"),
    ([1.0, 3.0], r"a DAT-like file whose 'layers\.0\.blocks\.0\.attn\.attns\.0\.rpe_biases' has shape \(2,\)"),
    ([[1.0, 3.0, 0.0]], r"a DAT whose .*rpe_biases' buffer is not finite \(dy, dx\) offset rows: shape \(1, 3\)"),
    ([[True, True]], r"a DAT whose .*rpe_biases' buffer is not finite \(dy, dx\) offset rows: shape \(1, 2\)"),
    (torch.tensor([[100, 100]], dtype=torch.int8), r"a DAT.*split_size windows may hold at most 1024 tokens .*\(101, 101\)"),
    (torch.tensor([[60000.0, 1.0]], dtype=torch.float16), r"a DAT.*split_size .*got \(60001, 2\)"),
])
def test_window_offsets_that_are_huge_or_not_numbers_are_refused_before_any_buffer_is_made(tmp_path, offsets, message):
    # a 64 x 64 window read from a one-row buffer asked for 1.4 GB of index buffers; 1e30 asked for 640 GB
    state = with_dat_buffers(tiny_upscaler(TINY_DAT).state_dict(), TINY_DAT.split_size)
    state["layers.0.blocks.0.attn.attns.0.rpe_biases"] = torch.as_tensor(offsets)
    with pytest.raises(CheckpointFormatError, match=rf"x\.pth' is {message}"):
        load_upscaler(_saved(tmp_path, state))


def test_a_feed_forward_too_narrow_to_gate_is_refused(tmp_path):
    state = with_dat_buffers(tiny_upscaler(TINY_DAT).state_dict(), TINY_DAT.split_size)
    state["layers.0.blocks.0.ffn.fc1.weight"] = torch.zeros(1, 32)
    with pytest.raises(CheckpointFormatError, match=r"feed-forward width embed_dim x expansion_factor must be even and "
                                                    r"at least 2 \(its gate takes half\), got 32 x 0\.03125"):
        load_upscaler(_saved(tmp_path, state))
