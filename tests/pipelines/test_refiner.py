"""A1111's Refiner (pipelines/refiner.py): which UNet predicts which call, what conditioning it gets, the infotext,
and the refusals. Tiny SDXL base + tiny SDXL refiner share a latent space, as the real pair does."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipelines.refiner import NEGATIVE_AESTHETIC_SCORE, POSITIVE_AESTHETIC_SCORE, switch_index
from .unet_spy import recorded_calls, replaced_forward, run_base_and_refiner

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler")


@pytest.fixture
def base_pipe(tiny_sdxl_dir):
    """A fresh pipeline per test: the refiner slot lives in its session."""
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


def _pixels(result) -> np.ndarray:
    return np.asarray(result.images[0], dtype=np.int16)


def test_switch_index_is_a1111s_noise_level_ratio():
    from diffusers import EulerDiscreteScheduler

    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, timestep_spacing="leading")
    scheduler.set_timesteps(20)
    # leading spacing: 951, 901, ..., 1; A1111's ratio (999 - t) / 1000 first reaches 0.8 at t = 151 (0.848; 201
    # gives 0.798), the 17th call, so the base model runs 16 steps and the refiner 4
    assert switch_index(scheduler.alphas_cumprod, scheduler.timesteps, 0.8) == 16
    assert float(scheduler.timesteps[16]) == 151
    assert switch_index(scheduler.alphas_cumprod, scheduler.timesteps, 0.5) == 10  # t = 451: 0.548; 501: 0.498
    # the last call is at t = 1, ratio 0.998: a switch above that is never reached
    assert switch_index(scheduler.alphas_cumprod, scheduler.timesteps, 0.998) == 19
    assert switch_index(scheduler.alphas_cumprod, scheduler.timesteps, 0.999) is None
    assert switch_index(scheduler.alphas_cumprod, scheduler.timesteps[:0], 0.5) is None


def test_switch_index_maps_fractional_timesteps_through_their_sigma():
    from diffusers import EulerDiscreteScheduler

    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, use_karras_sigmas=True)
    scheduler.set_timesteps(10)
    at = switch_index(scheduler.alphas_cumprod, scheduler.timesteps, 0.8)
    alphas = scheduler.alphas_cumprod.double()
    train_sigmas = ((1 - alphas) / alphas).sqrt()
    ratios = [(999 - int(torch.argmin((train_sigmas - float(s)).abs()))) / 1000 for s in scheduler.sigmas[:-1]]
    assert at == next(i for i, ratio in enumerate(ratios) if ratio >= 0.8)
    assert all(ratio < 0.8 for ratio in ratios[:at])


def test_base_unet_before_the_switch_refiner_unet_after(base_pipe, refiner_model):
    result, log = run_base_and_refiner(base_pipe, refiner_model, **SMALL, steps=10, refiner_switch_at=0.8)
    # A1111's Euler, 10 steps: t = 999, 888, ..., 111, 0; (999 - t) / 1000 >= 0.8 from t = 111 (the 9th call)
    assert [name for name, *_ in log] == ["base"] * 8 + ["refiner"] * 2
    assert [t for _, t, *_ in log] == pytest.approx([999, 888, 777, 666, 555, 444, 333, 222, 111, 0], abs=1e-3)
    # the refiner's own text encoder (OpenCLIP-style, 32 wide) conditions its calls; the base's two make 64
    assert {width for name, _, width, _ in log if name == "refiner"} == {32}
    assert {width for name, _, width, _ in log if name == "base"} == {64}
    plain = base_pipe(**SMALL, steps=10)
    assert np.abs(_pixels(result) - _pixels(plain)).max() > 0


def test_refiner_time_ids_carry_the_aesthetic_score_per_row(base_pipe, refiner_model):
    log = []
    with recorded_calls(refiner_model.unet, "refiner", log):
        base_pipe(**{**SMALL, "height": 48}, steps=4, refiner=refiner_model, refiner_switch_at=0.6)
    assert log
    for _, _, _, time_ids in log:
        # rows: the prompt's, then the negative prompt's (mixkit's CFG layout); (height, width, crop, score)
        assert time_ids.tolist() == [[48, 64, 0, 0, POSITIVE_AESTHETIC_SCORE], [48, 64, 0, 0, NEGATIVE_AESTHETIC_SCORE]]


def test_refiner_conditioning_is_the_refiners_encoding(base_pipe, refiner_model):
    from pipelines.generation import ModelSession

    seen = []
    original = refiner_model.unet.forward

    def spy(sample, timestep, encoder_hidden_states=None, **kwargs):
        seen.append(encoder_hidden_states.detach().clone())
        return original(sample, timestep, encoder_hidden_states=encoder_hidden_states, **kwargs)

    with replaced_forward(refiner_model.unet, spy):
        base_pipe(**SMALL, steps=4, refiner=refiner_model, refiner_switch_at=0.6)
    encoder = ModelSession(refiner_model).encoder(1)
    expected = torch.stack([encoder.encode("a red fox").hidden, encoder.encode("blurry").hidden])
    assert torch.allclose(seen[0], expected)


def test_switch_near_one_is_no_refiner_and_loads_none(base_pipe, tiny_sdxl_refiner_dir):
    plain = base_pipe(**SMALL, steps=4)
    # the last call of every schedule is at t = 0 (A1111's ratio 0.999): a switch above that is never reached
    result = base_pipe(**SMALL, steps=4, refiner=str(tiny_sdxl_refiner_dir), refiner_switch_at=0.9995)
    assert np.array_equal(_pixels(result), _pixels(plain))
    assert result.infotexts == plain.infotexts
    assert "Refiner" not in result.infotexts[0]
    assert base_pipe.session.refiner_slot._session is None  # never loaded, as A1111 loads it at the switch


def test_the_base_model_as_its_own_refiner_changes_nothing(base_pipe, tiny_sdxl_dir):
    plain = base_pipe(**SMALL, steps=4)
    for same in (str(tiny_sdxl_dir), base_pipe.model, base_pipe):
        result = base_pipe(**SMALL, steps=4, refiner=same, refiner_switch_at=0.6)
        assert np.array_equal(_pixels(result), _pixels(plain)) and result.infotexts == plain.infotexts
    assert base_pipe.session.refiner_slot._session is None


def test_infotext_names_the_refiner_as_a1111(base_pipe, tiny_sdxl_refiner_dir):
    from pipelines.infotext import parse_infotext

    result = base_pipe(**SMALL, steps=4, refiner=str(tiny_sdxl_refiner_dir), refiner_switch_at=0.7)
    values = parse_infotext(result.infotexts[0])
    refiner = base_pipe.session.refiner_slot._session.model
    assert refiner.model_hash and len(refiner.model_hash) == 10
    assert values["Refiner"] == f"{tiny_sdxl_refiner_dir.name} [{refiner.model_hash}]"
    assert values["Refiner switch at"] == "0.7"


def test_refiner_by_path_is_loaded_once_and_matches_a_loaded_model(base_pipe, tiny_sdxl_refiner_dir, refiner_model):
    by_path = base_pipe(**SMALL, steps=4, refiner=str(tiny_sdxl_refiner_dir), refiner_switch_at=0.6)
    session = base_pipe.session.refiner_slot._session
    again = base_pipe(**SMALL, steps=4, refiner=str(tiny_sdxl_refiner_dir), refiner_switch_at=0.6)
    assert base_pipe.session.refiner_slot._session is session
    by_object = base_pipe(**SMALL, steps=4, refiner=refiner_model, refiner_switch_at=0.6)
    assert np.array_equal(_pixels(by_path), _pixels(again))
    assert np.array_equal(_pixels(by_path), _pixels(by_object))


def test_batches_each_start_on_the_base_model(base_pipe, refiner_model):
    result, log = run_base_and_refiner(base_pipe, refiner_model, **SMALL, steps=4, batch_count=2,
                                       refiner_switch_at=0.6)
    # A1111's Euler, 4 steps: t = 999, 666, 333, 0; ratio >= 0.6 from t = 333
    assert [name for name, *_ in log] == ["base", "base", "refiner", "refiner"] * 2
    assert all("Refiner switch at: 0.6" in text for text in result.infotexts)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.2, math.nan, math.inf, True, "0.8"])
def test_switch_at_outside_the_open_interval_is_refused(base_pipe, refiner_model, value):
    with pytest.raises(ValueError, match=r"refiner_switch_at must be a number strictly between 0 and 1"):
        base_pipe(**SMALL, steps=4, refiner=refiner_model, refiner_switch_at=value)


def test_refiner_of_another_type_or_empty_is_refused(base_pipe):
    with pytest.raises(TypeError, match="refiner must be None, a model path"):
        base_pipe(**SMALL, steps=4, refiner=42)
    with pytest.raises(ValueError, match="refiner is an empty string"):
        base_pipe(**SMALL, steps=4, refiner="")


def test_refiner_load_failure_leaves_the_base_model_untouched(base_pipe, tmp_path):
    from mixkit.errors import ModelNotFoundError

    before = base_pipe(**SMALL, steps=4)
    unet = base_pipe.model.unet
    with pytest.raises(ModelNotFoundError):
        base_pipe(**SMALL, steps=4, refiner=str(tmp_path / "missing_refiner.safetensors"), refiner_switch_at=0.6)
    assert base_pipe.model.unet is unet and unet.device.type == "cpu"
    assert base_pipe.session.refiner_slot._session is None
    after = base_pipe(**SMALL, steps=4)
    assert np.array_equal(_pixels(before), _pixels(after))


def test_refiner_with_other_latent_channels_is_refused(base_pipe, refiner_model):
    import dataclasses

    from diffusers import AutoencoderKL

    eight = AutoencoderKL(block_out_channels=[8], latent_channels=8, norm_num_groups=4,
                          down_block_types=["DownEncoderBlock2D"], up_block_types=["UpDecoderBlock2D"])
    other = dataclasses.replace(refiner_model, vae=eight)
    with pytest.raises(ValueError, match=r"works on 8-channel latents but the model .* makes 4-channel ones"):
        base_pipe(**SMALL, steps=4, refiner=other, refiner_switch_at=0.6)
    assert base_pipe.session.refiner_slot._session is None


def test_an_inpainting_unet_as_refiner_is_refused_before_sampling(base_pipe, refiner_model):
    import dataclasses

    from diffusers import UNet2DConditionModel

    inpainting = UNet2DConditionModel.from_config({**refiner_model.unet.config, "in_channels": 9})
    other = dataclasses.replace(refiner_model, unet=inpainting)
    log = []
    with recorded_calls(base_pipe.model.unet, "base", log), pytest.raises(
            ValueError, match=r"has a 9-channel UNet \(an inpainting or instruct-pix2pix model\).*pick a text-to-image "
                              r"checkpoint as the refiner"):
        base_pipe(**SMALL, steps=4, refiner=other, refiner_switch_at=0.6)
    assert log == [] and base_pipe.session.refiner_slot._session is None


def test_a_refiner_of_another_prediction_type_is_refused(tiny_sd2v_dir, tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(tiny_sd2v_dir)
    with pytest.raises(ValueError, match=r"predicts epsilon but the model .* predicts v_prediction; pick a refiner"):
        pipe(**SMALL, steps=4, refiner=load_diffusion_model(tiny_sd1_dir), refiner_switch_at=0.6)


def test_an_sd1_refiner_finishes_an_sdxl_image(base_pipe, tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    sd1 = load_diffusion_model(tiny_sd1_dir)
    log = []
    with recorded_calls(sd1.unet, "sd1", log):
        result = base_pipe(**SMALL, steps=4, refiner=sd1, refiner_switch_at=0.6)
    assert [(name, round(t), width, time_ids) for name, t, width, time_ids in log] == [("sd1", 333, 32, None),
                                                                                        ("sd1", 0, 32, None)]
    assert "Refiner: " in result.infotexts[0]


def test_img2img_refines_the_tail_it_runs(tiny_sdxl_dir, refiner_model):
    from PIL import Image

    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(tiny_sdxl_dir)
    init = Image.new("RGB", (64, 64), (200, 80, 40))
    _, log = run_base_and_refiner(pipe, refiner_model, **SMALL, steps=10, init_images=[init],
                                  denoising_strength=0.5, refiner_switch_at=0.8)
    # strength 0.5 of 10 steps runs the last 6 (t = 555 ... 0); the switch is still at t <= 199 of the schedule
    assert [(name, round(t)) for name, t, *_ in log] == [("base", 555), ("base", 444), ("base", 333), ("base", 222),
                                                         ("refiner", 111), ("refiner", 0)]


def test_the_refiner_alone_runs_img2img(tiny_sdxl_refiner_dir):
    from PIL import Image

    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(tiny_sdxl_refiner_dir)
    log = []
    with recorded_calls(pipe.model.unet, "refiner", log):
        result = pipe(**SMALL, steps=4, init_images=[Image.new("RGB", (64, 64), (20, 120, 200))],
                      denoising_strength=0.5)
    assert result.images[0].size == (64, 64)
    rows = [[64, 64, 0, 0, POSITIVE_AESTHETIC_SCORE], [64, 64, 0, 0, NEGATIVE_AESTHETIC_SCORE]]
    assert log and all(time_ids.tolist() == rows for *_, time_ids in log)


class _PlacedUNet:
    """A UNet stand-in that only has a device and logs its moves (this machine has no accelerator to move to)."""

    def __init__(self, name: str, device: str, log: list) -> None:
        self.name, self.device, self.log = name, torch.device(device), log

    def to(self, device):
        self.device = torch.device(device)
        self.log.append((self.name, str(self.device)))
        return self


def test_one_unet_on_the_accelerator_at_a_time_and_back_after_a_failure():
    from types import SimpleNamespace

    from pipelines.refiner import RefinerSlot

    log = []
    base = SimpleNamespace(unet=_PlacedUNet("base", "cuda:0", log))
    refiner = SimpleNamespace(unet=_PlacedUNet("refiner", "cpu", log))
    with pytest.raises(RuntimeError, match="interrupted"):
        with RefinerSlot().swapped(base, refiner) as enter:
            assert log == []  # nothing moves before the switch
            enter()
            assert log == [("base", "cpu"), ("refiner", "cuda:0")]  # the base UNet leaves before the refiner comes
            raise RuntimeError("interrupted")
    assert log[2:] == [("refiner", "cpu"), ("base", "cuda:0")]  # and the refiner leaves before the base returns
    log.clear()
    cpu_base = SimpleNamespace(unet=_PlacedUNet("base", "cpu", log))
    with RefinerSlot().swapped(cpu_base, refiner) as enter:
        enter()
    assert log == []  # on the CPU both stay where they are


def _broken_copy(source, target, drop=(), weights_as=None):
    """A copy of the refiner folder `source` without the files / folders in `drop`; `weights_as` renames each weight
    file's suffix (".fp16.safetensors": a variant-only download)."""
    import shutil

    shutil.copytree(source, target)
    for name in drop:
        for path in target.glob(name):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if weights_as is not None:
        for path in target.glob("*/*.safetensors"):
            path.rename(path.with_name(path.name.replace(".safetensors", weights_as)))
    return target


