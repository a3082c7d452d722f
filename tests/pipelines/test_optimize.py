import sys

import numpy as np
import pytest
import torch

from mixkit.errors import UnknownNameError
from mixkit.runtime import RuntimeFallbackWarning
from pipelines.optimize import optimize
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=4, seed=7, cfg_scale=7.0)


@pytest.fixture(scope="module")
def reference_image(tiny_sd1_dir):
    """The unoptimised pipeline's image: the oracle for every preset."""
    return np.asarray(TextToImage.from_pretrained(tiny_sd1_dir)(**CALL).images[0])


def fresh(tiny_sd1_dir):
    return TextToImage.from_pretrained(tiny_sd1_dir)  # optimize() changes the model in place


def test_exact_preset_is_bit_identical(tiny_sd1_dir, reference_image):
    pipe = fresh(tiny_sd1_dir)
    report = optimize(pipe, "exact")
    assert report.applied == [] and report.fallbacks == [] and pipe.optimization is report
    np.testing.assert_array_equal(np.asarray(pipe(**CALL).images[0]), reference_image)


@pytest.mark.skipif(not __import__("mixkit.runtime.capability", fromlist=["x"]).cpu_has_native_bf16(),
                    reason="this CPU has no AVX512-BF16/AMX: the fast preset stays fp32 (tested below)")
def test_fast_preset_matches_exact_within_bf16_rounding(tiny_sd1_dir, reference_image):
    pipe = fresh(tiny_sd1_dir)
    report = optimize(pipe, "fast")
    assert report.precision == "bfloat16" and report.fallbacks == []
    assert pipe.model.unet.dtype == torch.bfloat16
    assert any("fused QKV" in step for step in report.applied)
    image = np.asarray(pipe(**CALL).images[0]).astype(float)
    difference = np.abs(image - reference_image.astype(float))
    # bf16 keeps 8 mantissa bits; over 4 steps of a random tiny UNet the image moves a few levels of 255.
    assert difference.mean() <= 2.0 and difference.max() <= 16
    assert report.nan_fallbacks == 0


def test_fast_preset_without_bf16_cpu_says_so_and_stays_fp32(tiny_sd1_dir, reference_image, monkeypatch):
    import mixkit.runtime.capability as capability

    monkeypatch.setattr(capability, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    pipe = fresh(tiny_sd1_dir)
    with pytest.warns(RuntimeFallbackWarning, match="neither AVX512-BF16 nor AMX"):
        report = optimize(pipe, "fast")
    assert report.precision == "float32" and pipe.model.unet.dtype == torch.float32
    image = np.asarray(pipe(**CALL).images[0]).astype(float)
    # fp32 with channels-last and fused QKV: only summation order changes
    assert np.abs(image - reference_image.astype(float)).max() <= 1


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(preset="fastest"), UnknownNameError, "'exact', 'fast', 'low-memory'"),
    (dict(backend="tensorrt"), UnknownNameError, "'torch', 'torch.compile', 'openvino'"),
    (dict(preset="fast", channel_last=True), ValueError, "unknown option.*channel_last"),
    (dict(preset="fast", offload="disk"), ValueError, "offload='disk'"),
    (dict(preset="fast", backend="openvino", compile=True), ValueError, "cannot honour \\['compile'\\]"),
    (dict(preset="low-memory", backend="openvino"), ValueError,
     "cannot honour \\['attention_slicing', 'vae_tiling', 'vae_slicing'\\]"),
])
def test_bad_input_changes_nothing(tiny_sd1_dir, kwargs, error, match):
    pipe = fresh(tiny_sd1_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    with pytest.raises(error, match=match):
        optimize(pipe, **kwargs)
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not hasattr(pipe, "optimization")


def test_offload_without_accelerate_is_a_clear_error(tiny_sd1_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)
    pipe = fresh(tiny_sd1_dir)
    with pytest.raises(ImportError, match="pip install accelerate"):
        optimize(pipe, "low-memory", offload="model")
    assert pipe.model.unet.dtype == torch.float32 and not hasattr(pipe, "optimization")


def test_low_memory_preset_runs(tiny_sd1_dir, reference_image):
    pipe = fresh(tiny_sd1_dir)
    report = optimize(pipe, "low-memory")
    assert report.applied == ["attention slicing", "VAE tiling", "VAE slicing"]
    image = np.asarray(pipe(**CALL).images[0]).astype(float)
    # 64 px is below the VAE tile size, so only summation order may differ
    assert np.abs(image - reference_image.astype(float)).max() <= 1


@pytest.mark.skipif(not __import__("mixkit.runtime.capability", fromlist=["x"]).cpu_has_native_bf16(),
                    reason="no AVX512-BF16/AMX: the fast preset decodes in fp32, there is no reduced-precision NaN")
def test_nan_in_reduced_precision_vae_gives_a_finite_image(tiny_sd1_dir):
    pipe = fresh(tiny_sd1_dir)
    report = optimize(pipe, "fast")
    expected = np.asarray(pipe(**CALL).images[0])

    def overflow_in_bf16(module, inputs, output):
        return torch.full_like(output, float("nan")) if output.dtype == torch.bfloat16 else output

    handle = pipe.model.vae.decoder.conv_in.register_forward_hook(overflow_in_bf16)
    with pytest.warns(RuntimeFallbackWarning, match="NaN/inf"):
        image = np.asarray(pipe(**CALL).images[0])
    handle.remove()
    assert report.nan_fallbacks == 1
    # the same latents decoded in fp32 instead of bf16: a few levels of 255 apart, never black
    assert image.std() > 1 and np.abs(image.astype(float) - expected).max() <= 8


def test_per_generation_loras_on_a_compiled_backend_are_refused_before_any_work(tiny_sd1_dir, tmp_path):
    from safetensors.torch import save_file

    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    pipe.model.extras["execution_backend"] = "openvino"  # what optimize(..., backend="openvino") records
    lora = tmp_path / "style.safetensors"
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}, lora)
    with pytest.raises(ValueError, match="cannot be applied on the openvino backend"):
        pipe(prompt="a cat", steps=1, width=64, height=64, loras=[str(lora)])
