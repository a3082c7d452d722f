import numpy as np
import pytest
import torch

from mixkit.errors import UnknownNameError
from mixkit.runtime import RuntimeFallbackWarning
from pipelines.optimize import load_options_for, optimize
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


@pytest.mark.skipif(not __import__("mixkit.runtime.capability", fromlist=["x"]).cpu_has_native_bf16(),
                    reason="this CPU has no AVX512-BF16/AMX: the fast preset loads float32 (tested below)")
def test_fast_preset_loaded_in_bfloat16_equals_cast_after_loading(tiny_sd1_dir):
    assert load_options_for("fast") == {"unet_dtype": torch.bfloat16}
    assert load_options_for("fast", backend="openvino") == {} and load_options_for("exact") == {}
    cast_later = fresh(tiny_sd1_dir)
    optimize(cast_later, "fast")
    loaded = TextToImage.from_pretrained(tiny_sd1_dir, **load_options_for("fast"))
    assert loaded.model.unet.dtype == torch.bfloat16 and loaded.model.text_encoders[0].dtype == torch.float32
    report = optimize(loaded, "fast")
    assert report.applied[0] == "UNet weights in bfloat16, as loaded (CPU has AVX512-BF16/AMX)"
    np.testing.assert_array_equal(np.asarray(loaded(**CALL).images[0]), np.asarray(cast_later(**CALL).images[0]))


def test_fast_preset_without_bf16_cpu_says_so_and_stays_fp32(tiny_sd1_dir, reference_image, monkeypatch):
    import mixkit.runtime.capability as capability

    monkeypatch.setattr(capability, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert load_options_for("fast") == {}  # no bfloat16 UNet load on such a CPU either
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
     "cannot honour \\['attention_slicing', 'vae_slicing', 'weight_storage', 'page_out_idle'\\]"),
    (dict(preset="low-memory", compile=True), ValueError, "compile=True does not keep"),
])
def test_bad_input_changes_nothing(tiny_sd1_dir, kwargs, error, match):
    pipe = fresh(tiny_sd1_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    with pytest.raises(error, match=match):
        optimize(pipe, **kwargs)
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not hasattr(pipe, "optimization")


def float32_pipe_on_float16_weights(tiny_sd1_dir):
    """The exact pipeline on the weights as a float16 file holds them: the oracle of the low-memory preset."""
    pipe = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
    for module in [pipe.model.unet, pipe.model.vae, *pipe.model.text_encoders]:
        module.float()
    return pipe


def test_low_memory_preset_loads_half_and_computes_float32(tiny_sd1_dir):
    assert load_options_for("low-memory") == {"dtype": torch.float16}
    pipe = TextToImage.from_pretrained(tiny_sd1_dir, **load_options_for("low-memory"))
    report = optimize(pipe, "low-memory")
    assert report.applied[0].startswith("weights stored in float16, computed in float32 layer by layer")
    assert report.applied[1:3] == ["attention slicing", "VAE slicing"]  # no VAE tiling: it is approximate
    assert report.applied[3].startswith("idle components' memory-mapped weights paged out")
    assert pipe.model.unet.conv_in.weight.dtype == torch.float16 and pipe.model.unet.dtype == torch.float32
    result = pipe(**CALL)
    assert ('Optimization: "low-memory, attention-slicing, vae-slicing, page-out-idle, fp16-weights"'
            in result.infotexts[0])
    image = np.asarray(result.images[0]).astype(float)
    expected = np.asarray(float32_pipe_on_float16_weights(tiny_sd1_dir)(**CALL).images[0]).astype(float)
    # only summation order (slicing) may differ
    assert np.abs(image - expected).max() <= 1


def test_low_memory_preset_with_a_lora_matches_float32_and_leaves_no_trace(tiny_sd1_dir, tmp_path):
    from mixkit.testing.tiny_lora import write_attention_lora

    pipe = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16, lora_dir=tmp_path)
    write_attention_lora(pipe.model.unet, tmp_path / "shiny.safetensors", scale=0.2)
    optimize(pipe, "low-memory")
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    call = {**CALL, "prompt": "a red cube <lora:shiny:0.8>"}
    with_lora = np.asarray(pipe(**call).images[0]).astype(float)
    oracle = float32_pipe_on_float16_weights(tiny_sd1_dir)
    oracle = TextToImage(oracle.model, lora_dir=tmp_path)
    expected = np.asarray(oracle(**call).images[0]).astype(float)
    plain = np.asarray(pipe(**CALL).images[0]).astype(float)
    assert np.abs(with_lora - plain).max() > 10  # the LoRA did something
    assert np.abs(with_lora - expected).max() <= 2  # ... the same thing as in float32
    after = pipe.model.unet.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())


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
