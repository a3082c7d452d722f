"""Every form of an image input gives the same pixels (appflow hunt findings 3 and 4).

A PIL image used to skip the normalisation a file path gets (EXIF orientation, transparency on
white), so the same picture detected differently. diffusers' `load_image` normalises PIL inputs
the same way (`ImageOps.exif_transpose`, then `convert("RGB")`). URLs are fetched as PaddleMIX's
examples pass them (`image="https://…/mugs.png"`); tested against a local http.server.
"""

from __future__ import annotations

import functools
import http.server
import threading

import numpy as np
import pytest
import torch
from PIL import Image

from appflow import Appflow, ModelCache
from appflow.image_inputs import read_image_input

KEEP_ALL = dict(box_threshold=0.0, text_threshold=0.0)


@pytest.fixture
def logo(tmp_path):
    """A red disc on a transparent background, as a PIL image and as the PNG file it was saved to."""
    pixels = np.zeros((64, 64, 4), np.uint8)
    yy, xx = np.mgrid[:64, :64]
    pixels[(yy - 32) ** 2 + (xx - 32) ** 2 < 256] = [255, 0, 0, 255]
    image = Image.fromarray(pixels, "RGBA")
    image.save(tmp_path / "logo.png")
    return image, tmp_path / "logo.png"


@pytest.fixture
def rotated_jpeg(tmp_path):
    """A 64x40 JPEG whose EXIF orientation 6 says: turn it 90 degrees to view it (40x64 upright)."""
    image = Image.new("RGB", (64, 40), (30, 60, 200))
    image.paste((220, 30, 30), (0, 0, 20, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    image.save(tmp_path / "rot.jpg", exif=exif)
    return tmp_path / "rot.jpg"


def test_a_transparent_pil_image_is_read_on_white_as_its_file_is(logo):
    image, path = logo
    from_pil, from_file = read_image_input(image, "input"), read_image_input(str(path), "input")
    assert from_pil.mode == "RGB" and from_pil.getpixel((0, 0)) == (255, 255, 255)  # before: (0, 0, 0)
    assert np.array_equal(np.asarray(from_pil), np.asarray(from_file))


def test_an_opened_jpeg_is_turned_upright_as_its_path_is(rotated_jpeg):
    opened = Image.open(rotated_jpeg)
    assert opened.size == (64, 40)
    assert read_image_input(opened, "input").size == (40, 64)  # before: (64, 40), EXIF ignored
    assert np.array_equal(np.asarray(read_image_input(opened, "input")),
                          np.asarray(read_image_input(str(rotated_jpeg), "input")))


def test_detection_gives_the_same_result_for_a_pil_image_and_its_file(logo, rotated_jpeg, tiny_dino_dir, tiny_sam_dir,
                                                                      shared_cache):
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=shared_cache, **KEEP_ALL)
    image, path = logo
    from_pil, from_file = flow(image=image, prompt="circle"), flow(image=path, prompt="circle")
    assert torch.equal(from_pil["scores"], from_file["scores"])
    assert torch.equal(from_pil["seg_masks"], from_file["seg_masks"])
    upright = flow(image=Image.open(rotated_jpeg), prompt="square")["seg_masks"]
    assert upright.shape[1:] == (64, 40) and torch.equal(upright, flow(image=rotated_jpeg, prompt="square")["seg_masks"])


@pytest.fixture(scope="module")
def image_server(tmp_path_factory):
    """A local HTTP server over a folder holding red.png; yields its base URL."""
    folder = tmp_path_factory.mktemp("served")
    Image.new("RGB", (40, 30), (200, 20, 20)).save(folder / "red.png")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", folder
    server.shutdown()
    server.server_close()


def test_an_image_url_is_fetched_and_read_as_its_file(image_server, tiny_blip2_dir, shared_cache):
    base, folder = image_server
    fetched = read_image_input(f"{base}/red.png", "input")
    assert fetched.size == (40, 30) and fetched.getpixel((5, 5)) == (200, 20, 20)
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=shared_cache, max_new_tokens=4,
                   repetition_penalty=1.5)
    assert flow(image=f"{base}/red.png")["text"] == flow(image=folder / "red.png")["text"]


def test_unreachable_or_missing_urls_say_what_to_do_before_any_model_loads(image_server, tiny_blip2_dir):
    base, _ = image_server
    cache = ModelCache()
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache)
    with pytest.raises(ValueError, match=r"input 'image' .*answered HTTP 404 .*check the URL"):
        flow(image=f"{base}/missing.png")
    closed = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there any more: what an offline machine sees
    with pytest.raises(ValueError, match=r"could not be fetched .*download the image elsewhere and pass its file path"):
        flow(image=f"http://127.0.0.1:{port}/mugs.png")
    with pytest.raises(ValueError, match="Pillow can read"):
        flow(image=f"{base}/")  # a directory listing, not an image
    assert cache.loads == 0


