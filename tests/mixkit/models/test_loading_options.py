"""load_diffusion_model's options are checked before anything is read, and variant files load and hash as chosen.

A1111's "Model hash" is the first 10 hex digits of the SHA-256 of the one file it loaded
(modules/sd_models.py, CheckpointInfo.calculate_shorthash -> hashes.sha256(filename, ...)[0:10]); for a diffusers
folder the file that loads is the UNet's chosen weights file, so that is the file hashed.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.errors import ModelNotFoundError
from mixkit.io.hashing import a1111_model_hash
from mixkit.models.diffusion.loading import load_diffusion_model

pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")
MISSING = "no/such/folder/model"  # not a hub id either: a load that got this far would raise ModelNotFoundError
UNET = "unet/diffusion_pytorch_model"


@pytest.fixture(scope="module")
def variant_folder(tiny_sd1_dir, tmp_path_factory):
    """The tiny model with `.fp16` UNet and text encoder weights next to the plain ones (as hub repos ship them),
    holding half the plain values, so which file loaded is visible in the weights. The VAE has no fp16 file."""
    folder = tmp_path_factory.mktemp("variant") / "model"
    shutil.copytree(tiny_sd1_dir, folder)
    for plain in (folder / f"{UNET}.safetensors", folder / "text_encoder" / "model.safetensors"):
        state = load_file(str(plain))
        save_file({k: (v * 0.5).half() for k, v in state.items()}, str(plain.with_suffix(".fp16.safetensors")))
    return folder


@pytest.mark.parametrize("name", ["float16", "fp16", torch.float16])
def test_dtype_name_is_honoured_for_a_folder(tiny_sd1_dir, name):
    """Was: the string reached diffusers, which loaded float32 (twice the memory asked for)."""
    model = load_diffusion_model(tiny_sd1_dir, dtype=name, attention="diffusers")
    assert model.unet.dtype == model.vae.dtype == model.text_encoders[0].dtype == torch.float16


def test_bfloat16_name_for_the_unet_only(tiny_sd1_dir):
    model = load_diffusion_model(tiny_sd1_dir, unet_dtype="bf16", attention="diffusers")
    assert (model.unet.dtype, model.vae.dtype) == (torch.bfloat16, torch.float32)


@pytest.mark.parametrize("bad", [torch.int8, torch.float64, "half", 16])
def test_other_dtypes_are_refused_before_anything_is_read(bad):
    with pytest.raises(TypeError, match=r"dtype=.* is not a precision SD weights load in; pass torch\.float32"):
        load_diffusion_model(MISSING, dtype=bad)


def test_int8_on_a_folder_is_a_dtype_error_not_a_corrupt_file(tiny_sd1_dir):
    """Was: "the files are corrupt or do not belong together. Re-download the unet/ folder"."""
    with pytest.raises(TypeError, match=r"dtype=torch\.int8"):
        load_diffusion_model(tiny_sd1_dir, dtype=torch.int8)


def test_cuda_on_a_cpu_build_names_what_to_install_before_loading(monkeypatch):
    """Was: torch's bare "AssertionError: Torch not compiled with CUDA enabled" after the whole load."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ValueError, match=r"device='cuda': this PyTorch .* is a build without CUDA; install a CUDA "
                                         r"build of PyTorch .*or pass device='cpu'"):
        load_diffusion_model(MISSING, device="cuda")


def test_missing_cuda_device_index_and_unrunnable_types(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"device='cuda:3': this machine has 1 CUDA device\(s\), numbered cuda:0 to cuda:0"):
        load_diffusion_model(MISSING, device="cuda:3")
    with pytest.raises(ValueError, match=r"device='meta': mixkit runs on cpu, cuda, mps, xpu, not meta"):
        load_diffusion_model(MISSING, device="meta")
    with pytest.raises(ValueError, match=r"device='gpu' is not a device name"):
        load_diffusion_model(MISSING, device="gpu")


def test_plain_weights_load_and_are_hashed_next_to_a_variant(variant_folder):
    """Was: two *.safetensors in unet/ gave no Model hash at all, though the plain file is the one loaded."""
    model = load_diffusion_model(variant_folder, attention="diffusers")
    plain = load_file(str(variant_folder / f"{UNET}.safetensors"))
    assert all(torch.equal(model.unet.state_dict()[k], v) for k, v in plain.items())
    assert model.model_hash == a1111_model_hash(variant_folder / f"{UNET}.safetensors")


