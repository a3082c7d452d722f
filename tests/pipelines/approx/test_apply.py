"""`approximate(pipe, ...)`: labels in the report and the infotext, read back; bad calls change nothing."""

import numpy as np
import pytest
import torch

from pipelines.approx import approximate, model_labels, remove_approximations
from pipelines.approx.deepcache import deepcache_state
from pipelines.approx.labels import OptimizationLabels
from pipelines.approx.taesd import installed_taesd
from pipelines.approx.tome_unet import token_merging_state
from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext, parse_optimization
from pipelines.infotext_read import read_infotext
from pipelines.optimize import optimize
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=6, seed=7, cfg_scale=7.0)


@pytest.fixture(scope="module")
def reference(tiny_sd1_dir):
    result = TextToImage.from_pretrained(tiny_sd1_dir)(**CALL)
    return np.asarray(result.images[0]), result.infotexts[0]


def test_all_three_are_labelled_in_report_infotext_and_png(tiny_sd1_dir, tiny_taesd_dir, reference, tmp_path):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = approximate(pipe, taesd=str(tiny_taesd_dir), deepcache=3, tome=0.5)
    assert report.approximate and pipe.approximation is report and len(report.applied) == 3
    assert report.warning().startswith("Output is APPROXIMATE")
    result = pipe(**CALL)
    infotext = result.infotexts[0]
    assert "VAE Decoder: TAESD, DeepCache: 3, Token merging ratio: 0.5, Version: mixkit" in infotext
    assert infotext.replace("VAE Decoder: TAESD, DeepCache: 3, Token merging ratio: 0.5, ", "") == reference[1]
    assert parse_infotext(infotext)["DeepCache"] == "3"
    saved = result.save(tmp_path)[0]
    labels = parse_optimization(read_infotext(saved))
    assert labels == OptimizationLabels(taesd=True, deepcache=3, tome=0.5) and labels.approximate
    assert not np.array_equal(np.asarray(result.images[0]), reference[0])


def test_pipelines_sharing_the_model_are_labelled_too(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    approximate(pipe, tome=0.25)
    img2img = ImageToImage.from_pipeline(pipe)
    result = img2img(prompt="x", init_images=pipe(**CALL).images, steps=4, denoising_strength=0.5, width=64, height=64, seed=1)
    assert "Token merging ratio: 0.25" in result.infotexts[0]


def test_exact_settings_install_nothing_and_match_the_reference(tiny_sd1_dir, reference):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = approximate(pipe, deepcache=1, tome=0.0)
    assert not report.approximate and report.warning() == ""
    result = pipe(**CALL)
    assert np.array_equal(np.asarray(result.images[0]), reference[0]) and result.infotexts[0] == reference[1]


def test_remove_approximations_gives_the_exact_image_back(tiny_sd1_dir, tiny_taesd_dir, reference):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    approximate(pipe, taesd=tiny_taesd_dir, deepcache=2, tome=0.5)
    remove_approximations(pipe)
    result = pipe(**CALL)
    assert np.array_equal(np.asarray(result.images[0]), reference[0]) and result.infotexts[0] == reference[1]
    assert not model_labels(pipe.model).approximate


def test_optimization_preset_is_labelled(tiny_sd1_dir, tiny_taesd_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "low-memory")
    approximate(pipe, deepcache=4)
    infotext = pipe(**CALL).infotexts[0]
    parts = ("low-memory", "attention-slicing", "vae-slicing", "page-out-idle", "fp16-weights")
    assert f'Optimization: "{", ".join(parts)}", DeepCache: 4,' in infotext
    labels = parse_optimization(infotext)
    assert labels.exact == parts and labels.deepcache == 4


def test_fast_preset_label_names_what_was_used(tiny_sd1_dir, monkeypatch):
    import mixkit.runtime.capability as capability

    monkeypatch.setattr(capability, "cpu_flags", lambda: frozenset({"avx2"}))  # no bf16: stays fp32, says so
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    with pytest.warns(UserWarning):
        optimize(pipe, "fast")
    assert 'Optimization: "fast, channels-last, fused-qkv"' in pipe(**CALL).infotexts[0]
    assert not model_labels(pipe.model).approximate


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(deepcache=0), ValueError, r"DeepCache interval must be an integer in \[1, 50\]"),
    (dict(tome=0.9), ValueError, r"ToMe ratio must be a number in \[0, 0.75\]"),
    (dict(taesd=3), TypeError, "taesd must be a folder, a hub id or 'auto'"),
    (dict(taesd="/nonexistent/taesd", deepcache=3), FileNotFoundError, "TAESD folder '/nonexistent/taesd' does not exist"),
    (dict(taesd="auto", tome=0.5), FileNotFoundError, "Could not load TAESD from hub id 'madebyollin/taesd'"),
    (dict(taesd_variant="taesd"), ValueError, "taesd_variant is given but taesd is not"),
])
def test_bad_calls_change_nothing(tiny_sd1_dir, tiny_taesd_dir, kwargs, error, match):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    approximate(pipe, tome=0.3)  # an earlier install must survive a refused call
    with pytest.raises(error, match=match):
        approximate(pipe, **kwargs)
    model = pipe.model
    assert installed_taesd(model.vae) is None and deepcache_state(model.unet) is None
    assert token_merging_state(model.unet).settings.ratio == 0.3
    assert model_labels(model) == OptimizationLabels(tome=0.3)


