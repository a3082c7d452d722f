"""A hub id downloads only the files mixkit loads, chosen as diffusers' `DiffusionPipeline.download` chooses them.

The oracle is diffusers itself: its `download` is run on the same repo listing with the hub calls mocked (no
network), and the files it would fetch, less the safety checker and feature extractor mixkit never loads, must be
exactly mixkit's. The end-to-end tests mock `huggingface_hub` the same way and check what `snapshot_download` is asked.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import types
import pytest

from mixkit.errors import ModelNotFoundError
from mixkit.models.diffusion.hub_files import pipeline_files, vae_files

# runwayml/stable-diffusion-v1-5 as published: single files, fp16 / non-EMA variants, .bin duplicates, flax exports.
SD15_FILES = """.gitattributes README.md feature_extractor/preprocessor_config.json model_index.json
safety_checker/config.json safety_checker/model.fp16.safetensors safety_checker/model.safetensors
safety_checker/pytorch_model.bin safety_checker/pytorch_model.fp16.bin safety_checker/flax_model.msgpack
scheduler/scheduler_config.json text_encoder/config.json text_encoder/model.fp16.safetensors
text_encoder/model.safetensors text_encoder/pytorch_model.bin text_encoder/pytorch_model.fp16.bin
text_encoder/flax_model.msgpack tokenizer/merges.txt tokenizer/special_tokens_map.json tokenizer/tokenizer_config.json
tokenizer/vocab.json unet/config.json unet/diffusion_pytorch_model.bin unet/diffusion_pytorch_model.fp16.bin
unet/diffusion_pytorch_model.fp16.safetensors unet/diffusion_pytorch_model.non_ema.bin
unet/diffusion_pytorch_model.non_ema.safetensors unet/diffusion_pytorch_model.safetensors
unet/diffusion_flax_model.msgpack v1-5-pruned-emaonly.ckpt v1-5-pruned-emaonly.safetensors v1-5-pruned.ckpt
v1-5-pruned.safetensors v1-inference.yaml vae/config.json vae/diffusion_pytorch_model.bin
vae/diffusion_pytorch_model.fp16.bin vae/diffusion_pytorch_model.fp16.safetensors
vae/diffusion_pytorch_model.safetensors vae/diffusion_flax_model.msgpack""".split()
SD15_INDEX = {
    "_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.6.0",
    "feature_extractor": ["transformers", "CLIPImageProcessor"],
    "safety_checker": ["stable_diffusion", "StableDiffusionSafetyChecker"],
    "scheduler": ["diffusers", "PNDMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
    "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
    "vae": ["diffusers", "AutoencoderKL"],
}
# stabilityai/stable-diffusion-xl-base-1.0's layout: a second text encoder, ONNX/OpenVINO exports, an older VAE.
SDXL_FILES = """model_index.json sd_xl_base_1.0.safetensors sd_xl_offset_example-lora_1.0.safetensors
scheduler/scheduler_config.json text_encoder/config.json text_encoder/model.safetensors
text_encoder/model.fp16.safetensors text_encoder/openvino_model.bin text_encoder/openvino_model.xml
text_encoder/model.onnx text_encoder_2/config.json text_encoder_2/model.safetensors
text_encoder_2/model.fp16.safetensors text_encoder_2/openvino_model.bin tokenizer/merges.txt tokenizer/vocab.json tokenizer/tokenizer_config.json
tokenizer/special_tokens_map.json tokenizer_2/merges.txt tokenizer_2/vocab.json tokenizer_2/tokenizer_config.json
tokenizer_2/special_tokens_map.json unet/config.json unet/diffusion_pytorch_model.safetensors
unet/diffusion_pytorch_model.fp16.safetensors unet/model.onnx unet/model.onnx_data unet/openvino_model.bin
unet/openvino_model.xml vae/config.json vae/diffusion_pytorch_model.safetensors
vae/diffusion_pytorch_model.fp16.safetensors vae_1_0/config.json vae_1_0/diffusion_pytorch_model.safetensors
vae_decoder/model.onnx vae_encoder/model.onnx""".split()
SDXL_INDEX = {
    "_class_name": "StableDiffusionXLPipeline", "scheduler": ["diffusers", "EulerDiscreteScheduler"],
    "text_encoder": ["transformers", "CLIPTextModel"], "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
    "tokenizer": ["transformers", "CLIPTokenizer"], "tokenizer_2": ["transformers", "CLIPTokenizer"],
    "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"],
    "force_zeros_for_empty_prompt": True,
}
NEVER_LOADED = ("safety_checker/", "feature_extractor/")


class _StopDownload(Exception):
    pass


def diffusers_download_files(monkeypatch, tmp_path, filenames, index, pipeline_class, variant=None) -> list[str]:
    """The repo files diffusers' `DiffusionPipeline.download` would fetch: its allow/ignore patterns applied."""
    import diffusers.pipelines.pipeline_utils as pipeline_utils

    index_file = tmp_path / "model_index.json"
    index_file.write_text(json.dumps(index))
    asked = {}

    def snapshot_download(*args, **kwargs):
        asked.update(kwargs)
        raise _StopDownload

    siblings = [types.SimpleNamespace(rfilename=name) for name in filenames]
    monkeypatch.setattr(pipeline_utils, "_resolve_revision", lambda name, **kwargs: kwargs.get("revision"))
    monkeypatch.setattr(pipeline_utils, "model_info", lambda name, **kwargs: types.SimpleNamespace(siblings=siblings))
    monkeypatch.setattr(pipeline_utils, "hf_hub_download", lambda *args, **kwargs: str(index_file))
    monkeypatch.setattr(pipeline_utils, "snapshot_download", snapshot_download)
    with pytest.raises(_StopDownload):
        pipeline_class.download("org/model", variant=variant)
    allow, ignore = asked["allow_patterns"], asked["ignore_patterns"] or []
    return sorted(name for name in filenames if any(fnmatch.fnmatch(name, p) for p in allow)
                  and not any(fnmatch.fnmatch(name, p) for p in ignore))


