"""ParseNet under facexlib's key names and shapes, and loading a parsing_parsenet.pth-layout file with its checks."""

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.face.parsenet import ParseNet, ParseNetConfig, load_parsenet, parsenet_config_from_state
from mixkit.testing.tiny_face_parsing import TINY_PARSENET_CONFIG, tiny_parsenet, write_tiny_parsenet


def test_default_parsenet_has_facexlibs_keys_and_shapes():
    state = ParseNet(ParseNetConfig.facexlib()).state_dict()
    expected = {
        "encoder.0.conv2d.weight": (64, 3, 3, 3), "encoder.0.conv2d.bias": (64,),
        "encoder.1.shortcut_func.conv2d.weight": (128, 64, 3, 3), "encoder.1.shortcut_func.conv2d.bias": (128,),
        "encoder.1.conv1.conv2d.weight": (128, 64, 3, 3), "encoder.1.conv1.norm.norm.running_mean": (128,),
        "encoder.1.conv2.conv2d.weight": (128, 128, 3, 3), "encoder.2.conv1.conv2d.weight": (256, 128, 3, 3),
        "encoder.3.conv1.conv2d.weight": (256, 256, 3, 3), "encoder.4.shortcut_func.conv2d.weight": (256, 256, 3, 3),
        "body.9.conv2.norm.norm.weight": (256,), "body.9.conv1.norm.norm.num_batches_tracked": (),
        "decoder.0.conv1.conv2d.weight": (256, 256, 3, 3), "decoder.2.shortcut_func.conv2d.weight": (128, 256, 3, 3),
        "decoder.3.conv2.conv2d.weight": (64, 64, 3, 3), "out_img_conv.conv2d.weight": (3, 64, 3, 3),
        "out_mask_conv.conv2d.weight": (19, 64, 3, 3), "out_mask_conv.conv2d.bias": (19,),
    }
    assert {key: tuple(state[key].shape) for key in expected} == expected
    assert "encoder.1.conv1.conv2d.bias" not in state  # batch-normed convs have no bias
    assert not any(key.startswith("body.0.shortcut_func") for key in state)  # same width and size: identity
    assert not any(key.startswith("encoder.5") or key.startswith("decoder.4") or key.startswith("body.10")
                   for key in state)
    # encoder.0 (2) + 4 down and 4 up blocks with shortcut (2 convs × (weight + 5 batch-norm entries) + 2 = 14 each)
    # + 10 body blocks (12 each) + two heads (2 each)
    assert len(state) == 2 + 8 * 14 + 10 * 12 + 4


def test_config_read_back_from_the_default_state_builds_the_same_network():
    state = ParseNet().state_dict()
    config = parsenet_config_from_state(state)
    assert (config.down_steps, config.up_steps, config.res_depth, config.parsing_channels) == (4, 4, 10, 19)
    rebuilt = ParseNet(config).state_dict()
    assert {key: value.shape for key, value in rebuilt.items()} == {key: value.shape for key, value in state.items()}


def test_forward_gives_class_logits_and_image_at_the_input_size():
    model = tiny_parsenet()
    logits, image = model(torch.zeros(2, 3, 16, 16))
    assert logits.shape == (2, 19, 16, 16) and image.shape == (2, 3, 16, 16)


@pytest.mark.parametrize("prefix", ["", "module."])
def test_tiny_file_round_trips_weights_statistics_and_output(tmp_path, prefix):
    saved = write_tiny_parsenet(tmp_path / "parsing_parsenet.pth", seed=3, prefix=prefix)
    loaded = load_parsenet(tmp_path / "parsing_parsenet.pth")
    assert loaded.config == TINY_PARSENET_CONFIG
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    for key, value in saved.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    face = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        assert torch.equal(loaded(face)[0], saved(face)[0])


def test_file_without_batch_norm_counters_still_loads(tmp_path):
    saved = tiny_parsenet(seed=2)
    torch.save({k: v for k, v in saved.state_dict().items() if not k.endswith("num_batches_tracked")},
               tmp_path / "old.pth")
    loaded = load_parsenet(tmp_path / "old.pth")
    assert torch.equal(loaded.state_dict()["body.0.conv1.norm.norm.running_var"],
                       saved.state_dict()["body.0.conv1.norm.norm.running_var"])


