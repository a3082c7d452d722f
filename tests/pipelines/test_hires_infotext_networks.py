"""A hires fix's infotext lists what the second pass used from its own prompt, as A1111 records it.

A1111 1.10: the Lora extension (`extra_networks_lora.activate`) keeps `p.lora_hashes` across the hires pass
(`if not getattr(p, "is_hr_pass", False) or not hasattr(p, "lora_hashes"): p.lora_hashes = {}`), adds the hr pass's
LoRAs by name and rewrites `Lora hashes` with the union (first pass's names first). `sd_hijack_clip` writes
`TI hashes` and `Emphasis` for every conds it encodes, the hires conds of `calculate_hr_conds` included (1.10 copies
them into the infotext before the hires pass; upstream PR #16677 fixes that, and mixkit records them).
The hashes are computed here independently: a LoRA's is A1111's `addnet_hash_safetensors` (sha256 of the bytes after
the safetensors header), an embedding's the file's sha256, both cut to 12 hex digits.
"""

import hashlib

import pytest
import torch
from safetensors.torch import save_file

from pipelines.hires import HiresFix, with_second_pass_extras
from pipelines.infotext import build_infotext, parse_infotext
from pipelines.txt2img import TextToImage

SMALL = dict(steps=2, width=64, height=64, seed=1, hr_scale=1.5, denoising_strength=0.6, sampler="Euler")


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory, sd1_pipe):
    from mixkit.testing.tiny_lora import write_attention_lora

    folder = tmp_path_factory.mktemp("hires-loras")
    write_attention_lora(sd1_pipe.model.unet, folder / "shiny.safetensors", seed=0)
    write_attention_lora(sd1_pipe.model.unet, folder / "glossy.safetensors", scale=0.5, seed=1)
    return folder


@pytest.fixture(scope="module")
def embeddings_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hires-embeddings")
    save_file({"emb_params": torch.randn(2, 32, generator=torch.Generator().manual_seed(3))},
              str(folder / "myemb.safetensors"))
    return folder


def a1111_lora_hash(path):
    data = path.read_bytes()
    header = int.from_bytes(data[:8], "little")
    return hashlib.sha256(data[8 + header:]).hexdigest()[:12]


def file_hash(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def infotext_values(result):
    return [parse_infotext(text, defaults=False) for text in result.infotexts]


def test_a_lora_only_in_the_hires_prompt_is_in_lora_hashes(sd1_pipe, lora_dir):
    hires = HiresFix(TextToImage(sd1_pipe.model, lora_dir=lora_dir))
    result = hires(prompt="a cat", hr_prompt="a cat <lora:shiny:1>", batch_size=2, **SMALL)
    expected = f"shiny: {a1111_lora_hash(lora_dir / 'shiny.safetensors')}"
    assert [values.get("Lora hashes") for values in infotext_values(result)] == [expected, expected]
    assert all(values["Hires prompt"] == "a cat <lora:shiny:1>" for values in infotext_values(result))


def test_lora_hashes_are_the_union_of_both_passes_in_a1111s_order(sd1_pipe, lora_dir):
    hires = HiresFix(TextToImage(sd1_pipe.model, lora_dir=lora_dir))
    glossy, shiny = (f"{name}: {a1111_lora_hash(lora_dir / f'{name}.safetensors')}" for name in ("glossy", "shiny"))
    both = hires(prompt="a cat <lora:glossy:0.5>", hr_prompt="a cat <lora:shiny:1> <lora:glossy:0.5>", **SMALL)
    assert infotext_values(both)[0]["Lora hashes"] == f"{glossy}, {shiny}"  # first pass's name first, once
    # A hires prompt without the first pass's LoRA: A1111 keeps p.lora_hashes from the first pass.
    first_only = hires(prompt="a cat <lora:glossy:0.5>", hr_prompt="a cat", **SMALL)
    assert infotext_values(first_only)[0]["Lora hashes"] == glossy


def test_an_embedding_only_in_the_hires_prompt_is_in_ti_hashes(sd1_pipe, embeddings_dir):
    hires = HiresFix(TextToImage(sd1_pipe.model, embeddings_dir=embeddings_dir))
    result = hires(prompt="a cat", hr_prompt="a myemb cat", **SMALL)
    assert infotext_values(result)[0]["TI hashes"] == f"myemb: {file_hash(embeddings_dir / 'myemb.safetensors')}"
    plain = hires(prompt="a cat", **SMALL)
    assert "TI hashes" not in infotext_values(plain)[0]


def test_the_emphasis_of_brackets_only_in_the_hires_prompt_is_recorded(sd1_pipe):
    # Without the key a pasted infotext would run the hires prompt with "Original" emphasis: another image.
    result = HiresFix(sd1_pipe)(prompt="a cat", hr_prompt="a (dog:1.3)", emphasis="No norm", **SMALL)
    assert infotext_values(result)[0]["Emphasis"] == "No norm"
    without_brackets = HiresFix(sd1_pipe)(prompt="a cat", hr_prompt="a dog", emphasis="No norm", **SMALL)
    assert "Emphasis" not in infotext_values(without_brackets)[0]


def test_the_merge_rewrites_only_the_parameter_line():
    prompt, negative = "a cat\n  <lora:a:1>, second line", "ugly"
    first = build_infotext(prompt, negative, {"Steps": 4, "Sampler": "Euler", "Size": "64x64", "Lora hashes": "a: 111",
                                              "Hires prompt": "a cat, glossy", "Version": "mixkit 0.1.0"})
    second = build_infotext("a cat, glossy", "", {"Steps": 2, "Size": "96x96", "Denoising strength": 0.6,
                                                  "Lora hashes": "b: 222, a: 111", "TI hashes": "glossy: 333",
                                                  "Emphasis": "No norm", "Version": "mixkit 0.1.0"})
    merged = with_second_pass_extras(first, second)
    assert merged == "\n".join([*first.split("\n")[:-1], (
        'Steps: 4, Sampler: Euler, Size: 64x64, Lora hashes: "a: 111, b: 222", Hires prompt: "a cat, glossy", '
        'TI hashes: "glossy: 333", Emphasis: No norm, Version: mixkit 0.1.0')])
    assert merged.startswith("a cat\n  <lora:a:1>, second line\nNegative prompt: ugly\n")  # prompt lines untouched
    assert with_second_pass_extras(first, build_infotext("x", "", {"Steps": 2, "Size": "96x96", "Seed": 1})) == first
