"""LoRAs through the text-to-image pipeline: from parameters, from prompt tags, always removed."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

SMALL = dict(width=64, height=64, steps=3, seed=4, prompt="a red circle")


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory, sd1_pipe):
    """A kohya-format LoRA on every attention projection of the tiny UNet, written by hand."""
    folder = tmp_path_factory.mktemp("loras")
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, module in sd1_pipe.model.unet.named_modules():
        if isinstance(module, torch.nn.Linear) and name.endswith(("to_q", "to_k", "to_v")):
            key = "lora_unet_" + name.replace(".", "_")
            tensors[f"{key}.lora_down.weight"] = torch.randn(2, module.in_features, generator=generator)
            tensors[f"{key}.lora_up.weight"] = torch.randn(module.out_features, 2, generator=generator)
            tensors[f"{key}.alpha"] = torch.tensor(2.0)
    save_file(tensors, str(folder / "shiny.safetensors"))
    return folder


def pixels(result):
    return np.asarray(result.images[0]).astype(np.int16)


def test_lora_from_parameters_and_from_prompt_tag_agree_and_are_removed(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    plain = pipe(**SMALL)
    by_param = pipe(loras=[str(lora_dir / "shiny.safetensors") + ":0.8"], **SMALL)
    by_tag = pipe(**{**SMALL, "prompt": "a red circle <lora:shiny:0.8>"})
    assert np.abs(pixels(plain) - pixels(by_param)).max() > 0
    assert np.array_equal(pixels(by_param), pixels(by_tag))
    assert "Lora hashes: \"shiny: " in by_tag.infotexts[0] or "Lora hashes: shiny: " in by_tag.infotexts[0]
    assert by_tag.infotexts[0].startswith("a red circle <lora:shiny:0.8>\n")  # tags stay in the recorded prompt
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert np.array_equal(pixels(plain), pixels(pipe(**SMALL)))


def test_strength_zero_is_a_no_op(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    assert np.array_equal(pixels(pipe(**SMALL)), pixels(pipe(**{**SMALL, "prompt": "a red circle <lora:shiny:0>"})))


def test_unknown_lora_tag_is_a_clear_error_and_the_model_is_untouched(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    with pytest.raises((ValueError, FileNotFoundError, KeyError), match="nothere"):
        pipe(**{**SMALL, "prompt": "x <lora:nothere:1>"})
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