def test_a_big_decoded_image_is_read_and_a_big_file_refused_with_advice_that_works(tmp_path):
    """Above the 64 Mpx cap: a PIL image already in memory is read (the captioner resizes it anyway), a file is
    refused before decoding, and the error's advice (decode it yourself, pass the image) is what the first line does;
    it used to point to a max_pixels option AppFlow does not have."""
    big = Image.new("L", (9000, 8000), 90)
    assert read_image_input(big, "input 'image'").getpixel((0, 0)) == (90, 90, 90)
    path = tmp_path / "big.png"
    big.save(path)
    with pytest.raises(ValueError, match=r"input 'image': image file .*big.png' is 9000x8000 = 72,000,000 pixels, "
                                         r"above the 64,000,000-pixel cap; downscale it, or if you trust it, open "
                                         r"and decode it yourself \(image = Image.open\(path\); image.load\(\)\)") as error:
        read_image_input(str(path), "input 'image'")
    assert "max_pixels" not in str(error.value)
    trusted = Image.open(path)
    trusted.load()
    assert read_image_input(trusted, "input 'image'").size == (9000, 8000)


def test_the_cap_is_for_what_is_still_to_be_decoded():
    """Bytes and a lazily opened `Image.open` (tiles pending) are capped as the file is; an array is not."""
    import io

    big = Image.new("L", (9000, 8000), 90)
    encoded = io.BytesIO()
    big.save(encoded, "PNG")
    with pytest.raises(ValueError, match="9000x8000 = 72,000,000 pixels, above the 64,000,000-pixel cap"):
        read_image_input(encoded.getvalue(), "input 'image'")
    with pytest.raises(ValueError, match="9000x8000 = 72,000,000 pixels, above the 64,000,000-pixel cap"):
        read_image_input(Image.open(io.BytesIO(encoded.getvalue())), "input 'image'")
    assert read_image_input(np.asarray(big), "input 'image'").getpixel((8999, 7999)) == (90, 90, 90)


# -- masks keep their transparency (appflow hunt 4) ----------------------------------------------------------------------
@pytest.fixture
def canvas_mask(tmp_path):
    """A 12x8 stroke (opaque white) on a transparent 48x40 layer, as A1111's canvas sends masks; with its PNG file and
    the greyscale mask it stands for (white = repaint)."""
    pixels = np.zeros((40, 48, 4), np.uint8)
    pixels[4:12, 6:18] = 255
    image = Image.fromarray(pixels, "RGBA")
    image.save(tmp_path / "mask.png")
    expected = np.zeros((40, 48), np.uint8)
    expected[4:12, 6:18] = 255
    return image, tmp_path / "mask.png", expected


def test_a_transparent_mask_is_read_from_its_alpha_in_every_form(canvas_mask):
    from appflow.image_inputs import read_mask_input

    image, path, expected = canvas_mask
    for form in (image, path, str(path), path.read_bytes(), np.asarray(image)):
        mask = read_mask_input(form, "mask")
        assert mask.mode == "L" and np.array_equal(np.asarray(mask), expected), type(form)
    # flattened on white (what every image input gets), the transparent background became "repaint"
    assert np.asarray(read_image_input(image, "image").convert("L")).min() == 255
    # an opaque mask is its grey levels, soft edges kept (as the inpainting pipeline reads it)
    grey = Image.fromarray(np.linspace(0, 255, 48 * 40).reshape(40, 48).astype(np.uint8), "L")
    assert np.array_equal(np.asarray(read_mask_input(grey.convert("RGBA"), "mask")), np.asarray(grey))
    with pytest.raises(ValueError, match="mask: image file .*nope.png.* does not exist"):
        read_mask_input(path.parent / "nope.png", "mask")


def test_mask_guided_inpainting_repaints_only_the_strokes_of_a_transparent_mask(tiny_sd1_dir, photo, canvas_mask,
                                                                               shared_cache):
    image, path, expected = canvas_mask
    flow = Appflow("mask_guided_inpainting", models=[tiny_sd1_dir], cache=shared_cache, steps=2, seed=7, mask_blur=0)
    painted = np.asarray(flow(image=photo, mask=image, inpaint_prompt="a cat")["result"])
    # the same as the greyscale mask it stands for; before, the whole picture was repainted
    grey = np.asarray(flow(image=photo, mask=Image.fromarray(expected, "L"), inpaint_prompt="a cat")["result"])
    assert np.array_equal(painted, grey)
    assert np.array_equal(painted[expected == 0], np.asarray(photo)[expected == 0])
    assert not np.array_equal(painted[expected > 0], np.asarray(photo)[expected > 0])
    assert np.array_equal(np.asarray(flow(image=photo, mask=path, inpaint_prompt="a cat")["result"]), grey)
    from appflow import describe_app

    assert describe_app("mask_guided_inpainting")["mask_inputs"] == ["mask"]  # what the HTTP API and UI read