@pytest.mark.parametrize("variant", [None, "fp16"])
def test_sd15_files_are_diffusers_choice_without_the_safety_checker(monkeypatch, tmp_path, variant):
    from diffusers import StableDiffusionPipeline

    expected = [name for name in diffusers_download_files(monkeypatch, tmp_path, SD15_FILES, SD15_INDEX,
                                                          StableDiffusionPipeline, variant)
                if not name.startswith(NEVER_LOADED)]
    assert pipeline_files("org/model", SD15_FILES, SD15_INDEX, variant=variant) == expected


def test_variant_no_component_has_is_refused_before_download_as_diffusers_does(monkeypatch, tmp_path):
    from diffusers import StableDiffusionPipeline

    with pytest.raises(ValueError, match=r"variant=fp61`, but no such modeling files are available"):
        diffusers_download_files(monkeypatch, tmp_path, SD15_FILES, SD15_INDEX, StableDiffusionPipeline, "fp61")
    with pytest.raises(ValueError, match=r"variant='fp61' matches no weight files in org/model \(unet: fp16, non_ema, "
                                         r"plain; vae: fp16, plain; text_encoder: fp16, plain\); pass variant='fp16'"):
        pipeline_files("org/model", SD15_FILES, SD15_INDEX, variant="fp61")
    # One component having it is enough (the others fall back to their plain weights), as in diffusers.
    chosen = pipeline_files("org/model", SD15_FILES, SD15_INDEX, variant="non_ema")
    assert "unet/diffusion_pytorch_model.non_ema.safetensors" in chosen
    assert "vae/diffusion_pytorch_model.safetensors" in chosen