def test_compiled_or_replaced_unets_are_refused(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    pipe.model.unet.__dict__["_mixkit_eager_forward"] = pipe.model.unet.forward
    with pytest.raises(ValueError, match="cannot be used on a compiled UNet"):
        approximate(pipe, tome=0.5)
    pipe.model.unet = torch.nn.Identity()
    with pytest.raises(ValueError, match="DeepCache needs a diffusers UNet2DConditionModel or the openvino backend's "
                                         "UNet graph, got Identity"):
        approximate(pipe, deepcache=2)
    with pytest.raises(ValueError, match="ToMe needs the diffusers UNet; this model's UNet is Identity"):
        approximate(pipe, tome=0.5)


@pytest.mark.parametrize("params, expected", [
    ({}, OptimizationLabels()),
    ({"Optimization": "fast, bf16", "ToMe": "0.4"}, OptimizationLabels(exact=("fast", "bf16"), tome=0.4)),
    ({"VAE Decoder": "Full", "DeepCache": "1", "Token merging ratio": "0"}, OptimizationLabels()),
    ({"UNet quantization": "int8"}, OptimizationLabels(int8=True)),
    ({"UNet quantization": "none"}, OptimizationLabels()),
    ({"UNet quantization": "int8", "VAE quantization": "int8"}, OptimizationLabels(int8=True, int8_vae=True)),
    ({"Optimization": "low-memory, vae-slicing", "VAE tiling": "512"},
     OptimizationLabels(exact=("low-memory", "vae-slicing"), vae_tiling=512)),
])
def test_labels_read_back_from_infotext_values(params, expected):
    assert OptimizationLabels.from_infotext(params) == expected


@pytest.mark.parametrize("params, match", [
    ({"DeepCache": "three"}, "infotext DeepCache: 'three' is not an integer"),
    ({"Token merging ratio": "x"}, "infotext Token merging ratio: 'x' is not a number"),
    ({"VAE Decoder": "Tiny"}, "infotext VAE Decoder: 'Tiny' is not 'Full' or 'TAESD'"),
    ({"UNet quantization": "int4"}, "infotext UNet quantization: 'int4' is not 'int8'"),
    ({"VAE quantization": "fp8"}, "infotext VAE quantization: 'fp8' is not 'int8'"),
    ({"VAE tiling": "big"}, "infotext VAE tiling: 'big' is not an integer"),
])
def test_malformed_labels_are_errors(params, match):
    with pytest.raises(ValueError, match=match):
        OptimizationLabels.from_infotext(params)


def test_sdxl_merges_at_its_first_attention_level(tiny_sdxl_dir, tiny_taesdxl_dir):
    pipe = TextToImage.from_pretrained(tiny_sdxl_dir)
    report = approximate(pipe, tome=0.5, deepcache=2, taesd=tiny_taesdxl_dir)
    assert "up to 1/2 latent resolution" in report.applied[2]
    result = pipe(**{**CALL, "steps": 4})
    state = token_merging_state(pipe.model.unet)
    assert state.settings.max_downsample == 2 and state.merged_layers > 0
    assert deepcache_state(pipe.model.unet).cached_calls == 2
    assert parse_optimization(result.infotexts[0]) == OptimizationLabels(taesd=True, deepcache=2, tome=0.5)
