"""IP-Adapter on the tiny SD 1.x / SDXL models, with tiny adapters saved in h94's layouts and loaded by path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

from .ip_adapter_helpers import SMALL, pixels, reference, unet_as_found


@pytest.fixture(scope="module")
def plain(ip_pipe):
    return pixels(ip_pipe(**SMALL))


def test_scale_zero_is_the_image_without_adapter(ip_pipe, adapter_file, plain):
    result = ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=0.0)
    # adapters all at scale 0 are not attached: exactly the picture without them, and the infotext still says so
    assert np.array_equal(pixels(result), plain)
    assert 'IP-Adapter: "ip-adapter_tiny: 0"' in result.infotexts[0]


def test_scale_changes_the_image_and_the_unet_is_left_as_found(ip_pipe, adapter_file, plain):
    processors = dict(ip_pipe.model.unet.attn_processors)
    half = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=0.5))
    full = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0)))
    assert np.abs(half - plain).mean() > 2
    assert np.abs(full - half).mean() > 2
    other_image = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(1)))
    assert np.abs(other_image - full).mean() > 1
    unet_as_found(ip_pipe, processors)
    assert np.array_equal(pixels(ip_pipe(**SMALL)), plain)  # the next plain call is unchanged


def test_bin_file_reads_through_the_safe_loader_and_equals_safetensors(ip_pipe, adapter_file, tmp_path):
    bin_file = save_tiny_ip_adapter(tmp_path, ip_pipe.model.unet, suffix=".bin", encoder=False)
    (tmp_path / "image_encoder").symlink_to(adapter_file.parent / "image_encoder")
    call = dict(SMALL, ip_adapter_image=reference(0), ip_adapter_scale=0.7)
    assert np.array_equal(pixels(ip_pipe(**call, ip_adapter=str(bin_file))),
                          pixels(ip_pipe(**call, ip_adapter=str(adapter_file))))


class Payload:  # a pickled global torch's weights-only loader refuses
    pass


def test_pickle_with_code_is_refused(ip_pipe, adapter_file, tmp_path):
    from mixkit.errors import UnsafeCheckpointError

    file = tmp_path / "ip-adapter_evil.bin"
    torch.save({"image_proj": {"x": Payload()}, "ip_adapter": {}}, file)
    (tmp_path / "image_encoder").symlink_to(adapter_file.parent / "image_encoder")
    processors = dict(ip_pipe.model.unet.attn_processors)
    with pytest.raises(UnsafeCheckpointError, match="Payload"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0))
    unet_as_found(ip_pipe, processors)


def test_diffusers_layout_load_and_unload(ip_pipe, adapter_file, plain):
    root = adapter_file.parent.parent
    from pipelines.ip_adapter_files import IPAdapterSource

    by_path = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0),
                             ip_adapter_scale=0.6))
    source = IPAdapterSource(root, subfolder="models", weight_name=adapter_file.name)
    assert np.array_equal(pixels(ip_pipe(**SMALL, ip_adapter=source, ip_adapter_image=reference(0),
                                         ip_adapter_scale=0.6)), by_path)
    ip_pipe.load_ip_adapter(str(root), subfolder="models", weight_name=adapter_file.name)
    try:
        ip_pipe.set_ip_adapter_scale(0.6)
        assert np.array_equal(pixels(ip_pipe(**SMALL, ip_adapter_image=reference(0))), by_path)
        assert np.array_equal(pixels(ip_pipe(**SMALL)), plain)  # no image: no adapter
    finally:
        ip_pipe.unload_ip_adapter()
    with pytest.raises(ValueError, match="ip_adapter_image was given without ip_adapter"):
        ip_pipe(**SMALL, ip_adapter_image=reference(0))


def test_folder_with_one_weights_file_needs_no_weight_name(ip_pipe, adapter_file):
    call = dict(SMALL, ip_adapter_image=reference(0), ip_adapter_scale=0.6)
    assert np.array_equal(pixels(ip_pipe(**call, ip_adapter=str(adapter_file.parent))),
                          pixels(ip_pipe(**call, ip_adapter=str(adapter_file))))


def test_two_adapters_with_own_images_and_scales(ip_pipe, adapter_file, second_adapter):
    first = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=0.8))
    both = dict(SMALL, ip_adapter=[str(adapter_file), str(second_adapter)],
                ip_adapter_image=[reference(0), reference(1)])
    # the second at scale 0 is skipped: the first alone
    assert np.abs(pixels(ip_pipe(**both, ip_adapter_scale=[0.8, 0.0])) - first).max() <= 1
    together = ip_pipe(**both, ip_adapter_scale=[0.8, 0.6])
    assert np.abs(pixels(together) - first).mean() > 1
    from pipelines.infotext import parse_infotext
    from pipelines.ip_adapter_infotext import ip_adapters_from_infotext

    assert ip_adapters_from_infotext(parse_infotext(together.infotexts[0])) == [("ip-adapter_tiny", 0.8),
                                                                              ("ip-adapter_other", 0.6)]


def test_several_images_for_one_adapter(ip_pipe, adapter_file):
    one = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0)))
    two = ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=[reference(0), reference(1)])
    nested = ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=[[reference(0), reference(1)]])
    assert np.abs(pixels(two) - one).mean() > 1
    assert np.array_equal(pixels(two), pixels(nested))  # diffusers' nested form means the same


def test_batch_and_infotext_line(ip_pipe, adapter_file):
    result = ip_pipe(**dict(SMALL, batch_size=2), ip_adapter=str(adapter_file), ip_adapter_image=reference(0),
                     ip_adapter_scale=0.6)
    assert len(result.images) == 2
    assert all('IP-Adapter: "ip-adapter_tiny: 0.6"' in text for text in result.infotexts)


@pytest.mark.parametrize("scale", [-0.1, 2.5, math.nan, True, "0.5", [0.5, 0.5]])
def test_bad_scale(ip_pipe, adapter_file, scale):
    with pytest.raises(ValueError, match="ip_adapter_scale"):
        ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=scale)


def test_bad_inputs_name_the_problem_and_leave_the_pipe(ip_pipe, adapter_file, second_adapter, tmp_path):
    from mixkit.errors import ModelNotFoundError

    processors = dict(ip_pipe.model.unet.attn_processors)
    cases = [
        (dict(ip_adapter=str(adapter_file)), ValueError, "without ip_adapter_image"),
        (dict(ip_adapter=[str(adapter_file), str(second_adapter)], ip_adapter_image=[reference(0)]), ValueError,
         "1 entries for 2 IP-Adapters"),
        (dict(ip_adapter=str(adapter_file), ip_adapter_image="cat.png"), TypeError, "PIL image"),
        (dict(ip_adapter=str(tmp_path / "nope.safetensors"), ip_adapter_image=reference(0)), ModelNotFoundError,
         "does not exist"),
        (dict(ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=[0.5, 0.5]), ValueError,
         "2 values for 1"),
    ]
    for keywords, error, message in cases:
        with pytest.raises(error, match=message):
            ip_pipe(**SMALL, **keywords)
        unet_as_found(ip_pipe, processors)


def test_missing_image_encoder(ip_pipe, tmp_path):
    from mixkit.errors import ModelNotFoundError

    file = save_tiny_ip_adapter(tmp_path, ip_pipe.model.unet, encoder=False)
    with pytest.raises(ModelNotFoundError, match="image_encoder_folder"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0))


def test_adapter_of_another_family_is_refused_before_generation(ip_pipe, tmp_path):
    file = save_tiny_ip_adapter(tmp_path, ip_pipe.model.unet, cross_dim=48)
    processors = dict(ip_pipe.model.unet.attn_processors)
    steps = []
    with pytest.raises(ValueError, match="cross-attention width 48 .* this model has 32"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0), callback=steps.append)
    assert steps == []
    unet_as_found(ip_pipe, processors)


def test_a_units_adapter_of_another_family_is_refused_naming_the_unit(ip_pipe, tmp_path):
    from pipelines.ip_adapter_files import IPAdapterSource

    file = save_tiny_ip_adapter(tmp_path, ip_pipe.model.unet, cross_dim=48)
    source = IPAdapterSource(str(file), unit="ControlNet Unit 2")
    assert source == IPAdapterSource(str(file)) and hash(source) == hash(IPAdapterSource(str(file)))  # a name only
    with pytest.raises(ValueError, match=r"^ControlNet Unit 2: IP-Adapter 'ip-adapter_tiny' was made for a UNet with "
                                         r"cross-attention width 48"):
        ip_pipe(**SMALL, ip_adapter=source, ip_adapter_image=reference(0))


def test_sd1_adapter_on_sdxl(sdxl_pipe, adapter_file):
    from pipelines.ip_adapter import IPAdapterTextToImage

    pipe = IPAdapterTextToImage.from_pipeline(sdxl_pipe)
    with pytest.raises(ValueError, match="cross-attention width 32 .*this model has 64"):
        pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    assert pipe.model.unet.encoder_hid_proj is None


def test_sdxl_adapter_changes_sdxl_image(sdxl_pipe, tmp_path):
    from pipelines.ip_adapter import IPAdapterTextToImage

    pipe = IPAdapterTextToImage.from_pipeline(sdxl_pipe)
    file = save_tiny_ip_adapter(tmp_path, pipe.model.unet)
    processors = dict(pipe.model.unet.attn_processors)
    plain = pixels(pipe(**SMALL))
    zero = pixels(pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0), ip_adapter_scale=0.0))
    full = pixels(pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0)))
    assert np.array_equal(zero, plain)
    assert np.abs(full - plain).mean() > 1
    unet_as_found(pipe, processors)


def test_interrupted_by_an_error_mid_call_restores_the_unet(ip_pipe, adapter_file):
    processors = dict(ip_pipe.model.unet.attn_processors)

    def fail(progress):
        assert ip_pipe.model.unet.encoder_hid_proj is not None  # attached while sampling
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), callback=fail)
    unet_as_found(ip_pipe, processors)


def test_img2img_with_image_prompt(sd1_pipe, adapter_file):
    from pipelines.ip_adapter import IPAdapterImageToImage

    pipe = IPAdapterImageToImage.from_pipeline(sd1_pipe)
    call = dict(SMALL, init_images=[reference(2).resize((64, 64))], denoising_strength=0.75)
    plain = pixels(pipe(**call))
    guided = pipe(**call, ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    assert np.abs(pixels(guided) - plain).mean() > 1
    assert "IP-Adapter: " in guided.infotexts[0]


def test_face_id_adapters_are_refused_by_name(ip_pipe, tmp_path):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_ip_adapter import save_image_encoder

    file = tmp_path / "ip-adapter-faceid_sd15.safetensors"
    save_file({"image_proj.proj.0.weight": torch.zeros(8, 8), "image_proj.norm.weight": torch.ones(32),
               "ip_adapter.1.to_k_ip.weight": torch.zeros(32, 32)}, file)
    save_image_encoder(tmp_path / "image_encoder")
    with pytest.raises(ValueError, match="'ip-adapter-faceid_sd15' is a variant mixkit does not run"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0))


def test_a_refiner_is_refused_before_anything_loads(ip_pipe, adapter_file, tiny_sd1_dir):
    """The refiner's UNet would run without the adapter layers after the switch: refused, not half applied."""
    with pytest.raises(ValueError, match="IP-Adapter cannot run with a refiner yet: the refiner's UNet has no adapter"):
        ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), refiner=str(tiny_sd1_dir),
                refiner_switch_at=0.5)


