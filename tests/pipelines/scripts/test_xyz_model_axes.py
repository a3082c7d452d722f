"""The X/Y/Z plot axes that change the loaded model (pipelines/scripts/xyz_model_axes.py): VAE and Token merging
ratio, the refusals of the A1111 axes mixkit has no feature for, and a failing cell named by its axis values."""

import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from pipelines.approx import approximate, model_labels, remove_approximations
from pipelines.approx.labels import MODEL_EXTRAS_KEY, OptimizationLabels
from pipelines.approx.tome_unet import token_merging_state
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import xyz_plot
from pipelines.scripts.xyz_axes import XYZ_AXES, PlotContext, axes_for
from pipelines.scripts.xyz_config import parse_script_args
from pipelines.scripts.xyz_model_axes import find_vae_name, vae_choices

TINY = dict(prompt="a red cat", width=64, height=64, steps=2, seed=5, sampler="Euler")
VAES = ["kl-f8.safetensors", "Other-VAE"]


@pytest.fixture(scope="module")
def own_pipe(tiny_sd1_dir):
    """A pipeline of its own: the ToMe tests change its model (and check it is put back)."""
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


def test_the_axes_keep_a1111s_labels_and_indexes():
    txt2img = [axis.label for axis in axes_for("txt2img")]
    assert txt2img.index("VAE") == 30 and txt2img.index("Token merging ratio") == 34  # A1111 1.10's x_type indexes
    assert parse_script_args([30, "Automatic"], "txt2img").x.label == "VAE"
    assert parse_script_args([34, "0, 0.5"], "txt2img").x.values == (0.0, 0.5)
    supported = [axis.label for axis in axes_for("txt2img")]
    assert "VAE" in supported and "Token merging ratio" in supported
    assert XYZ_AXES.get("VAE").cost == 0.7  # A1111's: switched less often than anything but a checkpoint


def test_vae_values_are_read_as_a1111s_find_vae():
    context = PlotContext(vae_names=VAES)
    assert vae_choices(context) == ["Automatic", "None", *VAES]
    assert [find_vae_name(context, value) for value in (" auto", "AUTOMATIC", "none", "other-vae", "KL-F8.safetensors",
                                                        "kl-f8")] == [
        "Automatic", "Automatic", "None", "Other-VAE", "kl-f8.safetensors", None]


@pytest.mark.parametrize("values, context, message", [
    ("Automatic", {}, "The VAE axis needs a way to swap the loaded model's VAE"),
    ("Automatic, kl-f8", {"switch_vae": print, "vae_names": VAES},
     "Unknown VAE 'kl-f8' on the VAE axis. Valid names: 'Automatic', 'None', 'kl-f8.safetensors', 'Other-VAE' (the "
     "VAE files and folders listed are --vae-dir's)."),
])
def test_vae_axis_is_checked_before_anything_runs(values, context, message):
    config = xyz_plot.xyz_config(("VAE", values), context=context)
    with pytest.raises(ValueError, match="^X axis: " + re.escape(message)):
        xyz_plot.check_plot(Txt2ImgParams(**TINY), config, PlotContext(**context))


def test_vae_axis_switches_per_value_and_again_after_each_checkpoint(sd1_pipe):
    switched = []

    def switch_checkpoint(name):
        switched.append(("checkpoint", name))
        return sd1_pipe

    def switch_vae(name):
        switched.append(("vae", name))
        return sd1_pipe

    context = {"checkpoint_names": ["one", "two"], "switch_checkpoint": switch_checkpoint, "vae_names": VAES,
               "switch_vae": switch_vae}
    config = xyz_plot.xyz_config(("VAE", "auto, other-vae"), ("Checkpoint name", "one, two"), ("Seed", "1, 2"),
                                 context=context)
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**{**TINY, "steps": 1}), config, **context)
    assert len(result.samples.images) == 8
    # the checkpoint outermost, then the VAE (costlier than Seed): each VAE once per checkpoint, again after a switch
    assert switched == [("checkpoint", "one"), ("vae", "Automatic"), ("vae", "Other-VAE"),
                        ("checkpoint", "two"), ("vae", "Automatic"), ("vae", "Other-VAE")]


