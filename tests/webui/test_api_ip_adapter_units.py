"""IP-Adapter units over the API, as sd-webui-controlnet clients send them (`module: "ip-adapter_clip_sd15"`,
`model: "ip-adapter_sd15 [hash]"` from its models/ControlNet folder), with tiny adapters on the tiny SD1 model."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

BASE = {"prompt": "a cat", "steps": 2, "width": 64, "height": 64, "seed": 7, "sampler_name": "Euler"}


def encoded(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def reference(seed: int) -> str:
    return encoded(Image.fromarray((np.random.RandomState(seed).rand(40, 40, 3) * 255).astype("uint8")))


def box() -> str:
    image = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(image).rectangle((16, 16, 48, 48), outline="white", width=3)
    return encoded(image)


def ip_unit(**fields) -> dict:
    return {"module": "ip-adapter_clip_sd15", "model": "ip-adapter_tiny [1a2b3c4d]", "weight": 1.0,
            "image": reference(0), **fields}


@pytest.fixture(scope="module")
def unit_folder(tiny_sd1_dir, tmp_path_factory):
    """--controlnet-dir as the extension's users fill it: a ControlNet, IP-Adapter files and `image_encoder/`."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    folder = tmp_path_factory.mktemp("ip-units") / "ControlNet"
    build_tiny_controlnet(folder / "tiny_canny", seed=1)
    unet = load_diffusion_model(tiny_sd1_dir).unet
    save_tiny_ip_adapter(folder, unet)  # ip-adapter_tiny.safetensors + image_encoder/
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_other", seed=5)
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_wide", cross_dim=48)  # another family's width
    return folder


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, unit_folder, serving):
    from webui.config import ServerConfig

    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(unit_folder.parent / "outputs"), ui=False,
                              controlnet_dir=str(unit_folder))) as running:
        yield running


def generate(client, units: list, route: str = "txt2img", **fields):
    payload = {**BASE, **fields, "alwayson_scripts": {"controlnet": {"args": units}}}
    return client.post(f"/sdapi/v1/{route}", json=payload)


def picture(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    data = base64.b64decode(response.json()["images"][0])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)


def infotext(response) -> str:
    import json

    return json.loads(response.json()["info"])["infotexts"][0]


def unet_snapshot(server):
    unet = server.state.holder.loaded_model().unet
    return dict(unet.attn_processors), unet.encoder_hid_proj, unet.config.encoder_hid_dim_type


def test_lists_name_the_adapters_and_modules_but_not_the_encoder_folder(client):
    models = client.get("/controlnet/model_list").json()["model_list"]
    assert models == ["ip-adapter_other", "ip-adapter_tiny", "ip-adapter_wide", "tiny_canny"]
    modules = client.get("/controlnet/module_list").json()
    for name in ("ip-adapter_clip_sd15", "ip-adapter_clip_sdxl", "ip-adapter_clip_h", "ip-adapter-auto"):
        assert name in modules["module_list"] and modules["module_detail"][name] == {"model_free": False, "sliders": []}
    kinds = client.get("/controlnet/control_types").json()["control_types"]
    assert kinds["IP-Adapter"]["model_list"] == ["None", "ip-adapter_other", "ip-adapter_tiny", "ip-adapter_wide"]
    assert kinds["IP-Adapter"]["default_option"] == "ip-adapter-auto"


def test_a_unit_steers_the_image_weight_is_its_scale_and_the_unet_is_left_as_found(client, server):
    plain = picture(generate(client, []))
    before = unet_snapshot(server)
    steered = generate(client, [ip_unit(weight=0.8)])
    assert np.abs(picture(steered) - plain).mean() > 2
    assert 'IP-Adapter: "ip-adapter_tiny: 0.8"' in infotext(steered)
    off = picture(generate(client, [ip_unit(weight=0.0)]))
    assert np.abs(off - plain).max() <= 1  # diffusers skips an adapter at scale 0 (another attention kernel: +-1)
    other_picture = picture(generate(client, [ip_unit(weight=0.8, image=reference(1))]))
    assert np.abs(other_picture - picture(steered)).mean() > 1
    after = unet_snapshot(server)
    assert after[1:] == before[1:] == (None, None)
    assert all(after[0][name] is before[0][name] for name in before[0])
    assert np.array_equal(picture(generate(client, [])), plain)


