"""A ControlNet's and a checkpoint's model family, read from configs and tensor shapes without loading weights."""

from __future__ import annotations

import pytest

from pipelines.controlnet.family import ModelFamily, check_same_family, family_of_config, family_of_shapes, read_family


@pytest.mark.parametrize("family, label", [
    (ModelFamily(768, False), "SD 1.x"), (ModelFamily(1024, False), "SD 2.x"), (ModelFamily(2048, True), "SDXL"),
    (ModelFamily(1280, True), "SDXL refiner"), (ModelFamily(32, False), "SD-like (cross-attention width 32)"),
    (ModelFamily(64, True), "SDXL-like (cross-attention width 64)"),
])
def test_family_labels(family, label):
    assert family.label == label


def test_original_layout_shapes_give_the_family():
    """The lllyasviel (ldm) layout of control_v11p_sd15_canny and of an SDXL ControlNet, by their key names."""
    sd15 = {"control_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight": (320, 768),
            "control_model.input_hint_block.0.weight": (16, 3, 3, 3)}
    xl = {"control_model.input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight": (640, 2048),
          "control_model.label_emb.0.0.weight": (1280, 2816)}
    assert family_of_shapes(sd15) == ModelFamily(768, False)
    assert family_of_shapes(xl) == ModelFamily(2048, True)
    assert family_of_shapes({"conv_in.weight": (320, 4, 3, 3)}) is None  # no cross-attention: cannot tell


def test_folders_and_single_files_are_read_without_loading(tmp_path, tiny_sd1_dir, tiny_sdxl_dir):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet, tiny_controlnet

    assert read_family(build_tiny_controlnet(tmp_path / "cn-xl", sdxl=True)) == ModelFamily(64, True)
    assert read_family(build_tiny_controlnet(tmp_path / "cn-sd1")) == ModelFamily(32, False)
    save_file(tiny_controlnet(sdxl=True).state_dict(), tmp_path / "xl.safetensors")
    assert read_family(tmp_path / "xl.safetensors") == ModelFamily(64, True)
    assert read_family(tiny_sd1_dir) == ModelFamily(32, False)  # a pipeline folder: its unet/config.json
    assert read_family(tiny_sdxl_dir) == ModelFamily(64, True)
    assert read_family(tmp_path / "missing") is None


def test_unet_configs_and_the_refusal_name_both_families():
    from mixkit.testing.tiny_controlnet import tiny_controlnet

    assert family_of_config(tiny_controlnet(sdxl=True).config) == ModelFamily(64, True)
    assert family_of_config({"cross_attention_dim": 768, "addition_embed_type": None}) == ModelFamily(768, False)
    check_same_family("unit", "canny", ModelFamily(768, False), ModelFamily(768, False), "sd15")  # same: no error
    with pytest.raises(ValueError) as error:
        check_same_family("controlnet unit 1", "xl_canny", ModelFamily(2048, True), ModelFamily(768, False),
                          "v1-5-pruned.safetensors")
    assert str(error.value) == (
        "controlnet unit 1: ControlNet 'xl_canny' is made for SDXL models, but the checkpoint "
        "'v1-5-pruned.safetensors' is SD 1.x; pick a ControlNet made for SD 1.x models, or switch to a checkpoint "
        "of the SDXL family.")


def test_a_single_file_loaded_for_another_family_names_both(tmp_path, tiny_sd1_dir):
    from diffusers import UNet2DConditionModel
    from safetensors.torch import save_file

    from mixkit.testing.tiny_controlnet import tiny_controlnet
    from pipelines.controlnet import load_controlnet

    save_file(tiny_controlnet(sdxl=True).state_dict(), tmp_path / "xl.safetensors")
    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    with pytest.raises(ValueError, match=r"xl.safetensors is a ControlNet for SDXL-like \(cross-attention width 64\) "
                                         r"models, but the config \(or base_unet\) it is loaded with is SD-like"):
        load_controlnet(tmp_path / "xl.safetensors", base_unet=unet)


