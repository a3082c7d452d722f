"""kohya <-> diffusers conversion; diffusers' own loader is the oracle for the diffusers output."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from mixkit.lora import LoraRequest, apply_loras, load_lora
from mixkit.lora.convert import convert_lora
from mixkit.lora.model_index import ModelIndex
from tests.mixkit.lora.conftest import make_peer_lora, merged_change, relative_error, unet_inputs


def test_kohya_to_diffusers_keeps_per_module_alphas_and_loads_in_diffusers(tmp_path, sd1, tiny_sd1_dir):
    from diffusers import StableDiffusionPipeline

    peer = make_peer_lora(tmp_path, sd1, "lora", seed=41, per_module_alpha=True)
    out = convert_lora(peer.path, "diffusers", tmp_path / "out" / "converted.safetensors", ModelIndex(sd1.unet, sd1.text_encoders))
    with safe_open(str(out), "pt") as handle:
        keys = list(handle.keys())
        adapter = json.loads(handle.metadata()["lora_adapter_metadata"])
    assert all(k.startswith(("unet.", "text_encoder.")) and k.endswith((".lora_A.weight", ".lora_B.weight")) for k in keys)
    assert adapter["unet.alpha_pattern"], "per-module alphas must survive"
    original, converted = merged_change(sd1, peer.path), merged_change(sd1, out)
    for key in original:
        assert torch.allclose(original[key], converted[key], atol=1e-6), key
    # Oracle: diffusers loads the converted file into a pipeline; its UNet must equal ours with the original file.
    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None)
    pipe.load_lora_weights(str(out))
    sample, timestep, context, _ = unet_inputs(sd1.unet)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(peer.path)], mode="runtime")
    with torch.no_grad():
        ours = sd1.unet(sample, timestep, context).sample
        theirs = pipe.unet(sample, timestep, context).sample
    handle.remove()
    assert relative_error(ours, theirs) < 1e-5


def test_diffusers_to_kohya_round_trip(tmp_path, sd1):
    peer = make_peer_lora(tmp_path, sd1, "lora", seed=42, per_module_alpha=True)
    index = ModelIndex(sd1.unet, sd1.text_encoders)
    as_diffusers = convert_lora(peer.path, "diffusers", tmp_path / "d.safetensors", index)
    as_kohya = convert_lora(as_diffusers, "kohya", tmp_path / "k.safetensors")
    lora = load_lora(as_kohya)
    assert lora.format.name == "kohya"
    assert any(m.name.startswith("text_model_encoder_") for m in lora.modules if m.component == "te1")
    original, round_trip = merged_change(sd1, peer.path), merged_change(sd1, as_kohya)
    for key in original:
        assert torch.allclose(original[key], round_trip[key], atol=1e-6), key


def test_bundled_embeddings_travel_with_the_conversion_and_the_file_is_readable(tmp_path, sd1):
    from safetensors.torch import load_file, save_file

    peer = make_peer_lora(tmp_path, sd1, "lora", seed=45, include_te=False)
    vectors = torch.randn(2, 32)
    save_file({**load_file(str(peer.path)), "bundle_emb.heart.string_to_param.*": vectors}, str(tmp_path / "b.safetensors"))
    out = convert_lora(tmp_path / "b.safetensors", "diffusers", tmp_path / "d.safetensors",
                       ModelIndex(sd1.unet, sd1.text_encoders))
    assert torch.equal(load_lora(out).embeddings["heart"].vectors[""], vectors)
    assert out.stat().st_mode & 0o777 == 0o644  # not the 0600 of a bare temporary file


def test_lycoris_families_refuse_diffusers_output(tmp_path, sd1):
    peer = make_peer_lora(tmp_path, sd1, "loha", seed=43, include_te=False)
    target = tmp_path / "x.safetensors"
    with pytest.raises(ValueError, match="not plain LoRA.*lora_unet_"):
        convert_lora(peer.path, "diffusers", target, ModelIndex(sd1.unet, sd1.text_encoders))
    assert not target.exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_kohya_to_diffusers_needs_the_model(tmp_path, sd1):
    peer = make_peer_lora(tmp_path, sd1, "lora", seed=44, include_te=False)
    with pytest.raises(ValueError, match="--model"):
        convert_lora(peer.path, "diffusers", tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="Unknown LoRA output format"):
        convert_lora(peer.path, "comfy", tmp_path / "x.safetensors")


def _text_encoder_prefixes(path):
    with safe_open(str(path), "pt") as handle:
        return {k.split("_text_model_")[0] for k in handle.keys() if k.startswith("lora_te")}


def test_sd1_text_encoder_keys_use_kohyas_lora_te_prefix(tmp_path, sd1):
    """kohya's sd-scripts name SD 1.x text-encoder modules `lora_te_...` and skip `lora_te1_...`."""
    peer = make_peer_lora(tmp_path, sd1, "lora", seed=46)
    index = ModelIndex(sd1.unet, sd1.text_encoders)
    as_diffusers = convert_lora(peer.path, "diffusers", tmp_path / "d.safetensors", index)
    without_model = convert_lora(as_diffusers, "kohya", tmp_path / "k.safetensors")
    with_model = convert_lora(as_diffusers, "kohya", tmp_path / "k2.safetensors", index)
    assert _text_encoder_prefixes(without_model) == _text_encoder_prefixes(with_model) == {"lora_te"}
    original, round_trip = merged_change(sd1, peer.path), merged_change(sd1, without_model)
    assert all(torch.equal(original[k], round_trip[k]) for k in original)


def test_sdxl_text_encoder_keys_keep_te1_and_te2(tmp_path, sdxl):
    peer = make_peer_lora(tmp_path, sdxl, "lora", seed=47)
    index = ModelIndex(sdxl.unet, sdxl.text_encoders)
    as_diffusers = convert_lora(peer.path, "diffusers", tmp_path / "d.safetensors", index)
    back = convert_lora(as_diffusers, "kohya", tmp_path / "k.safetensors", index)
    assert _text_encoder_prefixes(back) == {"lora_te1", "lora_te2"}