def test_guidance_window_outside_every_step_is_the_adapter_off(client):
    """2 steps: fractions 0 and 0.5 of the steps; a window (0.6, 1) holds neither, (0.4, 1) holds the second."""
    off = picture(generate(client, [ip_unit(weight=0.0)]))
    assert np.array_equal(picture(generate(client, [ip_unit(guidance_start=0.6)])), off)
    late = picture(generate(client, [ip_unit(guidance_start=0.4)]))
    full = picture(generate(client, [ip_unit()]))
    assert not np.array_equal(late, off) and not np.array_equal(late, full)


def test_several_units_are_several_adapters_and_an_image_list_is_one_adapters_images(client):
    one = generate(client, [ip_unit(weight=0.6)])
    two = generate(client, [ip_unit(weight=0.6), ip_unit(model="ip-adapter_other", weight=0.4, image=reference(1))])
    assert 'IP-Adapter: "ip-adapter_tiny: 0.6, ip-adapter_other: 0.4"' in infotext(two)
    assert np.abs(picture(two) - picture(one)).mean() > 1
    images = [{"image": reference(0)}, {"image": reference(1)}]  # the extension's multiple inputs
    several = generate(client, [ip_unit(weight=0.6, image=images)])
    assert 'IP-Adapter: "ip-adapter_tiny: 0.6"' in infotext(several)
    assert np.abs(picture(several) - picture(one)).mean() > 1


def test_ip_adapter_and_controlnet_units_in_one_request(client):
    canny = {"module": "canny", "model": "tiny_canny", "image": box(), "weight": 1.5, "resize_mode": "Just Resize"}
    control_only = picture(generate(client, [canny]))
    both = generate(client, [canny, ip_unit(weight=0.8)])
    text = infotext(both)
    assert "ControlNet 0:" in text and "tiny_canny" in text and 'IP-Adapter: "ip-adapter_tiny: 0.8"' in text
    assert "ControlNet 1" not in text  # the IP-Adapter unit is not written as a ControlNet
    assert np.abs(picture(both) - control_only).mean() > 2
    adapter_off = picture(generate(client, [canny, ip_unit(weight=0.0)]))
    assert np.abs(adapter_off - control_only).max() <= 1


