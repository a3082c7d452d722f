"""The unit `image` shapes sd-webui-controlnet's API takes (`ControlNetUnit.parse_image_formats`) and its
`effective_region_mask`, parsed into unit specs.

Reference: sd-webui-controlnet `internal_controlnet/external_code.py` (1.1.4xx): image = base64 (mask in `mask`),
{"image", "mask"}, [image, mask], (image, mask), or a list of {"image", "mask"} objects (several inputs, read by its
IP-Adapter modules); `effective_region_mask` is a base64 image.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from webui.api_controlnet import parse_units


class Catalog:
    def resolve(self, name):
        return str(name)


def b64(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


PICTURE = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 48, 3), dtype=np.uint8))
MASK = Image.new("L", (48, 32), 0)
MASK.paste(255, (8, 8, 24, 20))


def parse(**fields):
    unit = {"model": "tiny_inpaint", "module": "inpaint_only", **fields}
    return parse_units([unit], models=Catalog(), max_units=4, max_pixels=10**6, max_bytes=10**7)[0]


@pytest.mark.parametrize("fields", [
    {"image": b64(PICTURE), "mask": b64(MASK)},
    {"image": {"image": b64(PICTURE), "mask": b64(MASK)}},
    {"image": [b64(PICTURE), b64(MASK)]},
    {"image": [{"image": b64(PICTURE), "mask": b64(MASK)}]},
    {"image": [b64(PICTURE), None], "mask": b64(MASK)},
], ids=["string-and-mask", "object", "pair", "one-item-list", "pair-without-mask"])
def test_every_image_shape_gives_the_same_picture_and_mask(fields):
    spec = parse(**fields)
    assert np.array_equal(np.asarray(spec.image), np.asarray(PICTURE))
    assert np.array_equal(np.asarray(spec.mask.convert("L")), np.asarray(MASK))


def test_a_pair_without_mask_has_none():
    spec = parse(image=[b64(PICTURE), None])
    assert spec.mask is None and spec.image.size == (48, 32)


@pytest.mark.parametrize("fields, words", [
    ({"image": [{"image": "a"}, {"image": "b"}]}, ["list of 2 inputs", "takes one", "IP-Adapter"]),
    ({"image": [b64(PICTURE)]}, ["[image, mask]", "list of 1 items"]),
    ({"image": [b64(PICTURE), b64(MASK), b64(MASK)]}, ["list of 3 items"]),
    ({"image": [b64(PICTURE), b64(MASK)], "mask": b64(MASK)}, ["both 'mask' and 'image[1]'"]),
    ({"image": {"image": b64(PICTURE), "mask": b64(MASK)}, "mask": b64(MASK)}, ["both 'mask' and 'image.mask'"]),
    ({"image": {"image": b64(PICTURE), "alpha": "x"}}, ["unknown keys ['alpha']"]),
    ({"image": [b64(PICTURE), 5]}, ["controlnet unit 0 image[1] must be a base64-encoded image", "int"]),
    ({"image": 7}, ["controlnet unit 0 image must be a base64-encoded image, got int"]),
    ({"image": b64(PICTURE), "effective_region_mask": 3},
     ["effective_region_mask must be a base64-encoded image (white = the unit's control applies there), got int"]),
])
def test_malformed_images_are_refused_naming_the_field(fields, words):
    with pytest.raises(ValueError) as error:
        parse(**fields)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_effective_region_mask_is_decoded_at_its_own_size():
    region = Image.new("RGB", (16, 8), "white")
    spec = parse(image=b64(PICTURE), effective_region_mask=b64(region))
    assert spec.effective_region_mask.size == (16, 8)  # not fitted to the picture: the extension stretches it
    assert parse(image=b64(PICTURE), effective_region_mask=None).effective_region_mask is None


def test_build_units_hands_the_region_mask_to_the_pipeline_unit():
    from webui.api_controlnet import build_units

    class Models:
        def load(self, name, base_unet):
            return f"model {name}"

    region = Image.new("L", (8, 8), 255)
    spec = parse(image=b64(PICTURE), effective_region_mask=b64(region))
    unit = build_units([spec], Models(), None)[0]
    assert unit.effective_region_mask is spec.effective_region_mask and unit.model == "model tiny_inpaint"