def test_a_vae_that_fails_to_load_mid_plot_is_named_with_its_cell(sd1_pipe):
    def switch_vae(name):
        if name == "Other-VAE":
            raise FileNotFoundError(2, "No such file or directory", "/vaes/Other-VAE")
        return sd1_pipe

    context = {"vae_names": VAES, "switch_vae": switch_vae}
    config = xyz_plot.xyz_config(("VAE", "None, Other-VAE"), context=context)
    with pytest.raises(ValueError, match=r"^X/Y/Z plot stopped at cell 2 of 2 \(VAE: Other-VAE\): the VAE axis could "
                                         r"not load 'Other-VAE' \(.*No such file or directory.*\); was it removed"):
        xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config, **context)


def test_token_merging_ratio_axis_merges_per_cell_and_puts_the_models_tome_back(own_pipe):
    plain = own_pipe(Txt2ImgParams(**TINY))
    approximate(own_pipe, tome=0.25)  # the model's own ToMe (a preset's), which the plot must leave as it was
    try:
        config = xyz_plot.xyz_config(("Token merging ratio", "0, 0.5, 0.25"), include_lone_images=True)
        result = xyz_plot.run(own_pipe, Txt2ImgParams(**TINY), config)
        off, half, quarter = result.images[1:]
        texts = [parse_infotext(text) for text in result.infotexts[1:]]
        assert [text.get("Token merging ratio") for text in texts] == [None, "0.5", "0.25"]
        assert np.array_equal(np.asarray(off), np.asarray(plain.images[0]))  # 0 is off: the exact image
        assert result.infotexts[1] == plain.infotexts[0]
        assert not np.array_equal(np.asarray(half), np.asarray(off))
        assert token_merging_state(own_pipe.model.unet).settings.ratio == 0.25
        assert model_labels(own_pipe.model) == OptimizationLabels(tome=0.25)
        again = own_pipe(Txt2ImgParams(**TINY))
        assert np.array_equal(np.asarray(again.images[0]), np.asarray(quarter))  # the model's 0.25, as the cell's
    finally:
        remove_approximations(own_pipe)
    assert token_merging_state(own_pipe.model.unet) is None


def test_token_merging_ratio_axis_runs_with_hires_fix_and_labels_its_images(own_pipe):
    from pipelines.hires import HiresFix, HiresParams

    params = HiresParams(**TINY, hr_scale=1.5, hr_upscaler="Latent")
    config = xyz_plot.xyz_config(("Token merging ratio", "0, 0.5"), include_lone_images=True)
    result = xyz_plot.run(HiresFix(own_pipe), params, config)
    texts = [parse_infotext(text) for text in result.infotexts[1:]]
    assert [(text.get("Token merging ratio"), text["Hires upscale"]) for text in texts] == [(None, "1.5"),
                                                                                             ("0.5", "1.5")]
    assert result.images[1].size == (96, 96) and result.images[1].tobytes() != result.images[2].tobytes()
    assert token_merging_state(own_pipe.model.unet) is None and model_labels(own_pipe.model) == OptimizationLabels()


