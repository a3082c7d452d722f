"""Extras over HTTP as A1111's: sizes floored to multiples of 8, "Scale to" with and without "Crop to fit", and
`/sdapi/v1/extra-batch-images` in A1111's request/response shape (driven with the real `webuiapi` client too).

A1111 reference: `modules/upscaler.py` `Upscaler.upscale` (dest = int((side * scale) // 8 * 8); Lanczos/Nearest
resize to int(side * scale) first, then Lanczos to dest), `scripts/postprocessing_upscale.py` (resize mode 1:
scale = max(W / width, H / height), crop = paste centred on a black W x H canvas; "Postprocess upscale to",
"Postprocess crop to", "Postprocess upscaler" keys), `modules/api/api.py` `extras_batch_images_api`
(`imageList: [{data, name}]` in, `{"images": [...], "html_info": ...}` out).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from webui.base64_images import encode_png_base64

from .png_payloads import decode_png


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("extras")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


def picture(width: int = 100, height: int = 75, seed: int = 0) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8))


def a1111_lanczos_upscale(image: Image.Image, scale: float) -> Image.Image:
    """A1111's UpscalerLanczos through Upscaler.upscale, restated from its description."""
    dest = (int((image.width * scale) // 8 * 8), int((image.height * scale) // 8 * 8))
    native = image.resize((int(image.width * scale), int(image.height * scale)), Image.Resampling.LANCZOS)
    return native if native.size == dest else native.resize(dest, Image.Resampling.LANCZOS)


def a1111_crop(image: Image.Image, width: int, height: int) -> Image.Image:
    canvas = Image.new("RGB", (width, height))
    canvas.paste(image, (width // 2 - image.width // 2, height // 2 - image.height // 2))
    return canvas


@pytest.mark.parametrize("scale, size", [(2, (200, 144)), (1.5, (144, 112))])
def test_scale_by_floors_each_side_to_a_multiple_of_8(client, scale, size):
    source = picture()
    response = client.post("/sdapi/v1/extra-single-image",
                           json={"image": encode_png_base64(source), "upscaler_1": "Lanczos", "upscaling_resize": scale})
    assert response.status_code == 200, response.text
    result = decode_png(response.json()["image"]).convert("RGB")
    assert result.size == size
    assert result.tobytes() == a1111_lanczos_upscale(source, scale).tobytes()


@pytest.mark.parametrize("to_size", [(96, 64), (200, 200)])
def test_scale_to_with_crop_to_fit_covers_and_centres_on_w_x_h(client, to_size):
    source = picture()
    width, height = to_size
    response = client.post("/sdapi/v1/extra-single-image", json={
        "image": encode_png_base64(source), "upscaler_1": "Lanczos", "resize_mode": 1, "upscaling_resize_w": width,
        "upscaling_resize_h": height, "upscaling_crop": True})
    assert response.status_code == 200, response.text
    result = decode_png(response.json()["image"])
    scale = max(width / source.width, height / source.height)
    assert result.size == to_size
    assert result.convert("RGB").tobytes() == a1111_crop(a1111_lanczos_upscale(source, scale), width, height).tobytes()
    text = f"Postprocess upscale to: {width}x{height}, Postprocess crop to: {width}x{height}, Postprocess upscaler: Lanczos"
    assert result.info["postprocessing"] == text and response.json()["html_info"] == f"<p>{text}</p>"


def test_scale_to_without_crop_keeps_the_covering_size(client):
    source = picture()
    response = client.post("/sdapi/v1/extra-single-image", json={
        "image": encode_png_base64(source), "upscaler_1": "Lanczos", "resize_mode": 1, "upscaling_resize_w": 96,
        "upscaling_resize_h": 64, "upscaling_crop": False})
    assert response.status_code == 200, response.text
    result = decode_png(response.json()["image"])
    assert result.size == (96, 72)  # factor max(0.96, 0.853): 96 x 72, not cut to 64
    assert result.info["postprocessing"] == "Postprocess upscale to: 96x64, Postprocess upscaler: Lanczos"


def test_batch_images_in_a1111s_shape(client):
    sources = [picture(seed=1), picture(40, 24, seed=2)]
    response = client.post("/sdapi/v1/extra-batch-images", json={
        "imageList": [{"data": encode_png_base64(image), "name": f"image{i}"} for i, image in enumerate(sources)],
        "upscaler_1": "Lanczos", "upscaling_resize": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"images", "html_info"}
    results = [decode_png(data).convert("RGB") for data in body["images"]]
    assert [r.size for r in results] == [(200, 144), (80, 48)]
    assert [r.tobytes() for r in results] == [a1111_lanczos_upscale(s, 2).tobytes() for s in sources]
    assert body["html_info"] == "<p>Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos</p>"


def test_webuiapi_extra_batch_images(server):
    webuiapi = pytest.importorskip("webuiapi", reason="test dependency webuiapi is not installed (pip install webuiapi)")
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port)
    sources = [picture(seed=3), picture(seed=4)]
    result = api.extra_batch_images(sources, upscaler_1="Lanczos", upscaling_resize=2)
    assert [image.size for image in result.images] == [(200, 144), (200, 144)]
    assert [image.convert("RGB").tobytes() for image in result.images] == \
        [a1111_lanczos_upscale(s, 2).tobytes() for s in sources]
    scaled_to = api.extra_single_image(sources[0], upscaler_1="Nearest", resize_mode=1, upscaling_resize_w=64,
                                       upscaling_resize_h=64)
    assert scaled_to.image.size == (64, 64)


@pytest.mark.parametrize("fields, fragment", [
    ({"resize_mode": 2}, "resize_mode must be 0 (scale by upscaling_resize) or 1"),
    ({"resize_mode": 1, "upscaling_resize_w": 4000, "upscaling_resize_h": 64}, "needs an upscale by 40"),
    ({"resize_mode": 1, "upscaling_resize_w": 0}, "must be positive for resize_mode 1"),
    ({"upscaler_2": "Nearest", "extras_upscaler_2_visibility": 0.5}, "upscaler_2='Nearest'"),
])
def test_what_extras_cannot_do_is_refused_naming_the_field(client, fields, fragment):
    for route, images in (("extra-single-image", {"image": encode_png_base64(picture())}),
                          ("extra-batch-images", {"imageList": [{"data": encode_png_base64(picture()), "name": "a"}]})):
        response = client.post(f"/sdapi/v1/{route}", json={**images, "upscaler_1": "Lanczos", **fields})
        assert response.status_code == 422, response.text
        assert fragment in response.json()["detail"]



def test_enable_pnginfo_off_returns_the_result_without_text_chunks(client):
    # A1111's run_postprocessing sets the result's PNG info (the source's, plus postprocessing) only with
    # enable_pnginfo on; the response's html_info still tells the upscale.
    source = encode_png_base64(picture(16, 16), "a cube\nSteps: 4, Seed: 5")
    request = {"image": source, "upscaler_1": "Lanczos", "upscaling_resize": 2}
    with_chunks = decode_png(client.post("/sdapi/v1/extra-single-image", json=request).json()["image"])
    assert with_chunks.info["parameters"] == "a cube\nSteps: 4, Seed: 5" and "postprocessing" in with_chunks.info
    assert client.post("/sdapi/v1/options", json={"enable_pnginfo": False}).status_code == 200
    try:
        body = client.post("/sdapi/v1/extra-single-image", json=request).json()
        unchanged = client.post("/sdapi/v1/extra-single-image", json={**request, "upscaler_1": "None"}).json()
    finally:
        client.post("/sdapi/v1/options", json={"enable_pnginfo": True})
    for answer in (body, unchanged):
        assert not {"parameters", "postprocessing"} & set(decode_png(answer["image"]).info)
    assert "Postprocess upscaler: Lanczos" in body["html_info"]


def test_the_size_the_training_steps_get_is_known_before_the_job():
    from types import SimpleNamespace

    from webui.api_extras import SCALE_BY, SCALE_TO, size_after_upscale

    def body(upscaler, mode, crop=False):
        return SimpleNamespace(upscaler_1=upscaler, resize_mode=mode, upscaling_crop=crop, upscaling_resize=2.0,
                               upscaling_resize_w=96, upscaling_resize_h=64)

    assert size_after_upscale(body("None", SCALE_TO), 100, 75, 2.0) == (100, 75)  # sent back as it came
    assert size_after_upscale(body("Nearest", SCALE_TO, crop=True), 100, 75, 0.96) == (96, 64)  # "Crop to fit"
    assert size_after_upscale(body("Nearest", SCALE_BY), 100, 75, 2.0) == (200, 144)  # floored to a multiple of 8
