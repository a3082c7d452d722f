"""QR code generation and decoding (segno encodes, OpenCV decodes: two independent implementations)."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from appflow.tasks.qrcode import decode_qr, qr_code_image


@pytest.mark.parametrize("text", ["https://example.org/a?b=c", "hello mixkit"])
def test_generated_codes_decode_back_to_their_text(text):
    image = qr_code_image(text, 200)
    assert image.size == (200, 200) and image.mode == "RGB"
    assert decode_qr(image) == text


def test_a_damaged_code_still_decodes_thanks_to_level_h_and_noise_does_not():
    image = qr_code_image("https://example.org", 200)
    ImageDraw.Draw(image).rectangle((80, 80, 110, 110), fill=(128, 128, 128))  # a logo in the middle
    assert decode_qr(image) == "https://example.org"
    assert decode_qr(Image.effect_noise((120, 120), 64).convert("RGB")) == ""


def test_a_canvas_too_small_for_the_code_is_refused():
    # 19 characters at level H need version 3: 29 modules plus a 4-module quiet zone on each side
    with pytest.raises(ValueError, match="needs at least 37 pixels; width is 20"):
        qr_code_image("https://example.org", 20)


def test_a_text_too_long_for_any_qr_code_says_the_limit_before_any_model_loads():
    """segno's bare DataOverflowError ("Data too large. No QR Code can handle the provided data") used to come out."""
    from appflow import Appflow, ModelCache

    cache = ModelCache()
    flow = Appflow("qrcode_art", models={"generator": "mixkit-tiny-sd", "controlnet": "unused/controlnet"}, cache=cache)
    with pytest.raises(ValueError, match=r"Task 'qr_code': A text of 1300 characters .* does not fit in a QR code with "
                                         r"error correction 'h' .* 1273 at 'h'\); shorten it .* lower qr_error"):
        flow(text="x" * 1300, prompt="a garden")
    assert len(qr_code_image("x" * 1300, 1000, "l").getbbox()) == 4  # fits at level l, as the message says
    with pytest.raises(ValueError, match="App 'qrcode_art', step 'qr': Task 'qr_code': text is empty"):
        flow(text="", prompt="a garden")
    assert cache.loads == 0