def test_token_merging_ratio_high_res_axis_merges_each_cells_hires_pass_only(own_pipe):
    from pipelines.hires import HiresFix, HiresParams

    params = HiresParams(**TINY, hr_scale=1.5, hr_upscaler="Latent")
    config = xyz_plot.xyz_config(("Token merging ratio high-res", "0, 0.5"), include_lone_images=True)
    result = xyz_plot.run(HiresFix(own_pipe), params, config)
    texts = [parse_infotext(text, defaults=False) for text in result.infotexts[1:]]
    assert [(text.get("Token merging ratio"), text.get("Token merging ratio hr")) for text in texts] == [
        (None, None), (None, "0.5")]
    assert result.images[1].tobytes() != result.images[2].tobytes()
    by_hand = HiresFix(own_pipe)(params, token_merging_ratio_hr=0.5)
    assert result.images[2].tobytes() == by_hand.images[0].tobytes()
    assert token_merging_state(own_pipe.model.unet) is None and model_labels(own_pipe.model) == OptimizationLabels()
    with pytest.raises(ValueError, match=r"X axis: Token merging ratio high-res 0\.8: ToMe ratio must be a number in"):
        xyz_plot.check_plot(params, xyz_plot.xyz_config(("Token merging ratio high-res", "0.25, 0.8")), PlotContext())
    with pytest.raises(ValueError, match="X axis 'Token merging ratio high-res' needs hires fix"):
        xyz_plot.check_plot(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Token merging ratio high-res", "0.5")),
                            PlotContext())


def test_a_failing_cell_stops_the_plot_names_its_values_and_still_puts_tome_back(own_pipe):
    calls = []

    class FailsOnSecondCell:
        """`own_pipe`, whose second generation fails as an out-of-memory error would."""

        model, session = own_pipe.model, own_pipe.session

        def check_inputs(self, params):
            return own_pipe.check_inputs(params)

        def __call__(self, params, **hooks):
            calls.append(token_merging_state(own_pipe.model.unet).settings.ratio)
            if len(calls) == 2:
                raise RuntimeError("not enough memory: you tried to allocate 9 GB")
            return own_pipe(params, **hooks)

    config = xyz_plot.xyz_config(("Token merging ratio", "0.5, 0.75"), ("Steps", "1"))
    with pytest.raises(RuntimeError, match=r"^X/Y/Z plot stopped at cell 2 of 2 \(Token merging ratio: 0\.75, "
                                           r"Steps: 1\): not enough memory: you tried to allocate 9 GB$"):
        xyz_plot.run(FailsOnSecondCell(), Txt2ImgParams(**TINY), config)
    assert calls == [0.5, 0.75]
    assert token_merging_state(own_pipe.model.unet) is None and model_labels(own_pipe.model) == OptimizationLabels()


@pytest.mark.parametrize("values, message", [
    ("0, 0.9", r"Token merging ratio 0\.9: ToMe ratio must be a number in \[0, 0\.75\]"),
    ("-0.5", r"Token merging ratio -0\.5: ToMe ratio must be a number in \[0, 0\.75\]"),
])
def test_token_merging_ratios_out_of_range_are_refused_before_anything_runs(own_pipe, values, message):
    calls = []
    with pytest.raises(ValueError, match="^X axis: " + message):
        xyz_plot.run(own_pipe, Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Token merging ratio", values)),
                     callback=calls.append)
    assert calls == []


def test_token_merging_on_an_int8_model_is_refused_before_anything_runs(own_pipe):
    labels = model_labels(own_pipe.model)
    own_pipe.model.extras[MODEL_EXTRAS_KEY] = replace(labels, int8=True)  # as an int8 preset labels it
    try:
        with pytest.raises(ValueError, match=r"^X axis: Token merging ratio 0\.25, 0\.5: ToMe changes the UNet's "
                                             "attention, which this model's int8 graph has fixed"):
            xyz_plot.run(own_pipe, Txt2ImgParams(**TINY),
                         xyz_plot.xyz_config(("Token merging ratio", "0, 0.25, 0.5")))
        assert token_merging_state(own_pipe.model.unet) is None
    finally:
        own_pipe.model.extras[MODEL_EXTRAS_KEY] = labels


