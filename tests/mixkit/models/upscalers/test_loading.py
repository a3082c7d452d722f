"""Upscaler files in every key layout load into the same network; unknown files are refused by name."""

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.upscalers.loading import load_upscaler, read_upscaler_weights
from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig
from mixkit.testing.tiny_upscalers import TINY_RRDB, TINY_SRVGG, save_upscaler, tiny_upscaler


@pytest.mark.parametrize("layout, wrapper, suffix", [
    ("esrgan", None, ".pth"), ("basicsr", "params_ema", ".pth"), ("basicsr", "params", ".pth"),
    ("basicsr", None, ".safetensors"), ("esrgan", None, ".safetensors")])
def test_every_rrdb_layout_loads_the_same_network(tmp_path, layout, wrapper, suffix):
    model = tiny_upscaler(RRDBNetConfig(features=8, growth=4, blocks=2), seed=3)
    path = save_upscaler(model, tmp_path / f"m{suffix}", layout, wrapper=wrapper)
    found, config, _ = read_upscaler_weights(path)
    assert (found, config) == (layout, RRDBNetConfig(features=8, growth=4, blocks=2, upsamples=2))
    loaded = load_upscaler(path)
    x = torch.rand(1, 3, 6, 5)
    assert torch.equal(loaded(x), model(x))
    assert loaded(x).shape == (1, 3, 24, 20)


def test_params_ema_wins_over_params(tmp_path):
    ema, raw = tiny_upscaler(TINY_RRDB, seed=1), tiny_upscaler(TINY_RRDB, seed=2)
    from mixkit.models.upscalers.layouts import module_to_basicsr

    torch.save({"params": module_to_basicsr(raw.state_dict()), "params_ema": module_to_basicsr(ema.state_dict())},
               tmp_path / "both.pth")
    x = torch.rand(1, 3, 4, 4)
    assert torch.equal(load_upscaler(tmp_path / "both.pth")(x), ema(x))


@pytest.mark.parametrize("in_channels, scale", [(12, 2), (48, 1)])
def test_pixel_unshuffle_variants_read_their_scale_from_conv_first(tmp_path, in_channels, scale):
    model = tiny_upscaler(RRDBNetConfig(in_channels=in_channels, features=8, growth=4, blocks=1))
    path = save_upscaler(model, tmp_path / "x.pth", "basicsr", wrapper="params_ema")
    loaded = load_upscaler(path)
    assert loaded.scale == scale
    x = torch.rand(1, 3, 8, 12)
    assert torch.equal(loaded(x), model(x)) and loaded(x).shape == (1, 3, 8 * scale, 12 * scale)
    # sides that are not whole unshuffle cells are padded and cropped back
    assert loaded(torch.rand(1, 3, 7, 5)).shape == (1, 3, 7 * scale, 5 * scale)


@pytest.mark.parametrize("upsamples", [1, 2, 3])
def test_old_layout_scale_is_counted_from_its_upsample_convs(tmp_path, upsamples):
    config = RRDBNetConfig(features=8, growth=4, blocks=1, upsamples=upsamples)
    path = save_upscaler(tiny_upscaler(config), tmp_path / "old.pth", "esrgan")
    assert read_upscaler_weights(path)[1] == config and load_upscaler(path).scale == 2 ** upsamples


def test_srvgg_reads_features_convs_and_scale(tmp_path):
    config = SRVGGConfig(features=8, convs=3, scale=2)
    model = tiny_upscaler(config, seed=4)
    path = save_upscaler(model, tmp_path / "realesr-general-x4v3.pth", "srvgg")
    torch.save({"params": torch.load(path)}, path)
    layout, found, _ = read_upscaler_weights(path)
    assert (layout, found) == ("srvgg", config)
    x = torch.rand(1, 3, 5, 6)
    assert torch.equal(load_upscaler(path)(x), model(x))


def test_srvgg_output_is_the_nearest_upsampled_input_plus_a_learned_residual():
    model = tiny_upscaler(TINY_SRVGG)
    torch.nn.init.zeros_(model.body[-1].weight), torch.nn.init.zeros_(model.body[-1].bias)
    x = torch.rand(1, 3, 3, 2)
    assert torch.equal(model(x), x.repeat_interleave(4, 2).repeat_interleave(4, 3))


def test_unknown_layout_is_refused_naming_the_file_and_the_layouts(tmp_path):
    path = tmp_path / "4x-SPAN.pth"  # SPAN's keys (conv_1.sk, block_1.c1_r.sk ...) are none of the supported ones
    torch.save({"conv_1.sk.weight": torch.zeros(8, 3, 1, 1), "block_1.c1_r.sk.weight": torch.zeros(8, 8, 1, 1)}, path)
    with pytest.raises(CheckpointFormatError,
                       match=r"4x-SPAN\.pth.*not a known upscaler layout.*ESRGAN.*BasicSR.*SRVGG.*SwinIR.*DAT"):
        load_upscaler(path)


