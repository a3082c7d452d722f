"""Display names of LoRA requests: dotted library names stay whole, so an infotext names the file that was applied.

A1111 writes the name as mentioned (`ExtraNetworkLora.activate`: `mentioned_name` goes into the tag and into
`Lora hashes`), so `add_detail.v2` stays `add_detail.v2`; only a path to a file is reduced to its stem.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraRequest, parse_lora_cli_spec, resolve_lora_requests
from mixkit.prompts import extract_extra_networks


def _write(path: Path, seed: int) -> Path:
    generator = torch.Generator().manual_seed(seed)
    key = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q"  # Linear(32, 32) in the tiny UNet
    save_file({f"{key}.lora_down.weight": torch.randn(2, 32, generator=generator),
               f"{key}.lora_up.weight": torch.randn(32, 2, generator=generator)}, str(path))
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    """Two files whose names differ only by a dotted part: `my.style` and `my.style.v1`."""
    _write(tmp_path / "my.style.safetensors", 1)
    _write(tmp_path / "my.style.v1.safetensors", 2)
    return tmp_path


@pytest.mark.parametrize("spec, name", [
    ("my.style.v1:0.5", "my.style.v1"),
    ("add_detail.v2", "add_detail.v2"),
    ("sub/my.style.v1:0.5", "sub/my.style.v1"),
    ("my.style.v1.safetensors:0.5", "my.style.v1"),  # a file name in the LoRA folder: the library name is its stem
])
def test_a_library_name_keeps_every_dot_in_tags_and_hashes(spec, name):
    request = parse_lora_cli_spec(spec)
    assert request.display_name == name
    assert request.prompt_tag.startswith(f"<lora:{name}:")


def test_a_path_to_an_existing_file_is_named_by_its_stem(folder):
    request = LoraRequest(folder / "my.style.v1.safetensors", 0.5)
    assert request.display_name == "my.style.v1"
    resolved = resolve_lora_requests([request], [], folder)
    assert resolved[0].display_name == "my.style.v1"


def test_the_infotext_tag_of_a_dotted_name_pastes_back_to_the_same_file(folder):
    explicit = resolve_lora_requests([parse_lora_cli_spec("my.style.v1:0.5")], [], folder)
    assert explicit[0].source == (folder / "my.style.v1.safetensors").resolve()
    assert explicit[0].display_name == "my.style.v1"  # was "my.style": the other file
    tag = parse_lora_cli_spec("my.style.v1:0.5").prompt_tag
    assert tag == "<lora:my.style.v1:0.5>"
    _, tags = extract_extra_networks(f"a cat {tag}")
    pasted = resolve_lora_requests([], tags, folder)
    assert pasted[0].source == explicit[0].source
    assert (pasted[0].te_weight, pasted[0].unet_weight) == (0.5, 0.5)


def test_lora_hashes_name_the_dotted_file(folder, sd1):
    from mixkit.lora import apply_loras

    requests = resolve_lora_requests([parse_lora_cli_spec("my.style.v1:0.5")], [], folder)
    handle = apply_loras(sd1.unet, sd1.text_encoders, requests)
    try:
        assert handle.infotext_hashes().startswith("my.style.v1: ")
    finally:
        handle.remove()


def test_a_dotted_lora_passed_as_a_parameter_round_trips_through_the_infotext(folder, tiny_sd1_dir):
    import numpy as np

    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(tiny_sd1_dir, lora_dir=folder)
    small = dict(steps=2, width=64, height=64, seed=1)
    first = pipe(prompt="a cat", loras=["my.style.v1:0.5"], **small)
    prompt_line = first.infotexts[0].split("\n")[0]
    assert prompt_line == "a cat <lora:my.style.v1:0.5>"
    assert 'Lora hashes: "my.style.v1: ' in first.infotexts[0]
    pasted = pipe(prompt=prompt_line, **small)
    assert np.array_equal(np.asarray(first.images[0]), np.asarray(pasted.images[0]))


def test_prompt_tags_come_before_explicit_loras_as_in_the_infotexts_prompt(folder):
    # The infotext's prompt is the prompt (with its tags) followed by the explicit LoRAs as tags; A1111 applies and
    # lists `Lora hashes` in that prompt order when the infotext is pasted, so mixkit resolves tags first too.
    _, tags = extract_extra_networks("a castle <lora:my.style:0.8>")
    resolved = resolve_lora_requests([LoraRequest.parse("my.style.v1:0.6")], tags, folder)
    assert [request.display_name for request in resolved] == ["my.style", "my.style.v1"]