def test_token_merging_is_refused_while_validating_when_the_caller_knows_the_unet_is_fixed():
    """The CLI knows --int8 before the model loads: the plot is refused then, naming the merging ratios."""
    context = PlotContext(fixed_unet="--int8 compiles the UNet into a fixed int8 graph")
    config = xyz_plot.xyz_config(("Steps", "1, 2"), ("Token merging ratio", "0, 0.3, 0.5"))
    with pytest.raises(ValueError) as caught:
        xyz_plot.check_plot(Txt2ImgParams(**TINY), config, context)
    assert str(caught.value) == ("Y axis: Token merging ratio 0.3, 0.5: ToMe changes the UNet's attention, but --int8 "
                                 "compiles the UNet into a fixed int8 graph; plot only 0, or leave that out.")
    only_off = xyz_plot.xyz_config(("Token merging ratio", "0"))
    assert len(xyz_plot.check_plot(Txt2ImgParams(**TINY), only_off, context)) == 1  # 0 is "off": any UNet takes it


def _weights(model) -> dict:
    """The UNet's and text encoders' tensors (storage, dtype, values): what FP8 mode must leave as it found them."""
    modules = {"unet": model.unet, **{f"text_encoder_{i}": encoder for i, encoder in enumerate(model.text_encoders)}}
    return {(part, name): (param.data_ptr(), param.dtype, param.detach().clone())
            for part, module in modules.items() for name, param in module.named_parameters()}


def _same(before: dict, after: dict) -> bool:
    return before.keys() == after.keys() and all(
        before[key][:2] == after[key][:2] and torch.equal(before[key][2], after[key][2]) for key in before)


def test_fp8_mode_rounds_the_weights_per_cell_and_puts_the_models_own_back(own_pipe):
    """A1111's modes: Enable stores FP8 (other pixels), "Enable for SDXL" leaves an SD 1.x model as it is, Disable is
    the exact image; values in any case. The model's own weights are back, bit for bit, between cells and after."""
    plain = own_pipe(Txt2ImgParams(**TINY))
    before = _weights(own_pipe.model)
    config = xyz_plot.xyz_config(("FP8 mode", "Disable, enable, Enable for SDXL"), include_lone_images=True)
    assert config.x.labels() == ["FP8 mode: Disable", "FP8 mode: enable", "FP8 mode: Enable for SDXL"]
    result = xyz_plot.run(own_pipe, Txt2ImgParams(**TINY), config)
    off, fp8, sdxl_only = (np.asarray(image) for image in result.images[1:])
    assert np.array_equal(off, np.asarray(plain.images[0])) and result.infotexts[1] == plain.infotexts[0]
    assert not np.array_equal(fp8, off)
    assert np.array_equal(sdxl_only, off)  # after the FP8 cell: the model's own weights again
    texts = [parse_infotext(text) for text in result.infotexts[1:]]
    # A1111's key, written while FP8 is on (the reader fills in its "Disable" default where it is not written)
    assert [text["FP8 weight"] for text in texts] == ["Disable", "Enable", "Disable"]
    assert "FP8 weight: Enable, Cache FP16 weight for LoRA: False, " in result.infotexts[2]
    assert texts[1]["Cache FP16 weight for LoRA"] in (False, "False") and result.infotexts[3] == plain.infotexts[0]
    assert "fp8_weight" not in own_pipe.model.extras
    assert _same(before, _weights(own_pipe.model))
    assert np.array_equal(np.asarray(own_pipe(Txt2ImgParams(**TINY)).images[0]), off)


def test_fp8_mode_enable_for_sdxl_stores_fp8_on_an_sdxl_model(sdxl_pipe):
    params = Txt2ImgParams(**TINY)
    before = _weights(sdxl_pipe.model)
    result = xyz_plot.run(sdxl_pipe, params, xyz_plot.xyz_config(("FP8 mode", "Disable, Enable for SDXL, Enable"),
                                                                 include_lone_images=True))
    off, sdxl, enable = (np.asarray(image) for image in result.images[1:])
    assert not np.array_equal(sdxl, off) and np.array_equal(sdxl, enable)
    assert [parse_infotext(text)["FP8 weight"] for text in result.infotexts[1:]] == ["Disable", "Enable for SDXL",
                                                                                     "Enable"]
    assert _same(before, _weights(sdxl_pipe.model))


