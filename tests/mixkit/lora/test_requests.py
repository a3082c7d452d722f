"""`--lora NAME_OR_PATH:0.8` specs and prompt-tag requests."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mixkit.lora import LoraRequest, parse_lora_cli_spec


@pytest.mark.parametrize("spec, expected", [
    ("detail", ("detail", 1.0, 1.0)),
    ("detail:0.8", ("detail", 0.8, 0.8)),
    ("detail:0.8:0.5", ("detail", 0.8, 0.5)),
    ("styles/detail.safetensors:-1", ("styles/detail.safetensors", -1.0, -1.0)),
    (r"C:\loras\detail.safetensors:0.7", (r"C:\loras\detail.safetensors", 0.7, 0.7)),
    ("name:with:colons:0.3", ("name:with:colons", 0.3, 0.3)),
])
def test_parse_lora_cli_spec(spec, expected):
    request = parse_lora_cli_spec(spec)
    assert (request.source, request.te_weight, request.unet_weight) == expected


@pytest.mark.parametrize("spec", ["", ":0.5", "detail:inf", "detail:nan:1", "detail:1e30", "detail:1:-101"])
def test_bad_cli_specs(spec):
    with pytest.raises(ValueError):
        parse_lora_cli_spec(spec)


@dataclass
class ExtraNetworkRequest:
    kind: str
    name: str
    te_weight: float
    unet_weight: float | None
    raw: str


def test_a_strength_that_would_overflow_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"unet_weight=1e\+30 for detail is beyond ±100"):
        LoraRequest("detail", 1.0, 1e30)
    assert LoraRequest("detail", -100.0, 100.0).unet_weight == 100.0


def test_from_extra_network():
    request = LoraRequest.from_extra_network(ExtraNetworkRequest("lora", "detail", 0.6, None, "<lora:detail:0.6>"))
    assert (request.source, request.te_weight, request.unet_weight, request.display_name) == ("detail", 0.6, 0.6, "detail")
    request = LoraRequest.from_extra_network(ExtraNetworkRequest("lora", "detail", 0.6, 0.2, "<lora:detail:0.6:0.2>"))
    assert (request.te_weight, request.unet_weight) == (0.6, 0.2)
    with pytest.raises(ValueError, match="hypernet"):
        LoraRequest.from_extra_network(ExtraNetworkRequest("hypernet", "x", 1.0, None, "<hypernet:x>"))


def test_resolve_lora_requests_with_prompt_tags(tmp_path):
    import torch
    from safetensors.torch import save_file

    from mixkit.errors import ModelNotFoundError
    from mixkit.lora import resolve_lora_requests
    from mixkit.prompts import extract_extra_networks

    tensors = {"lora_unet_conv_in.lora_down.weight": torch.zeros(1, 4, 3, 3), "lora_unet_conv_in.lora_up.weight": torch.zeros(32, 1, 1, 1)}
    save_file(tensors, str(tmp_path / "ink.safetensors"), metadata={"ss_output_name": "ink_v3"})
    save_file(tensors, str(tmp_path / "paper.safetensors"))
    text, tags = extract_extra_networks("a cat <lora:ink_v3:0.6:0.3>, <lora:paper>")
    resolved = resolve_lora_requests([], tags, tmp_path)
    assert [(r.source, r.te_weight, r.unet_weight, r.display_name) for r in resolved] == [
        ((tmp_path / "ink.safetensors").resolve(), 0.6, 0.3, "ink_v3"),
        ((tmp_path / "paper.safetensors").resolve(), 1.0, 1.0, "paper"),
    ]
    explicit = resolve_lora_requests([LoraRequest.parse(f"{tmp_path / 'paper.safetensors'}:0.5")], [], None)
    assert explicit[0].te_weight == 0.5 and explicit[0].display_name == "paper"
    with pytest.raises(ModelNotFoundError, match="--lora-dir"):
        resolve_lora_requests([LoraRequest.parse("paper")], [], None)
    _, dyn_tags = extract_extra_networks("<lora:paper:1:1:8>")  # A1111's DyLoRA rank cut
    assert resolve_lora_requests([], dyn_tags, tmp_path)[0].dyn_dim == 8
    assert resolve_lora_requests([], dyn_tags, tmp_path)[0].prompt_tag == "<lora:paper:1:dyn=8>"
    with pytest.raises(ValueError, match="dyn_dim must be a positive integer"):
        LoraRequest("paper", dyn_dim=0)


def test_prompt_tags_never_resolve_to_paths(tmp_path):
    import torch
    from safetensors.torch import save_file

    from mixkit.lora import resolve_lora_requests
    from mixkit.prompts import extract_extra_networks

    folder = tmp_path / "loras"
    folder.mkdir()
    outside = tmp_path / "secret.safetensors"
    save_file({"lora_unet_conv_in.lora_down.weight": torch.zeros(1, 4, 3, 3)}, str(outside))
    for prompt in (f"<lora:{outside}:1>", "<lora:../secret:1>", "<lora:../secret.safetensors:1>"):
        _, tags = extract_extra_networks(prompt)
        with pytest.raises(FileNotFoundError, match="No LoRA named"):
            resolve_lora_requests([], tags, folder)


def test_a_misspelt_strength_is_named_in_the_not_found_message(tmp_path):
    from mixkit.errors import ModelNotFoundError
    from mixkit.lora import resolve_lora_requests

    with pytest.raises(ModelNotFoundError, match=r"No LoRA named 'ink:abc'.*If 'abc' after the last ':' is meant as the "
                                                 r"strength, it is not a number: write ink:0.8"):
        resolve_lora_requests([LoraRequest.parse("ink:abc")], [], tmp_path)