@pytest.mark.parametrize("drop, lacks", [
    (["unet/*.safetensors"], "unet/ weights (diffusion_pytorch_model.safetensors)"),
    (["vae/*.safetensors", "tokenizer_2"], "tokenizer_2/ (next to text_encoder_2/), vae/ weights "
                                           "(diffusion_pytorch_model.safetensors)"),
    (["model_index.json", "scheduler"], "model_index.json, scheduler/scheduler_config.json"),
    (["text_encoder_2"], "a text encoder (text_encoder/, or text_encoder_2/ for an SDXL refiner)"),
])
def test_a_refiner_folder_missing_parts_is_refused_before_anything_runs(base_pipe, tiny_sdxl_refiner_dir, tmp_path,
                                                                         drop, lacks):
    """Every missing part named at once, by the call's check: no step sampled, no refiner loaded (it used to fail
    when the first batch reached the switch, with the loader's "re-download the unet/ folder")."""
    folder = _broken_copy(tiny_sdxl_refiner_dir, tmp_path / "refiner", drop)
    steps, loads = [], []
    base_pipe.session.refiner_slot.session = lambda *args: loads.append(args)
    with pytest.raises(ValueError) as caught:
        base_pipe(**SMALL, steps=4, refiner=str(folder), refiner_switch_at=0.6, callback=steps.append)
    assert str(caught.value) == (
        f"refiner {str(folder)!r} is a diffusers folder without the parts a refiner is loaded from: it lacks {lacks}. "
        "Re-download or complete the folder, or give the refiner as a .safetensors / .ckpt checkpoint.")
    assert (steps, loads) == ([], [])


