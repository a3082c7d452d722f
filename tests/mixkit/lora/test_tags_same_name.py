"""A LoRA named more than once: each mention applies it at the strengths of the last mention, as A1111 does.

A1111 1.10 `networks.load_networks` keeps one `Network` object per name as written; a second `<lora:a:...>` finds
the first mention's object, overwrites its te/unet multipliers and dyn, and appends the same object again, so
`network_apply_weights` applies `a` once per mention at the last mention's strengths. Two names of one file (the
stem and the `ss_output_name` alias) are two networks there, each at its own strengths.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraRequest, resolve_lora_requests
from mixkit.prompts import extract_extra_networks

SMALL = dict(width=64, height=64, steps=2, seed=4)


def _resolve(prompt: str, folder, explicit=()):
    _, tags = extract_extra_networks(prompt)
    return [(r.display_name, r.te_weight, r.unet_weight, r.dyn_dim) for r in resolve_lora_requests(list(explicit), tags, folder)]


@pytest.fixture()
def folder(tmp_path):
    tensors = {"lora_unet_conv_in.lora_down.weight": torch.zeros(1, 4, 3, 3),
               "lora_unet_conv_in.lora_up.weight": torch.zeros(32, 1, 1, 1)}
    save_file(tensors, str(tmp_path / "ink.safetensors"), metadata={"ss_output_name": "ink_v3"})
    save_file(tensors, str(tmp_path / "paper.safetensors"))
    return tmp_path


def test_every_mention_of_a_name_takes_the_last_mentions_strengths(folder):
    with pytest.warns(UserWarning, match=r"'ink' \(2 mentions, last <lora:ink:0.5:0.2:dyn=4>\).*as in A1111"):
        resolved = _resolve("<lora:ink:1> <lora:paper:0.3> <lora:ink:0.5:0.2:4>", folder)
    assert resolved == [("ink", 0.5, 0.2, 4), ("paper", 0.3, 0.3, None), ("ink", 0.5, 0.2, 4)]


def test_an_explicit_lora_is_a_mention_of_its_name(folder):
    # The infotext writes it after the prompt's tags as <lora:ink:0.7>: A1111 applies both mentions at 0.7.
    with pytest.warns(UserWarning, match="named more than once"):
        resolved = _resolve("<lora:ink:1>", folder, [LoraRequest.parse("ink:0.7")])
    assert resolved == [("ink", 0.7, 0.7, None), ("ink", 0.7, 0.7, None)]


def test_the_stem_and_the_alias_of_one_file_keep_their_own_strengths(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _resolve("<lora:ink:1> <lora:ink_v3:0.5>", folder) == [("ink", 1.0, 1.0, None), ("ink_v3", 0.5, 0.5, None)]
        # The same strengths twice: nothing changes, nothing to warn about.
        assert _resolve("<lora:ink:0.5> <lora:ink:0.5>", folder) == [("ink", 0.5, 0.5, None)] * 2


def _pixels(pipe, prompt: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return np.asarray(pipe(prompt=prompt, **SMALL).images[0]).astype(np.int16)


def test_the_image_is_a1111s(pipes):
    pipe, _ = pipes
    once = _pixels(pipe, "a red circle <lora:style:1>")
    assert np.array_equal(_pixels(pipe, "a red circle <lora:style:1> <lora:style:0.5>"), once)  # twice at 0.5
    assert np.array_equal(_pixels(pipe, "a red circle <lora:style:0.5> <lora:style:1>"),  # twice at 1
                          _pixels(pipe, "a red circle <lora:style:2>"))
    assert not np.array_equal(once, _pixels(pipe, "a red circle <lora:style:1.5>"))  # not the sum