def test_a_wrong_shape_is_refused_naming_the_key(tmp_path):
    state = tiny_parsenet().state_dict()
    state["body.0.conv1.norm.norm.weight"] = torch.zeros(5)
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(CheckpointFormatError, match=r"body\.0\.conv1\.norm\.norm\.weight \(5,\) \(expected \(8,\)\)"):
        load_parsenet(tmp_path / "bad.pth")


def test_a_missing_tensor_is_refused_naming_it(tmp_path):
    state = tiny_parsenet().state_dict()
    del state["decoder.1.conv2.conv2d.weight"]
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(CheckpointFormatError, match=r"missing \['decoder\.1\.conv2\.conv2d\.weight'\]"):
        load_parsenet(tmp_path / "bad.pth")


def test_another_network_is_refused_as_not_a_parsenet(tmp_path):
    torch.save({"body.layer1.0.conv1.weight": torch.zeros(64, 64, 1, 1)}, tmp_path / "detection_Resnet50_Final.pth")
    with pytest.raises(CheckpointFormatError, match="is not a ParseNet face parser.*encoder.0.conv2d.weight"):
        load_parsenet(tmp_path / "detection_Resnet50_Final.pth")


def test_uneven_encoder_and_decoder_are_refused(tmp_path):
    config = ParseNetConfig(base_channels=4, min_channels=4, max_channels=8, down_steps=2, up_steps=1, res_depth=1)
    torch.save(ParseNet(config).state_dict(), tmp_path / "uneven.pth")
    with pytest.raises(CheckpointFormatError, match="2 encoder and 1 decoder steps"):
        load_parsenet(tmp_path / "uneven.pth")


def _functional_parsenet(state, x, down, depth, up):
    """facexlib's ParseNet forward written out from its description, on the state dict alone: the oracle for the
    module wiring (which conv strides or upsamples, where batch norm and LeakyReLU sit, the body's skip)."""
    import torch.nn.functional as F

    def conv(prefix, x, stride=1, upsample=False, bn=False, act=False):
        if upsample:
            x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), state[f"{prefix}.conv2d.weight"],
                     state.get(f"{prefix}.conv2d.bias"), stride=stride)
        if bn:
            x = F.batch_norm(x, state[f"{prefix}.norm.norm.running_mean"], state[f"{prefix}.norm.norm.running_var"],
                             state[f"{prefix}.norm.norm.weight"], state[f"{prefix}.norm.norm.bias"], eps=1e-5)
        return F.leaky_relu(x, 0.2) if act else x

    def block(prefix, x, scale):
        shortcut = x if f"{prefix}.shortcut_func.conv2d.weight" not in state else conv(
            f"{prefix}.shortcut_func", x, stride=2 if scale == "down" else 1, upsample=scale == "up")
        h = conv(f"{prefix}.conv1", x, upsample=scale == "up", bn=True, act=True)
        return shortcut + conv(f"{prefix}.conv2", h, stride=2 if scale == "down" else 1, bn=True)

    feat = conv("encoder.0", x)
    for i in range(1, down + 1):
        feat = block(f"encoder.{i}", feat, "down")
    body = feat
    for i in range(depth):
        body = block(f"body.{i}", body, "none")
    h = feat + body
    for i in range(up):
        h = block(f"decoder.{i}", h, "up")
    return conv("out_mask_conv", h), conv("out_img_conv", h)


def test_forward_matches_the_functional_description():
    model = tiny_parsenet(seed=4)
    state = model.state_dict()
    x = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(2)) * 2 - 1
    with torch.no_grad():
        logits, image = model(x)
        oracle_logits, oracle_image = _functional_parsenet(state, x, 2, 1, 2)
    assert torch.allclose(logits, oracle_logits, atol=1e-5) and torch.allclose(image, oracle_image, atol=1e-5)