def test_sd15_plain_choice_exactly():
    """The values, so a change in diffusers' oracle cannot hide a change here: 12 small files and 3 weights."""
    assert pipeline_files("org/model", SD15_FILES, SD15_INDEX) == [
        "model_index.json", "scheduler/scheduler_config.json", "text_encoder/config.json",
        "text_encoder/model.safetensors", "tokenizer/merges.txt", "tokenizer/special_tokens_map.json",
        "tokenizer/tokenizer_config.json", "tokenizer/vocab.json", "unet/config.json",
        "unet/diffusion_pytorch_model.safetensors", "vae/config.json", "vae/diffusion_pytorch_model.safetensors",
    ]


@pytest.mark.parametrize("variant", [None, "fp16"])
def test_sdxl_files_are_diffusers_choice(monkeypatch, tmp_path, variant):
    from diffusers import StableDiffusionXLPipeline

    expected = diffusers_download_files(monkeypatch, tmp_path, SDXL_FILES, SDXL_INDEX, StableDiffusionXLPipeline, variant)
    # diffusers also fetches the weights of vae_1_0/, a folder model_index.json does not name (its weight-file
    # filter is not limited to the pipeline's folders); nothing loads them.
    expected = [name for name in expected if not name.startswith("vae_1_0/")]
    chosen = pipeline_files("org/model", SDXL_FILES, SDXL_INDEX, variant=variant)
    assert chosen == expected
    assert not any(name.endswith((".onnx", ".onnx_data", ".xml")) or "openvino" in name for name in chosen)


def test_sharded_bin_component_brings_its_index():
    """A component with only sharded .bin weights (older repos): the shards and their index, per component."""
    files = [name for name in SDXL_FILES if not name.startswith("text_encoder_2/model")] + [
        "text_encoder_2/pytorch_model-00001-of-00002.bin", "text_encoder_2/pytorch_model-00002-of-00002.bin",
        "text_encoder_2/pytorch_model.bin.index.json"]
    chosen = pipeline_files("org/model", files, SDXL_INDEX)
    assert [n for n in chosen if n.startswith("text_encoder_2/")] == [
        "text_encoder_2/config.json", "text_encoder_2/pytorch_model-00001-of-00002.bin",
        "text_encoder_2/pytorch_model-00002-of-00002.bin", "text_encoder_2/pytorch_model.bin.index.json",
    ]
    assert "unet/diffusion_pytorch_model.safetensors" in chosen  # the other components keep their safetensors
    with pytest.raises(ModelNotFoundError, match=r"org/model/text_encoder_2 has no \.safetensors weights"):
        pipeline_files("org/model", files, SDXL_INDEX, use_safetensors=True)


def test_a_component_listed_as_null_is_not_downloaded():
    index = {**SD15_INDEX, "safety_checker": [None, None], "vae": [None, None]}
    assert not any(name.startswith("vae/") for name in pipeline_files("org/model", SD15_FILES, index))


def test_repo_without_model_index_is_refused_naming_the_single_file_route():
    with pytest.raises(ModelNotFoundError, match=r"'org/ckpt' has no model_index\.json.*hf download org/ckpt"):
        pipeline_files("org/ckpt", ["README.md", "model.safetensors"], {})


def test_vae_repo_files():
    files = ["README.md", "config.json", "diffusion_pytorch_model.bin", "diffusion_pytorch_model.safetensors",
             "vae-ft-mse-840000-ema-pruned.ckpt"]
    assert vae_files("org/vae", files) == ["config.json", "diffusion_pytorch_model.safetensors"]


# -- end to end: load_diffusion_model with huggingface_hub mocked --------------------------------------------------