def test_not_an_ip_adapter_file(ip_pipe, tmp_path):
    from safetensors.torch import save_file

    from mixkit.errors import CheckpointFormatError

    file = tmp_path / "control_sd15_canny.safetensors"
    save_file({"input_blocks.0.weight": torch.zeros(2)}, file)
    with pytest.raises(CheckpointFormatError, match="not an IP-Adapter checkpoint"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0), ip_adapter_scale=0.5)


def test_hub_ids_need_a_weight_name_and_say_what_failed_offline(ip_pipe, monkeypatch):
    from mixkit.errors import ModelNotFoundError
    from pipelines.ip_adapter_files import IPAdapterSource

    with pytest.raises(ValueError, match="needs weight_name="):
        ip_pipe(**SMALL, ip_adapter="h94/IP-Adapter", ip_adapter_image=reference(0))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = IPAdapterSource("mixkit-test/no-such-ip-adapter", subfolder="models", weight_name="ip-adapter_sd15.bin")
    with pytest.raises(ModelNotFoundError, match="could not be fetched from the Hugging Face hub"):
        ip_pipe(**SMALL, ip_adapter=source, ip_adapter_image=reference(0))


def test_ip_adapter_dict_form_and_unknown_keys(ip_pipe, adapter_file):
    from pipelines.ip_adapter_files import IPAdapterSource

    assert IPAdapterSource.of({"source": "x", "weight_name": "w.bin"}) == IPAdapterSource("x", weight_name="w.bin")
    with pytest.raises(ValueError, match="'subfolder', 'weight_name', 'image_encoder_folder'"):
        ip_pipe(**SMALL, ip_adapter={"source": str(adapter_file), "scale": 1}, ip_adapter_image=reference(0))
