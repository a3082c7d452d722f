"""Image normalisation and refusal of bad files."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from mixkit.io.images import ImageTooLargeError, InvalidImageError, load_image, load_images, open_image


def png_header_only(path, width: int, height: int) -> None:
    """A PNG that declares width x height but carries one empty data chunk: a bomb's header."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


def test_not_an_image_names_the_file(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("hello")
    with pytest.raises(InvalidImageError, match="notes.png"):
        load_image(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        load_image(tmp_path / "nope.jpg")


def test_truncated_jpeg_is_refused(tmp_path):
    path = tmp_path / "cut.jpg"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(path, quality=95)
    path.write_bytes(path.read_bytes()[:600])
    with pytest.raises(InvalidImageError, match="truncated"):
        load_image(path)


def test_cmyk_jpeg_becomes_rgb(tmp_path):
    path = tmp_path / "cmyk.jpg"
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(path)  # pure red in CMYK
    image = load_image(path)
    assert image.mode == "RGB"
    red, green, blue = image.getpixel((4, 4))
    assert red > 200 and green < 60 and blue < 60


def test_16_bit_greyscale_is_scaled_not_clipped(tmp_path):
    path = tmp_path / "deep.png"
    Image.fromarray(np.full((4, 4), 32896, dtype=np.uint16)).save(path)  # 32896 = 128 * 257
    image = load_image(path)
    assert image.mode == "RGB" and image.getpixel((0, 0)) == (128, 128, 128)


def test_integer_and_float_greyscale_follow_their_scale_or_are_refused(tmp_path):
    """Mode I from an 8-bit image (convert("I"), an int32 array) keeps its 0..255 values, as Pillow's convert("RGB")
    does (it used to be divided by 257: 200 became 1, black); 16-bit values are still scaled; mode F in [0, 1] is
    scaled as float arrays are, and other float or integer ranges are refused instead of clipped to white or black."""
    grey = Image.new("L", (4, 4), 200)
    assert load_image(grey.convert("I")).getpixel((0, 0)) == grey.convert("I").convert("RGB").getpixel((0, 0))
    assert load_image(np.full((4, 4), 81, dtype=np.int32)).getpixel((0, 0)) == (81, 81, 81)
    assert load_image(Image.fromarray(np.full((4, 4), 32896, dtype=np.uint16))).getpixel((0, 0)) == (128, 128, 128)
    assert load_image(Image.fromarray(np.full((4, 4), 0.5, dtype=np.float32))).getpixel((0, 0)) == (128, 128, 128)
    with pytest.raises(InvalidImageError, match=r"mode F \(float\) image with values from 200 to 200; float images "
                                                r"must be in \[0, 1\].*image.convert\('L'\)"):
        load_image(grey.convert("F"))
    with pytest.raises(InvalidImageError, match=r"mode F .* values from nan"):
        load_image(Image.fromarray(np.full((4, 4), np.nan, dtype=np.float32)))
    path = tmp_path / "deep32.tif"
    Image.fromarray(np.full((4, 4), 40000, dtype=np.int32)).save(path)
    assert load_image(path).getpixel((0, 0)) == (156, 156, 156)  # above 255: 16-bit data, scaled as before
    Image.fromarray(np.full((4, 4), -5, dtype=np.int32)).save(path)
    with pytest.raises(InvalidImageError, match=r"deep32.tif' is a mode I \(32-bit integer\) image with values from "
                                                r"-5 to -5, outside both 8-bit .*convert\('L'\)"):
        load_image(path)


def test_rgba_transparency_is_composited_on_white(tmp_path):
    path = tmp_path / "alpha.png"
    pixels = np.zeros((2, 2, 4), dtype=np.uint8)
    pixels[0, 0] = (255, 0, 0, 255)  # opaque red, the rest fully transparent black
    Image.fromarray(pixels, mode="RGBA").save(path)
    image = load_image(path)
    assert image.getpixel((0, 0)) == (255, 0, 0) and image.getpixel((1, 1)) == (255, 255, 255)


def test_open_image_keeps_the_alpha_that_load_image_flattens_under_the_same_checks(tmp_path):
    path = tmp_path / "alpha.png"
    pixels = np.zeros((2, 2, 4), dtype=np.uint8)
    pixels[0, 0] = (255, 0, 0, 255)
    Image.fromarray(pixels, mode="RGBA").save(path)
    for source in (path, path.read_bytes(), pixels):
        opened = open_image(source)
        assert opened.mode == "RGBA" and np.array_equal(np.asarray(opened), pixels)
    bomb = tmp_path / "bomb.png"
    png_header_only(bomb, 9000, 9000)
    with pytest.raises(ImageTooLargeError, match="9000x9000"):
        open_image(bomb)
    with pytest.raises(InvalidImageError, match="not an image format"):
        open_image(b"not an image")


def test_palette_with_transparency(tmp_path):
    path = tmp_path / "palette.gif"
    image = Image.new("P", (2, 1))
    image.putpalette([0, 0, 255, 0, 255, 0] + [0] * 762)
    image.putpixel((0, 0), 0)
    image.putpixel((1, 0), 1)
    image.save(path, transparency=1)
    loaded = load_image(path)
    assert loaded.getpixel((0, 0)) == (0, 0, 255) and loaded.getpixel((1, 0)) == (255, 255, 255)


def test_exif_orientation_is_applied(tmp_path):
    path = tmp_path / "phone.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    Image.new("RGB", (40, 20), (10, 200, 10)).save(path, exif=exif)
    assert load_image(path).size == (20, 40)


def test_bomb_refused_by_our_cap_before_decoding(tmp_path):
    path = tmp_path / "bomb.png"
    png_header_only(path, 9000, 9000)  # 81 Mpx: below Pillow's own bomb limit, above our 64 Mpx
    with pytest.raises(ImageTooLargeError, match="9000x9000"):
        load_image(path)
    with pytest.raises(ImageTooLargeError, match="cap"):
        load_image(path, max_pixels=100)


def test_huge_bomb_also_refused(tmp_path):
    path = tmp_path / "huge.png"
    png_header_only(path, 100_000, 100_000)
    with pytest.raises(ImageTooLargeError, match="huge.png"):
        load_image(path)


def test_arrays_bytes_and_batches(tmp_path):
    array = np.zeros((3, 5, 3), dtype=np.uint8)
    assert load_image(array).size == (5, 3)
    path = tmp_path / "a.png"
    Image.fromarray(array).save(path)
    assert load_image(path.read_bytes()).size == (5, 3)
    assert len(load_images([path, str(path), array])) == 3
    assert len(load_images(path)) == 1
    with pytest.raises(ValueError, match="no images"):
        load_images([])
    with pytest.raises(TypeError, match="int"):
        load_image(3)


@pytest.mark.parametrize("shape, dtype", [((6, 5, 3), np.float32), ((6, 5, 4), np.float64), ((6, 5, 1), np.float16),
                                          ((6, 5), np.float32)])
def test_float_arrays_in_0_1_are_scaled_as_diffusers_numpy_to_pil_does(shape, dtype):
    """diffusers' `output_type="np"` gives float arrays in [0, 1]; its own numpy_to_pil is the oracle."""
    from diffusers.utils.pil_utils import numpy_to_pil

    array = np.random.default_rng(0).random(shape).astype(dtype)
    array.flat[:2] = 0.0, 1.0  # both ends of the range are allowed
    expected = numpy_to_pil(array if array.ndim == 3 else array[..., None])[0].convert("RGBA" if shape[-1] == 4 else "RGB")
    if expected.mode == "RGBA":  # load_image composites alpha on white, so do the same to the oracle
        expected = Image.alpha_composite(Image.new("RGBA", expected.size, (255, 255, 255, 255)), expected).convert("RGB")
    image = load_image(array)
    assert image.mode == "RGB" and image.size == (5, 6)
    assert np.array_equal(np.asarray(image), np.asarray(expected))


def test_a_diffusers_np_output_round_trips_unchanged():
    pixels = np.random.default_rng(1).integers(0, 256, (8, 9, 3), dtype=np.uint8)
    assert np.array_equal(np.asarray(load_image(pixels.astype(np.float32) / 255)), pixels)


@pytest.mark.parametrize("array, match", [
    (np.full((4, 4, 3), 255.0, dtype=np.float32), r"values from 255 to 255; float images must be in \[0, 1\].*uint8"),
    (np.full((4, 4, 3), -1.0), r"values from -1 to -1.*\(array \+ 1\) / 2"),
    (np.full((4, 4, 3), np.nan, dtype=np.float32), "NaN or infinite"),
    (np.zeros((1, 4, 4, 3), dtype=np.float32), r"shape \(1, 4, 4, 3\) .* is not one image.*images\[0\]"),
    (np.zeros((3, 4, 5), dtype=np.float32), r"channels-first.*transpose\(1, 2, 0\)"),
    (np.zeros((0, 4, 3), dtype=np.uint8), "is not one image"),
    (np.zeros((4, 4, 3), dtype=np.complex64), r"dtype complex64 is not an image Pillow can read.*uint8 .* or floats"),
])
def test_arrays_that_are_not_one_image_are_refused_naming_shape_dtype_and_the_fix(array, match):
    with pytest.raises(InvalidImageError, match=match):
        load_image(array)


def test_load_images_names_what_it_takes_when_given_no_images_at_all():
    for nothing in (None, 3):
        with pytest.raises(TypeError, match=r"expected an image \(path, bytes, PIL.Image or numpy array\) or a list"):
            load_images(nothing)
