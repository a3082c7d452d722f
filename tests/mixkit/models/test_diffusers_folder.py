"""Broken diffusers folders are refused with mixkit errors naming the file, the key and the fix, never a raw
library traceback; a folder that only ships fp16 weights loads; NaN weights and hub snapshot names."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.errors import CheckpointFormatError, MixkitError, ModelNotFoundError, UnsafeCheckpointError
from mixkit.models.diffusion.loading import load_diffusion_model


@pytest.fixture(autouse=True)
def isolated_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "mixkit-cache"))


def broken_copy(source, tmp_path, name="model"):
    folder = tmp_path / name
    shutil.copytree(source, folder)
    return folder


def edit_json(file, **changes):
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch /nonexistent-mixkit-sentinel",))


def test_tokenizer_without_its_files_is_refused_naming_the_folder(tiny_sd1_dir, tmp_path):
    # transformers would build a 2-token tokenizer mapping every word to one id: the prompt silently ignored
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    for file in (folder / "tokenizer").iterdir():
        file.unlink()
    with pytest.raises(ModelNotFoundError, match=r"model/tokenizer has no tokenizer vocabulary.*tokenizer\.json"):
        load_diffusion_model(folder)


def test_tokenizer_json_missing_alone_is_refused(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "tokenizer" / "tokenizer.json").unlink()  # the tiny tokenizer has no vocab.json/merges.txt either
    with pytest.raises(ModelNotFoundError, match=r"tokenizer has no tokenizer vocabulary.*tokenizer_config\.json"):
        load_diffusion_model(folder)


def test_sdxl_second_tokenizer_is_checked_too(tiny_sdxl_dir, tmp_path):
    folder = broken_copy(tiny_sdxl_dir, tmp_path)
    for file in (folder / "tokenizer_2").iterdir():
        file.unlink()
    with pytest.raises(ModelNotFoundError, match=r"model/tokenizer_2 has no tokenizer vocabulary"):
        load_diffusion_model(folder)


def test_tokenizer_larger_than_the_text_encoder_vocabulary_is_refused(tiny_sd1_dir, tmp_path):
    # A config_dir tokenizer folder with only tokenizer_config.json selects the shipped 49408-token CLIP vocabulary,
    # whose ids the tiny text encoder (1000 embeddings) cannot look up.
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    path = save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), tmp_path / "tiny.safetensors")
    configs = broken_copy(tiny_sd1_dir, tmp_path, "configs")
    (configs / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(CheckpointFormatError, match=r"tokenizer has 49408 tokens but its text encoder's vocab_size is 1000"):
        load_diffusion_model(path, config_dir=configs)


def test_unet_without_weights_names_the_folder_and_the_expected_file(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "unet" / "diffusion_pytorch_model.safetensors").unlink()
    with pytest.raises(ModelNotFoundError, match=r"model/unet holds no weights: expected diffusion_pytorch_model\.safetensors"):
        load_diffusion_model(folder)


def test_folder_with_only_fp16_variant_weights_loads_them(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    for file in list(folder.rglob("*.safetensors")):
        state = load_file(str(file))
        save_file({k: v.half() for k, v in state.items()}, str(file.with_name(file.name.replace(".safetensors", ".fp16.safetensors"))))
        file.unlink()
    model = load_diffusion_model(folder)
    reference = load_diffusion_model(tiny_sd1_dir)
    assert model.unet.dtype == torch.float32  # loaded as the fp16 variant, then cast to the requested dtype
    for (name, a), b in zip(model.unet.state_dict().items(), reference.unet.state_dict().values()):
        torch.testing.assert_close(a, b.half().float(), msg=name)


def test_missing_vae_config_names_the_file(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "vae" / "config.json").unlink()
    with pytest.raises(ModelNotFoundError, match=r"model/vae/config\.json \(the VAE config\) is missing"):
        load_diffusion_model(folder)


def test_truncated_unet_weights_are_named(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    weights = folder / "unet" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointFormatError, match=r"unet/diffusion_pytorch_model\.safetensors.*truncated"):
        load_diffusion_model(folder)


def test_malicious_text_encoder_bin_is_refused_by_mixkit_naming_the_global(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "text_encoder" / "model.safetensors").unlink()
    torch.save({"x": _Payload()}, folder / "text_encoder" / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match=r"text_encoder/pytorch_model\.bin.*posix\.system") as info:
        load_diffusion_model(folder)
    assert "weights_only=False" not in str(info.value) and "Re-running" not in str(info.value)


def test_unet_config_that_does_not_fit_its_weights_names_key_and_shapes(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    edit_json(folder / "unet" / "config.json", cross_attention_dim=48)
    with pytest.raises(CheckpointFormatError) as info:
        load_diffusion_model(folder)
    message = str(info.value)
    assert "unet/config.json" in message and "attn2.to_k.weight is [32, 32] in the weights but the config needs [32, 48]" in message
    assert "Cannot load  " not in message and "low_cpu_mem_usage" not in message and "ignore_mismatched" not in message


def test_text_encoder_config_that_does_not_fit_is_refused_not_reinitialised(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    edit_json(folder / "text_encoder" / "config.json", intermediate_size=40)
    with pytest.raises(CheckpointFormatError, match=r"text_encoder/config\.json.*mlp\.fc1\.bias: file \[37\] vs config \[40\]"):
        load_diffusion_model(folder)


def test_unet_weights_missing_a_tensor_are_refused_not_reinitialised(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    weights = folder / "unet" / "diffusion_pytorch_model.safetensors"
    state = load_file(str(weights))
    del state["conv_norm_out.weight"]
    save_file(state, str(weights))
    with pytest.raises(CheckpointFormatError, match=r"1 tensors the config needs are missing.*conv_norm_out\.weight"):
        load_diffusion_model(folder)


def test_corrupt_model_index_names_the_file(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "model_index.json").write_text("{not json")
    with pytest.raises(CheckpointFormatError, match=r"model/model_index\.json \(the model index\) is not valid JSON"):
        load_diffusion_model(folder)


def test_unknown_prediction_type_is_refused_at_load(tiny_sd1_dir, tmp_path):
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    edit_json(folder / "scheduler" / "scheduler_config.json", prediction_type="sample_x")
    with pytest.raises(CheckpointFormatError, match=r"scheduler_config\.json: prediction_type 'sample_x'.*'epsilon'"):
        load_diffusion_model(folder)


@pytest.mark.parametrize("component, key", [("unet", "conv_out.weight"), ("vae", "decoder.conv_out.weight")])
def test_nan_weights_are_refused_naming_component_and_key(tiny_sd1_dir, tmp_path, component, key):
    # A1111 only notices at generation ("A tensor with all NaNs was produced in Unet"); mixkit made black images.
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    weights = folder / component / "diffusion_pytorch_model.safetensors"
    state = load_file(str(weights))
    state[key][0] = float("nan")
    save_file(state, str(weights))
    label = "UNet" if component == "unet" else "VAE"
    with pytest.raises(CheckpointFormatError, match=rf"the {label} weight '{key}' contains NaN"):
        load_diffusion_model(folder)


def test_nan_in_a_single_file_checkpoint_is_refused(tiny_sd1_dir, tmp_path):
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    path = save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), tmp_path / "tiny.safetensors")
    state = load_file(str(path))
    state["model.diffusion_model.out.2.weight"][0] = float("inf")
    save_file(state, str(path))
    with pytest.raises(CheckpointFormatError, match=r"tiny\.safetensors: the UNet weight 'conv_out\.weight' contains NaN or infinite"):
        load_diffusion_model(path, config_dir=tiny_sd1_dir)


def test_hub_id_names_the_model_by_its_repo_not_its_snapshot(tiny_sd1_dir, tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "models--tinyorg--tiny-sd"
    shutil.copytree(tiny_sd1_dir, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_diffusion_model("tinyorg/tiny-sd").name == "tiny-sd"
    assert load_diffusion_model(repo / "snapshots" / "abc123").name == "abc123"  # a local path keeps its own name


def test_every_broken_folder_error_is_a_mixkit_error(tiny_sd1_dir, tmp_path):
    """Callers (CLI, web UI) turn MixkitError into one line; nothing above may escape as a library type."""
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    (folder / "text_encoder" / "config.json").write_text("[1, 2]")
    with pytest.raises(MixkitError, match=r"text_encoder/config\.json.*must hold a JSON object, not a JSON array"):
        load_diffusion_model(folder)


def test_a_unet_of_unknown_input_channels_is_refused_at_load_naming_its_config(tiny_sd1_dir, tmp_path):
    # A 5-channel UNet (SD 2's depth-to-image: latents + depth) would load and then fail on its first convolution
    # mid-generation; nothing here feeds its extra channel.
    folder = broken_copy(tiny_sd1_dir, tmp_path)
    weights = folder / "unet" / "diffusion_pytorch_model.safetensors"
    state = load_file(weights)
    state["conv_in.weight"] = torch.cat([state["conv_in.weight"], state["conv_in.weight"][:, :1]], dim=1)
    save_file(state, weights)
    edit_json(folder / "unet" / "config.json", in_channels=5)
    with pytest.raises(CheckpointFormatError) as info:
        load_diffusion_model(folder)
    message = str(info.value)
    assert str(folder / "unet" / "config.json") in message
    assert ("takes 5 input channels (in_channels is 5); only text-to-image (4), inpainting (9) and "
            "instruct-pix2pix (8) models are supported") in message


def test_an_instruct_pix2pix_folder_loads_with_its_eight_channels(tiny_ip2p_dir):
    model = load_diffusion_model(tiny_ip2p_dir)
    assert model.unet.config.in_channels == 8
    assert model.description == "SD 1.x instruct-pix2pix"