@pytest.fixture
def fake_hub(tiny_sd1_dir, tmp_path, monkeypatch):
    """huggingface_hub answering for one repo: the tiny model plus the extra files a real repo carries.

    `snapshot_download` copies what `allow_patterns` matches into a fresh snapshot folder, as the real one
    fetches, so a load from it also proves that the chosen files are all the loader needs.
    """
    import huggingface_hub

    repo = tmp_path / "repo"
    shutil.copytree(tiny_sd1_dir, repo)
    for extra in ("unet/diffusion_pytorch_model.fp16.safetensors", "unet/diffusion_pytorch_model.bin",
                  "v1-5-pruned.safetensors", "safety_checker/model.safetensors", "safety_checker/config.json"):
        (repo / extra).parent.mkdir(exist_ok=True)
        (repo / extra).write_bytes(b"never downloaded")
    listing = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    calls = {"snapshot": [], "listed": 0}

    def model_info(self, repo_id, *, revision=None, **kwargs):
        calls["listed"] += 1
        return types.SimpleNamespace(siblings=[types.SimpleNamespace(rfilename=name) for name in listing])

    def snapshot_download(repo_id, *, allow_patterns=None, **kwargs):
        calls["snapshot"].append({"allow_patterns": allow_patterns, **kwargs})
        snapshot = tmp_path / f"snapshot{len(calls['snapshot'])}"
        for name in listing:
            if allow_patterns is None or any(fnmatch.fnmatch(name, p) for p in allow_patterns):
                (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(repo / name, snapshot / name)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo_id, filename, **kw: str(repo / filename))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return calls


def test_hub_id_asks_snapshot_download_for_only_the_loaded_files(fake_hub, tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model("org/tiny-sd", attention="diffusers")
    assert model.name == "tiny-sd"
    (asked,) = fake_hub["snapshot"]
    assert asked["local_files_only"] is False
    assert asked["allow_patterns"] == [
        "model_index.json", "scheduler/scheduler_config.json", "text_encoder/config.json",
        "text_encoder/model.safetensors", *[f"tokenizer/{n}" for n in sorted(p.name for p in (tiny_sd1_dir / "tokenizer").iterdir())],
        "unet/config.json", "unet/diffusion_pytorch_model.safetensors", "vae/config.json",
        "vae/diffusion_pytorch_model.safetensors",
    ]


def test_local_files_only_uses_the_cache_without_listing_the_repo(fake_hub):
    from mixkit.models.diffusion.loading import load_diffusion_model

    load_diffusion_model("org/tiny-sd", local_files_only=True, attention="diffusers")
    assert fake_hub["listed"] == 0
    assert fake_hub["snapshot"][0]["local_files_only"] is True


def test_revision_keyword_is_the_hub_ids_revision(fake_hub, monkeypatch):
    import huggingface_hub

    from mixkit.models.diffusion.loading import load_diffusion_model

    seen = []
    model_info = huggingface_hub.HfApi.model_info
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info",
                        lambda self, repo_id, revision=None: seen.append(revision) or model_info(self, repo_id))
    load_diffusion_model("org/tiny-sd", revision="v1", attention="diffusers")
    assert seen == ["v1"] and fake_hub["snapshot"][0]["revision"] == "v1"
    with pytest.raises(ValueError, match=r"names revision 'v2' but revision='v1'"):
        load_diffusion_model("org/tiny-sd@v2", revision="v1")


def test_unreachable_hub_falls_back_to_the_cache(fake_hub, monkeypatch):
    """As snapshot_download (and diffusers' download) do: a cached model still loads when the listing fails."""
    import huggingface_hub

    from mixkit.models.diffusion.loading import load_diffusion_model

    def unreachable(self, repo_id, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    load_diffusion_model("org/tiny-sd", attention="diffusers")
    assert fake_hub["snapshot"][0]["local_files_only"] is True


def test_missing_repo_is_refused_before_any_download(fake_hub, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    from mixkit.models.diffusion.loading import load_diffusion_model

    def missing(self, repo_id, **kwargs):
        raise RepositoryNotFoundError("404", response=types.SimpleNamespace(headers={}, status_code=404, request=None))

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", missing)
    with pytest.raises(ModelNotFoundError, match=r"Hugging Face repo 'org/tiny-sd' was not found or needs access"):
        load_diffusion_model("org/tiny-sd")
    assert fake_hub["snapshot"] == []