@pytest.mark.parametrize("values, context, message", [
    ("Disable, On", {}, "X axis: FP8 mode 'On' is not one of 'Disable', 'Enable for SDXL', 'Enable'."),
    ("Disable, Enable, Enable for SDXL", {"fixed_unet": "--int8 compiles the UNet into a fixed int8 graph"},
     "X axis: FP8 mode Enable, Enable for SDXL: FP8 storage changes the UNet's layers, but --int8 compiles the UNet "
     "into a fixed int8 graph; plot only Disable, or leave that out."),
])
def test_fp8_mode_values_are_checked_while_validating(values, context, message):
    with pytest.raises(ValueError) as caught:
        xyz_plot.check_plot(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("FP8 mode", values)), PlotContext(**context))
    assert str(caught.value) == message


def test_fp8_mode_on_an_int8_model_is_refused_before_anything_runs(own_pipe):
    labels = model_labels(own_pipe.model)
    own_pipe.model.extras[MODEL_EXTRAS_KEY] = replace(labels, int8=True)
    calls = []
    try:
        with pytest.raises(ValueError) as caught:
            xyz_plot.run(own_pipe, Txt2ImgParams(**TINY),
                         xyz_plot.xyz_config(("Seed", "1"), ("FP8 mode", "Disable, Enable")), callback=calls.append)
        # "Disable" changes nothing, so an int8 model may plot it alone
        only_off = xyz_plot.run(own_pipe, Txt2ImgParams(**TINY), xyz_plot.xyz_config(("FP8 mode", "Disable")))
        assert len(only_off.images) == 1
    finally:
        own_pipe.model.extras[MODEL_EXTRAS_KEY] = labels
    assert str(caught.value) == ("Y axis: FP8 mode Enable: this model's UNet is an int8 graph, whose weights are not "
                                 "floats to store as FP8; plot only Disable, or load the model without that.")
    assert calls == []


def test_a_cell_the_pipeline_refuses_is_named_before_anything_runs(sd1_pipe):
    calls = []
    config = xyz_plot.xyz_config(("Steps", "1, 5000"), ("CFG Scale", "5"))
    with pytest.raises(ValueError, match=r"^X/Y/Z plot, cell Steps: 5000, CFG Scale: 5\.0: steps must be in"):
        xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config, callback=calls.append)
    assert calls == []


@pytest.mark.parametrize("raised, kind, text", [
    (RuntimeError("out of memory"), RuntimeError, "out of memory"),
    (FileNotFoundError(2, "No such file or directory", "lora.safetensors"), FileNotFoundError,
     "[Errno 2] No such file or directory: 'lora.safetensors'"),
    (KeyError("Unknown LoRA 'x'"), KeyError, "Unknown LoRA 'x'"),  # its message, not KeyError's quoted repr
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), ValueError,  # takes no message: a ValueError
     "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
])
def test_a_cell_failure_keeps_its_kind_with_the_cell_in_front(sd1_pipe, raised, kind, text):
    class Fails:
        model = sd1_pipe.model

        def check_inputs(self, params):
            return sd1_pipe.check_inputs(params)

        def __call__(self, params, **hooks):
            raise raised

    with pytest.raises(kind) as caught:
        xyz_plot.run(Fails(), Txt2ImgParams(**TINY), xyz_plot.xyz_config(("CFG Scale", "6.5")))
    message = caught.value.args[0] if isinstance(caught.value, KeyError) else str(caught.value)
    assert message == f"X/Y/Z plot stopped at cell 1 of 1 (CFG Scale: 6.5): {text}"
    assert caught.value.__cause__ is raised