def left_half(size=(64, 64), colour=True) -> Image.Image:
    """White (red, as the extension reads a colour mask's first channel) on the left half, black on the right."""
    mask = Image.new("RGB" if colour else "L", size, 0)
    mask.paste((255, 0, 0) if colour else 255, (0, 0, size[0] // 2, size[1]))
    return mask


def test_effective_region_mask_is_the_adapters_mask(client, tiny_sd1_dir, unit_folder):
    """The unit's effective_region_mask gives the Python API's picture with `ip_adapter_mask` (its first channel)."""
    from pipelines.ip_adapter import IPAdapterTextToImage, IPAdapterTxt2ImgParams
    from pipelines.ip_adapter_files import IPAdapterSource

    unmasked = picture(generate(client, [ip_unit(weight=1.5)]))
    response = generate(client, [ip_unit(weight=1.5, effective_region_mask=encoded(left_half((32, 32))))])
    masked = picture(response)
    assert 'IP-Adapter: "ip-adapter_tiny: 1.5"' in infotext(response)
    pipe = IPAdapterTextToImage.from_pretrained(str(tiny_sd1_dir))
    source = IPAdapterSource(str(unit_folder / "ip-adapter_tiny.safetensors"),
                             image_encoder_folder=str(unit_folder / "image_encoder"))
    reference_picture = Image.open(io.BytesIO(base64.b64decode(reference(0)))).convert("RGB")
    params = IPAdapterTxt2ImgParams(prompt="a cat", steps=2, width=64, height=64, seed=7, sampler="Euler",
                                    ip_adapter=[source], ip_adapter_image=[[reference_picture]], ip_adapter_scale=[1.5],
                                    ip_adapter_mask=[[left_half(colour=False)]])
    expected = np.asarray(pipe(params).images[0].convert("RGB")).astype(int)
    assert np.array_equal(masked, expected)
    assert not np.array_equal(masked, unmasked)
    # the right half, where the mask is black, is nearer the picture without the unit than the left half is
    plain = picture(generate(client, []))
    right, left = (np.abs(masked - plain)[:, half].mean() for half in (slice(40, 64), slice(0, 24)))
    assert right < left


def test_region_masks_of_several_units_and_of_an_img2img_unit_without_image(client):
    two = [ip_unit(weight=1.0, effective_region_mask=encoded(left_half())),
           ip_unit(model="ip-adapter_other", image=reference(1), weight=1.0)]
    whole = [{**two[0], "effective_region_mask": None}, two[1]]
    assert not np.array_equal(picture(generate(client, two)), picture(generate(client, whole)))
    fields = dict(route="img2img", init_images=[reference(3)], denoising_strength=0.8)
    region = encoded(left_half())
    without = picture(generate(client, [ip_unit(image=None, effective_region_mask=region)], **fields))
    given = picture(generate(client, [ip_unit(image=reference(3), effective_region_mask=region)], **fields))
    assert np.array_equal(without, given)
    assert not np.array_equal(given, picture(generate(client, [ip_unit(image=reference(3))], **fields)))


def test_img2img_unit_without_image_takes_the_init_image(client):
    init = reference(3)
    fields = dict(route="img2img", init_images=[init], denoising_strength=0.8)
    without = picture(generate(client, [ip_unit(image=None)], **fields))
    given = picture(generate(client, [ip_unit(image=init)], **fields))
    assert np.array_equal(without, given)
    assert np.abs(given - picture(generate(client, [], **fields))).mean() > 1


@pytest.mark.parametrize("changes, fragment", [
    ({"model": "ip-adapter_nope"}, "Unknown ControlNet model 'ip-adapter_nope'"),
    ({"model": "tiny_canny"}, "is a ControlNet folder, not IP-Adapter weights"),
    ({"module": "ip-adapter_face_id_plus"}, "FaceID / PuLID adapters need insightface"),
    ({"weight": 2.5}, "weight (the IP-Adapter's scale) must be a number in [0.0, 2.0]"),
    ({"guidance_start": 0.8, "guidance_end": 0.2}, "guidance_start 0.8 is after guidance_end 0.2"),
    ({"control_mode": 2}, "control_mode 2 on an IP-Adapter unit is not supported"),
    ({"mask": reference(2)}, "a mask on an IP-Adapter unit is not supported"),
    ({"effective_region_mask": encoded(Image.new("L", (64, 32), 255))},
     "effective_region_mask is 64x32, whose aspect ratio is not the output's 64x64"),
    ({"effective_region_mask": 3}, "effective_region_mask must be a base64-encoded image"),
    ({"effective_region_mask": encoded(Image.new("L", (64, 64), 255)),
      "image": [{"image": reference(0)}, {"image": reference(1)}]}, "effective_region_mask with 2 pictures"),
    ({"image": None}, "an IP-Adapter unit needs 'image'"),
    ({"image": [{"image": reference(0), "mask": reference(1)}]}, "takes no mask here"),
    ({"image": "not-an-image"}, "not valid base64"),
    ({"model": "ip-adapter_wide"}, "controlnet unit 0: IP-Adapter 'ip-adapter_wide' (ip-adapter_wide.safetensors) "
                                   "is made for a model (cross-attention width 48), but checkpoint"),
])
def test_bad_units_are_422_before_a_job_is_queued(client, server, monkeypatch, changes, fragment):
    queued = []
    monkeypatch.setattr(server.state.worker, "submit", lambda *args, **kwargs: queued.append(args))
    response = generate(client, [ip_unit(**changes)])
    assert response.status_code == 422, response.text
    assert fragment in response.text and queued == []


def test_hires_fix_runs_the_units_in_both_passes_and_refuses_one_pass(client):
    hires = dict(enable_hr=True, hr_scale=2, hr_upscaler="Latent")
    with_unit = generate(client, [ip_unit()], **hires)
    assert with_unit.status_code == 200, with_unit.text
    info = infotext(with_unit)
    assert "Hires upscale: 2" in info and "IP-Adapter: " in info
    at_zero = picture(generate(client, [ip_unit(weight=0.0)], **hires))
    plain = picture(generate(client, [], **hires))
    assert np.array_equal(at_zero, plain)  # scale 0 is exactly hires fix alone
    assert np.abs(picture(with_unit) - plain).mean() > 1
    one_pass = generate(client, [ip_unit(hr_option="Low res only")], **hires)
    assert one_pass.status_code == 422
    assert "controlnet unit 0: hr_option='Low res only' is not supported: IP-Adapter units guide both" in one_pass.text


def test_a_refiner_with_ip_adapter_units_is_422_before_queueing(client, server, monkeypatch):
    queued = []
    monkeypatch.setattr(server.state.worker, "submit", lambda *args, **kwargs: queued.append(args))
    checkpoint = client.get("/sdapi/v1/sd-models").json()[0]["title"]
    for route, fields in (("txt2img", {}), ("img2img", {"init_images": [reference(3)]})):
        response = generate(client, [ip_unit()], route=route, refiner_checkpoint=checkpoint, refiner_switch_at=0.5,
                            **fields)
        assert response.status_code == 422, response.text
        assert "controlnet unit 0: IP-Adapter units cannot run with a refiner yet" in response.text
    assert queued == []


def test_units_the_server_cannot_combine_are_422(client):
    for name in ("loopback", "sd upscale"):  # their init image changes at every generation
        script = generate(client, [ip_unit()], route="img2img", init_images=[reference(3)], script_name=name,
                          script_args=[])
        assert script.status_code == 422, script.text
        assert "cannot be combined with IP-Adapter units: its init image changes at every generation" in script.text
    with_controlnet = generate(client, [ip_unit(), {"module": "none", "model": "tiny_canny", "image": box()}],
                               script_name="prompt matrix", script_args=[])
    assert with_controlnet.status_code == 422 and "cannot be combined with ControlNet units" in with_controlnet.text
    many = generate(client, [ip_unit()] * 5)
    assert many.status_code == 422 and "at most 4 run in one call" in many.text


def test_an_encoder_of_another_width_is_422_and_a_missing_one_names_the_folders(tmp_path, tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_ip_adapter import save_image_encoder
    from pipelines.ip_adapter_files import IPAdapterSource
    from webui.api_controlnet import parse_ip_adapter_units
    from webui.api_ip_adapter import check_ip_adapter_families
    from webui.controlnet_models import ControlNetModels

    unet = load_diffusion_model(tiny_sd1_dir).unet
    folder = tmp_path / "ControlNet"
    save_tiny_ip_adapter(folder, unet, encoder=False)
    models = ControlNetModels(folder)
    with pytest.raises(ValueError, match=r"no CLIP image encoder for 'ip-adapter_tiny.safetensors'.*"
                                         r"'image_encoder_clip_g/' or 'image_encoder/'"):
        parse_ip_adapter_units([ip_unit(module="ip-adapter_clip_sdxl")], models=models, max_pixels=10**6,
                               max_bytes=10**7)
    save_image_encoder(folder / "image_encoder_clip_g", projection_dim=24)  # the module's encoder is found first
    save_image_encoder(folder / "image_encoder", projection_dim=16)
    assert models.names() == ["ip-adapter_tiny"]  # encoder folders are no ControlNets
    spec, = parse_ip_adapter_units([ip_unit(module="ip-adapter_clip_sdxl")], models=models, max_pixels=10**6,
                                   max_bytes=10**7)
    assert spec.encoder.name == "image_encoder_clip_g"

    class NoCheckpoint:  # the checkpoint's family unknown: only the encoder is compared
        entry = None

    source = IPAdapterSource(str(spec.weights), image_encoder_folder=str(spec.encoder))
    with pytest.raises(ValueError, match="reads 16-wide image embeddings but the encoder .* gives 24"):
        check_ip_adapter_families([source], NoCheckpoint())
    spec, = parse_ip_adapter_units([ip_unit()], models=models, max_pixels=10**6, max_bytes=10**7)
    check_ip_adapter_families([IPAdapterSource(str(spec.weights), image_encoder_folder=str(spec.encoder))],
                              NoCheckpoint())


def test_an_xyz_plot_encodes_the_reference_once_and_each_cell_is_its_own_request(client, monkeypatch):
    """The plot's cells reuse one encoding of the unit's picture (`pipelines.ip_adapter_reuse`), and each cell is the
    picture a request with the cell's value gives."""
    import pipelines.ip_adapter_embeds as embeds

    runs, real = [], embeds.encode_ip_images
    monkeypatch.setattr(embeds, "encode_ip_images", lambda adapter, images: runs.append(len(images))
                        or real(adapter, images))
    steps_axis = [4, "1,2", [], 0, "", [], 0, "", [], True, True]  # Steps: 1, 2; legend; include sub images
    response = generate(client, [ip_unit(weight=0.8)], script_name="x/y/z plot", script_args=steps_axis)
    assert response.status_code == 200, response.text
    assert runs == [1]
    grid, *cells = response.json()["images"]
    assert len(cells) == 2
    for steps, cell in zip((1, 2), cells):
        single = picture(generate(client, [ip_unit(weight=0.8)], steps=steps))
        got = np.asarray(Image.open(io.BytesIO(base64.b64decode(cell))).convert("RGB")).astype(int)
        assert np.array_equal(got, single)
    assert runs == [1, 1, 1]