def test_a_file_that_does_not_fit_its_layout_is_refused(tmp_path):
    from mixkit.models.upscalers.layouts import module_to_basicsr

    state = module_to_basicsr(tiny_upscaler(TINY_RRDB).state_dict())
    state["conv_hr.weight"] = torch.zeros(8, 8, 1, 1)
    torch.save(state, tmp_path / "broken.pth")
    with pytest.raises(CheckpointFormatError, match=r"broken\.pth.*basicsr.*conv_hr\.weight"):
        load_upscaler(tmp_path / "broken.pth")


def test_a_tiny_file_claiming_huge_shapes_is_refused_before_any_network_is_built(tmp_path):
    # SRVGG's width comes from the shapes: stride-0 views of one stored value claim 20000 features (a 14 GB network)
    state = dict(tiny_upscaler(TINY_SRVGG).state_dict())
    for key, value in state.items():
        shape = [20000 if size == 8 else size for size in value.shape]
        state[key] = torch.zeros(1).expand(*shape)
    torch.save(state, tmp_path / "crafted.pth")
    with pytest.raises(CheckpointFormatError, match=r"crafted\.pth.*claims shape \(20000, .*only 4 bytes"):
        read_upscaler_weights(tmp_path / "crafted.pth")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_weights_are_refused_naming_the_tensor(tmp_path, bad):
    model = tiny_upscaler(TINY_SRVGG)
    with torch.no_grad():
        model.body[-1].bias[0] = bad
    path = save_upscaler(model, tmp_path / "nan.pth", "srvgg")
    with pytest.raises(CheckpointFormatError, match=r"nan\.pth.*srvgg upscaler weight 'body\.\d+\.bias'.*NaN or inf"):
        read_upscaler_weights(path)


def test_a_pickle_that_imports_code_is_refused(tmp_path):
    from mixkit.errors import UnsafeCheckpointError

    torch.save({"model.0.weight": torch.zeros(1), "hook": print}, tmp_path / "evil.pth")
    with pytest.raises(UnsafeCheckpointError):
        load_upscaler(tmp_path / "evil.pth")


def test_the_later_esrgan_names_load_as_basicsr(tmp_path):
    from mixkit.models.upscalers.layouts import module_to_basicsr

    model = tiny_upscaler(TINY_RRDB, seed=6)
    names = {"body.": "RRDB_trunk.", "conv_body.": "trunk_conv.", "conv_up1.": "upconv1.", "conv_up2.": "upconv2.",
             "conv_hr.": "HRconv."}
    state = {}
    for key, value in module_to_basicsr(model.state_dict()).items():
        for new, old in names.items():
            if key.startswith(new):
                key = old + key[len(new):]
        state[key.replace(".rdb", ".RDB")] = value
    assert "RRDB_trunk.0.RDB1.conv1.weight" in state
    torch.save(state, tmp_path / "RRDB_ESRGAN_x4.pth")
    assert read_upscaler_weights(tmp_path / "RRDB_ESRGAN_x4.pth")[0] == "esrgan_trunk"
    x = torch.rand(1, 3, 5, 5)
    assert torch.equal(load_upscaler(tmp_path / "RRDB_ESRGAN_x4.pth")(x), model(x))


def test_a_broadcast_view_claiming_more_weights_than_its_file_holds_is_refused(tmp_path):
    # torch.save keeps a stride-0 view's one-element storage: 1 kB on disk, 4 MB (or any size) once copied
    state = dict(tiny_upscaler(TINY_SRVGG).state_dict())
    state["body.0.weight"] = torch.zeros(1).expand(state["body.0.weight"].shape)
    torch.save(state, tmp_path / "bomb.pth")
    with pytest.raises(CheckpointFormatError, match=r"bomb\.pth': tensor 'body\.0\.weight' claims shape \(8, 3, 3, 3\) but "
                                                    r"the file stores only 4 bytes for it \(a broadcast view"):
        load_upscaler(tmp_path / "bomb.pth")


def test_a_file_that_does_not_fill_its_network_is_refused_before_the_network_is_allocated(tmp_path, monkeypatch):
    # block counts come from key names: 200 one-number keys would otherwise build 200 real transformer blocks first
    from mixkit.models.upscalers import loading
    from mixkit.testing.tiny_upscalers import TINY_SWINIR

    state = dict(tiny_upscaler(TINY_SWINIR).state_dict())
    state.update({f"layers.0.residual_group.blocks.{index}.norm1.weight": torch.zeros(1) for index in range(2, 200)})
    torch.save(state, tmp_path / "claims.pth")
    devices = []
    real_build = loading.build_upscaler
    monkeypatch.setattr(loading, "build_upscaler",
                        lambda config: devices.append(next((model := real_build(config)).parameters()).device) or model)
    with pytest.raises(CheckpointFormatError, match=r"claims\.pth' looks like the swinir layout but does not fit it: "
                                                    r"missing \['layers\.0\.residual_group\.blocks\.2\.norm1\.bias'"):
        load_upscaler(tmp_path / "claims.pth")
    assert devices == [torch.device("meta")]