def test_variant_loads_its_files_and_hashes_the_one_loaded(variant_folder):
    model = load_diffusion_model(variant_folder, variant="fp16", attention="diffusers")
    halved = load_file(str(variant_folder / f"{UNET}.fp16.safetensors"))
    assert all(torch.equal(model.unet.state_dict()[k], v.float()) for k, v in halved.items())
    encoder = load_file(str(variant_folder / "text_encoder" / "model.fp16.safetensors"))
    assert all(torch.equal(model.text_encoders[0].state_dict()[k], v.float()) for k, v in encoder.items())
    vae = load_file(str(variant_folder / "vae" / "diffusion_pytorch_model.safetensors"))  # no fp16 file: the plain one
    assert all(torch.equal(model.vae.state_dict()[k], v) for k, v in vae.items())
    assert model.model_hash == a1111_model_hash(variant_folder / f"{UNET}.fp16.safetensors")
    assert model.model_hash != a1111_model_hash(variant_folder / f"{UNET}.safetensors")


def test_unknown_variant_and_bad_names(variant_folder, tmp_path):
    only_fp16 = tmp_path / "only"
    shutil.copytree(variant_folder, only_fp16)
    (only_fp16 / f"{UNET}.safetensors").unlink()
    vae = only_fp16 / "vae" / "diffusion_pytorch_model.safetensors"
    shutil.copy(vae, vae.with_suffix(".ema.safetensors"))  # the variant exists, only not for the UNet
    with pytest.raises(ModelNotFoundError, match=r"unet has neither variant 'ema' nor plain weights .*variant='fp16'"):
        load_diffusion_model(only_fp16, variant="ema")
    with pytest.raises(ValueError, match=r"variant='fp16.safetensors' is not a weight variant name"):
        load_diffusion_model(MISSING, variant="fp16.safetensors")


def test_variant_no_component_has_is_refused_as_diffusers_does(tiny_sd1_dir, variant_folder):
    """Was: loaded the plain float32 files silently, with their Model hash. diffusers refuses the same folder."""
    from diffusers import StableDiffusionPipeline

    with pytest.raises(ValueError, match=r"variant=fp16`, but no such modeling files are available"):
        StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, variant="fp16")
    with pytest.raises(ValueError, match=r"variant='fp16' matches no weight files in .*\(unet: plain; vae: plain; "
                                         r"text_encoder: plain\); drop variant= to load its plain weights\."):
        load_diffusion_model(tiny_sd1_dir, variant="fp16")
    with pytest.raises(ValueError, match=r"variant='fp61' matches no weight files .*unet: fp16, plain; vae: plain; "
                                         r"text_encoder: fp16, plain\); pass variant='fp16', or no variant\."):
        load_diffusion_model(variant_folder, variant="fp61")


def test_use_safetensors(tiny_sd1_dir, tmp_path):
    with pytest.raises(ValueError, match=r"use_safetensors=False is not supported"):
        load_diffusion_model(MISSING, use_safetensors=False)
    folder = tmp_path / "bin_vae"
    shutil.copytree(tiny_sd1_dir, folder)
    vae = folder / "vae" / "diffusion_pytorch_model.safetensors"
    torch.save(load_file(str(vae)), vae.with_suffix(".bin"))
    vae.unlink()
    with pytest.raises(ModelNotFoundError, match=r"vae has no \.safetensors weights .*use_safetensors=True was asked"):
        load_diffusion_model(folder, use_safetensors=True)
    assert load_diffusion_model(folder, attention="diffusers").vae is not None  # without it, the .bin loads


def test_variant_and_revision_do_not_apply_to_local_files(tiny_sd1_dir, tmp_path):
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    with pytest.raises(ValueError, match=r"revision='main' applies to Hugging Face ids"):
        load_diffusion_model(tiny_sd1_dir, revision="main")
    file = save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), tmp_path / "sd.safetensors")
    with pytest.raises(ValueError, match=r"single-file checkpoint, which loads as it is: drop them"):
        load_diffusion_model(file, variant="fp16")