@pytest.mark.parametrize("drop, also", [([], ""), (["scheduler"], "; it also lacks scheduler/scheduler_config.json")])
def test_a_config_only_folder_as_refiner_is_refused_saying_where_it_belongs(base_pipe, tiny_sdxl_refiner_dir,
                                                                              tmp_path, drop, also):
    folder = _broken_copy(tiny_sdxl_refiner_dir, tmp_path / "configs", ["*/*.safetensors", *drop])
    with pytest.raises(ValueError) as caught:
        base_pipe(**SMALL, steps=4, refiner=folder, refiner_switch_at=0.6)  # a Path, as a str
    assert str(caught.value) == (
        f"refiner {str(folder)!r} holds configs only (no weights), so it cannot be the refiner: give a checkpoint (a "
        ".safetensors / .ckpt file, or a diffusers folder with its weights). A folder of configs serves as the "
        "refiner_config_dir of a single-file refiner of its architecture (the web UI's Refiner > Config folder)"
        f"{also}.")
    assert base_pipe.session.refiner_slot._session is None


def test_a_hires_second_pass_refiner_folder_is_refused_before_the_first_pass(tiny_sdxl_dir, tiny_sdxl_refiner_dir,
                                                                             tmp_path):
    """The refiner finishes the second pass by default, so its load came after the first pass had sampled."""
    from pipelines.hires import HiresFix
    from pipelines.txt2img import TextToImage

    folder = _broken_copy(tiny_sdxl_refiner_dir, tmp_path / "refiner", ["unet/*.safetensors"])
    steps = []
    with pytest.raises(ValueError, match=r"it lacks unet/ weights"):
        HiresFix(TextToImage.from_pretrained(tiny_sdxl_dir))(**SMALL, steps=4, hr_scale=1.5, denoising_strength=0.5,
                                                             refiner=str(folder), refiner_switch_at=0.6,
                                                             callback=steps.append)
    assert steps == []


def test_a_variant_only_refiner_folder_is_complete(base_pipe, tiny_sdxl_refiner_dir, refiner_model, tmp_path):
    """Weights saved only as a variant (`*.fp16.safetensors`) are weights: the folder refines as the original."""
    folder = _broken_copy(tiny_sdxl_refiner_dir, tmp_path / "refiner", weights_as=".fp16.safetensors")
    from_variant = base_pipe(**SMALL, steps=4, refiner=str(folder), refiner_switch_at=0.6)
    assert np.array_equal(_pixels(from_variant), _pixels(base_pipe(**SMALL, steps=4, refiner=refiner_model,
                                                                    refiner_switch_at=0.6)))