@pytest.mark.parametrize("zip_format", [True, False], ids=["torch-zip", "legacy"])
def test_pickled_files_of_either_format_are_read_safely(tmp_path, zip_format):
    """A `.ckpt` / `.pth` of either torch.save format (old ControlNet releases are legacy pickles), Lightning's nested
    `state_dict` too, is read onto the meta device by the safe reader; an unsafe pickle is refused, never run."""
    import torch

    from mixkit.errors import UnsafeCheckpointError
    from mixkit.testing.tiny_controlnet import tiny_controlnet

    state = tiny_controlnet(sdxl=True).state_dict()
    torch.save(state, tmp_path / "xl.pth", _use_new_zipfile_serialization=zip_format)
    torch.save({"state_dict": state, "global_step": 3}, tmp_path / "lightning.ckpt",
               _use_new_zipfile_serialization=zip_format)
    assert read_family(tmp_path / "xl.pth") == ModelFamily(64, True)
    assert read_family(tmp_path / "lightning.ckpt") == ModelFamily(64, True)
    ran = tmp_path / "created-by-the-pickle"
    torch.save({"weight": torch.zeros(1), "payload": _MakesAFolder(str(ran))}, tmp_path / "unsafe.ckpt",
               _use_new_zipfile_serialization=zip_format)
    with pytest.raises(UnsafeCheckpointError, match="os"):
        read_family(tmp_path / "unsafe.ckpt")
    assert not ran.exists()


def test_a_pickle_is_read_through_the_meta_device_shape_reader(tmp_path, monkeypatch):
    """`read_family` takes a pickle's shapes from `mixkit.io.checkpoint_shapes` (meta device, no storage kept), not
    from a CPU load of its weights."""
    import torch

    from mixkit.io import loading

    torch.save({"attn2.to_k.weight": torch.zeros(8, 16)}, tmp_path / "cn.ckpt", _use_new_zipfile_serialization=False)
    devices = []
    original = loading.load_state_dict

    def recording(path, device="cpu"):
        devices.append(str(device))
        return original(path, device)

    monkeypatch.setattr(loading, "load_state_dict", recording)
    assert read_family(tmp_path / "cn.ckpt") == ModelFamily(16, False)
    assert devices == ["meta"]  # the loader is imported at call time, so the patched one is what ran


class _MakesAFolder:
    """Unpickling this would call os.makedirs: what a weights-only read must refuse."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        import os

        return os.makedirs, (self.path,)


def test_hub_ids_are_read_from_the_hub_cache_without_any_download(tmp_path, monkeypatch, tiny_sdxl_dir):
    import json

    import huggingface_hub

    from mixkit.testing.tiny_hub_cache import write_hub_cache_entry

    for name in ("hf_hub_download", "snapshot_download"):
        monkeypatch.setattr(huggingface_hub, name, lambda *a, **k: pytest.fail("a download was started"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    unet_config = json.loads((tiny_sdxl_dir / "unet" / "config.json").read_text())
    write_hub_cache_entry(tmp_path, "org/tiny-xl", {"model_index.json": {}, "unet/config.json": unet_config})
    write_hub_cache_entry(tmp_path, "org/canny-sd15", {"config.json": {"cross_attention_dim": 768}}, revision="v1")
    assert read_family("org/tiny-xl") == ModelFamily(64, True)  # a pipeline: its unet/config.json
    assert read_family("org/tiny-xl@main") == ModelFamily(64, True)
    assert read_family("org/canny-sd15@v1") == ModelFamily(768, False)  # a ControlNet: its config.json
    assert read_family("org/canny-sd15") is None  # that revision is not cached
    assert read_family("org/not-downloaded") is None  # left to the check made when it loads
    assert read_family("not a hub id") is None


@pytest.mark.parametrize("width", [[], {"a": 1}, 1e400, "768", True, 0, -768, [None]])
def test_a_config_whose_width_is_no_positive_whole_number_is_refused_naming_the_file(tmp_path, width):
    # a hub cache or models folder config anyone can write: no IndexError/TypeError/OverflowError (a 500) from it
    import json

    (tmp_path / "config.json").write_text(json.dumps({"cross_attention_dim": width}))
    with pytest.raises(ValueError, match=r"config\.json': a config whose cross_attention_dim is .*, not a positive "
                                         r"whole number \(or a list of them\)"):
        read_family(tmp_path)


def test_a_config_that_is_not_json_is_refused_naming_the_file(tmp_path):
    (tmp_path / "config.json").write_bytes(b"\xff{not json")
    with pytest.raises(ValueError, match=r"config\.json': .*codec can't decode"):
        read_family(tmp_path)
