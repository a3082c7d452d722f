"""LoRA prompt tags, round 2: extension arguments are ignored, negative-prompt tags stay text (both as in A1111).

A1111 1.10: `ExtraNetworkLora.activate` reads only `te`, `unet` and `dyn` from a tag's named arguments, and
`StableDiffusionProcessing.parse_extra_network_prompts` runs `extra_networks.parse_prompts` on `self.prompts`
only, so tags in the negative prompt are neither applied nor removed: they are encoded as text.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mixkit.prompts import extract_extra_networks

SMALL = dict(width=64, height=64, steps=2, seed=4, prompt="a red circle")


@pytest.mark.parametrize("tag, te, unet", [
    ("<lora:x:0.8:lbw=MIDD>", 0.8, 0.8),
    ("<lora:x:0.8:0.5:lbw=1,0,0,1:start=3:stop=10>", 0.8, 0.5),
    ("<lora:x:lbw=MIDD:te=0.5:unet=0.25>", 0.5, 0.25),
])
def test_block_weight_and_other_extension_arguments_are_ignored_with_a_warning(tag, te, unet):
    with pytest.warns(UserWarning, match=r"named argument\(s\) .*lbw.* are ignored"):
        text, requests = extract_extra_networks(f"a cat {tag}")
    assert text == "a cat "
    assert [(r.name, r.te_weight, r.unet_weight) for r in requests] == [("x", te, unet)]


def test_a_tag_without_extension_arguments_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert extract_extra_networks("<lora:x:0.8:unet=0.2:dyn=4>")[1][0].dyn_dim == 4


def _pixels(result) -> np.ndarray:
    return np.asarray(result.images[0]).astype(np.int16)


def test_a_lora_tag_in_the_negative_prompt_stays_as_text_and_is_not_applied(pipes):
    with_folder, without_folder = pipes
    with pytest.warns(UserWarning, match=r"negative prompt: <lora:style:1> not applied"):
        tagged = with_folder(negative_prompt="blurry <lora:style:1>", **SMALL)
    stripped = with_folder(negative_prompt="blurry ", **SMALL)
    # Not removed: the tag's text changes the negative conditioning, so the image.
    assert np.abs(_pixels(tagged) - _pixels(stripped)).max() > 0
    # Not applied: without any LoRA folder (nothing could be applied) the image is the same.
    with pytest.warns(UserWarning, match="not applied"):
        text_only = without_folder(negative_prompt="blurry <lora:style:1>", **SMALL)
    assert np.array_equal(_pixels(tagged), _pixels(text_only))
    assert "\nNegative prompt: blurry <lora:style:1>\n" in tagged.infotexts[0]


def test_a_malformed_negative_tag_is_text_too(pipes):
    with_folder, _ = pipes
    with pytest.warns(UserWarning, match="not applied"):
        result = with_folder(negative_prompt="<lora:style:1:x>", **SMALL)
    assert len(result.images) == 1
