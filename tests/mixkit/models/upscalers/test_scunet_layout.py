"""SCUNet (A1111's ScuNET) files load through `load_upscaler` with every hyper-parameter read from the weights."""

import re
from dataclasses import replace

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.upscalers.layouts import TO_MODULE, detect_layout
from mixkit.models.upscalers.loading import load_upscaler, read_upscaler_weights
from mixkit.models.upscalers.scunet import SCUNet, SCUNetConfig
from mixkit.testing.tiny_upscalers import TINY_SCUNET, save_upscaler, tiny_upscaler

CONFIGS = [TINY_SCUNET, replace(TINY_SCUNET, dim=32, head_dim=8, window_size=2, depths=(1, 0, 2, 1, 0, 3, 1))]


@pytest.mark.parametrize("config", CONFIGS, ids=["tiny", "empty-stages"])
@pytest.mark.parametrize("suffix, wrapper", [(".pth", None), (".pth", "params"), (".safetensors", None)])
def test_every_variant_round_trips_with_its_sizes_detected(tmp_path, config, suffix, wrapper):
    model = tiny_upscaler(config, seed=3)
    path = save_upscaler(model, tmp_path / f"scunet_color_real_psnr{suffix}", "scunet", wrapper=wrapper)
    layout, found, _ = read_upscaler_weights(path)
    assert (layout, found) == ("scunet", config)
    loaded = load_upscaler(path)
    assert type(loaded).__name__ == "SCUNet" and loaded.scale == 1
    x = torch.rand(1, 3, 7, 9)
    assert torch.equal(loaded(x), model(x)) and loaded(x).shape == (1, 3, 7, 9)


def test_the_released_scunet_sizes_are_read_without_building_weights():
    config = SCUNetConfig()  # scunet_color_real_gan / _psnr: dim 64, 4 blocks per stage, 32-channel heads, 8 windows
    with torch.device("meta"):
        state = SCUNet(config).state_dict()
    assert detect_layout(state) == "scunet" and TO_MODULE["scunet"](state)[0] == config
    assert state["m_down1.0.trans_block.msa.relative_position_params"].shape == (1, 15, 15)


def _saved(tmp_path, state):
    torch.save(state, tmp_path / "x.pth")
    return tmp_path / "x.pth"


def _renumber(state, old, new):
    for key in [key for key in state if key.startswith(old)]:
        state[new + key[len(old):]] = state.pop(key)


@pytest.mark.parametrize("edit, message", [
    (lambda s: _renumber(s, "m_down1.1.", "m_down1.5."), r"SCUNet whose m_down1 blocks are not numbered 0, 1 \.\.\.: \[0, 5\]"),
    (lambda s: _renumber(s, "m_up1.1.", "m_up1.0."), r"SCUNet whose m_up1 blocks are not numbered 1, 2 \.\.\.: \[0\]"),
    (lambda s: s.update({"m_head.0.weight": torch.zeros(16, 1, 3, 3)}), r"SCUNet of 1 channels \(grayscale"),
    (lambda s: s.update({"m_down1.0.trans_block.msa.relative_position_params": torch.zeros(2, 6, 6)}),
     r"SCUNet whose relative_position_params has shape \(2, 6, 6\)"),
    (lambda s: s.update({"m_down1.0.trans_block.msa.relative_position_params": torch.zeros(3, 7, 7)}),
     r"SCUNet whose m_down1 transformer of 8 channels does not split into its 3 heads"),
    (lambda s: s.update({"m_head.0.weight": torch.zeros(3, 3)}), r"SCUNet-like file whose 'm_head\.0\.weight' has shape"),
    (lambda s: [s.pop(k) for k in list(s) if re.match(r"m_(down|up|body)", k)],
     r"SCUNet without any Swin-Conv block"),
])
def test_scunet_files_it_cannot_run_are_refused_naming_why_and_the_supported_layouts(tmp_path, edit, message):
    state = tiny_upscaler(TINY_SCUNET).state_dict()
    edit(state)
    with pytest.raises(CheckpointFormatError, match=rf"x\.pth' is a[n]? {message}.*; expected ESRGAN.*SCUNet"):
        load_upscaler(_saved(tmp_path, state))


def test_an_scunet_file_whose_shapes_do_not_fit_is_refused_naming_the_key(tmp_path):
    state = tiny_upscaler(TINY_SCUNET).state_dict()
    state["m_down2.0.conv_block.0.weight"] = torch.zeros(8, 8, 1, 1)
    with pytest.raises(CheckpointFormatError, match=re.escape("scunet layout but does not fit it: missing [], unexpected "
                                                              "[], wrong shapes ['m_down2.0.conv_block.0.weight (8, 8, "
                                                              "1, 1) (expected (16, 16, 3, 3))']")):
        load_upscaler(_saved(tmp_path, state))
    state = tiny_upscaler(TINY_SCUNET).state_dict()
    state["m_up2.2.conv1_2.bias"] = state.pop("m_up2.1.conv1_2.bias")
    with pytest.raises(CheckpointFormatError, match=re.escape("missing ['m_up2.1.conv1_2.bias'], unexpected "
                                                              "['m_up2.2.conv1_2.bias']")):
        load_upscaler(_saved(tmp_path, state))


def test_an_scunet_file_with_non_finite_weights_is_refused(tmp_path):
    state = tiny_upscaler(TINY_SCUNET).state_dict()
    state["m_tail.0.weight"][0, 0, 0, 0] = float("inf")
    with pytest.raises(CheckpointFormatError, match=r"m_tail\.0\.weight"):
        load_upscaler(_saved(tmp_path, state))
