"""Files whose modules do not fit together, or use an algorithm mixkit does not apply: one clear error at load,
naming the file and the key, in merge and runtime mode, and the model left bit for bit as it was."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraMismatchError, LoraRequest, apply_loras
from tests.mixkit.lora.conftest import assert_bit_identical, make_peer_lora, snapshot

KEY = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q"


def _broken_copy(tmp_path, sd1, name, edit):
    """A good LoRA file (every module fits) with one module's tensors edited by `edit(state)`."""
    state = dict(make_peer_lora(tmp_path, sd1, "lora", seed=31, name="good").state_dict)
    edit(state)
    path = tmp_path / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


CASES = {
    "rank-mismatch": (lambda s: s.__setitem__(f"{KEY}.lora_up.weight", torch.zeros(s[f"{KEY}.lora_up.weight"].shape[0], 3)),
                      "ranks disagree"),
    "rank-zero": (lambda s: (s.__setitem__(f"{KEY}.lora_down.weight", torch.zeros(0, s[f"{KEY}.lora_down.weight"].shape[1])),
                             s.__setitem__(f"{KEY}.lora_up.weight", torch.zeros(s[f"{KEY}.lora_up.weight"].shape[0], 0))),
                  "rank 0"),
}


@pytest.mark.parametrize("mode", ["merge", "runtime"])
@pytest.mark.parametrize("case", list(CASES))
def test_inconsistent_module_is_refused_before_any_patching(tmp_path, sd1, case, mode):
    edit, words = CASES[case]
    path = _broken_copy(tmp_path, sd1, case, edit)
    before = snapshot(sd1)
    with pytest.raises(LoraMismatchError) as error:
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode=mode)
    message = str(error.value)
    assert str(path) in message and KEY in message and words in message
    assert "base model" not in message  # the model is right; the file is not
    assert_bit_identical(sd1, before)


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_boft_is_refused_by_name(tmp_path, sd1, mode):
    path = tmp_path / "boft.safetensors"
    save_file({f"{KEY}.oft_blocks": torch.zeros(2, 4, 8, 8), f"{KEY}.alpha": torch.tensor(0.0)}, str(path))
    before = snapshot(sd1)
    with pytest.raises(LoraMismatchError, match=r"BOFT .* is not supported") as error:
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode=mode)
    assert KEY in str(error.value) and "base model" not in str(error.value)
    assert_bit_identical(sd1, before)


def test_glora_with_tucker_core_is_refused_by_name(tmp_path, sd1):
    peer = make_peer_lora(tmp_path, sd1, "glora", seed=32, include_te=False)
    state = dict(peer.state_dict)
    state[f"{KEY}.bm.weight"] = torch.zeros(4, 4, 1, 1)
    path = tmp_path / "glora_tucker.safetensors"
    save_file(state, str(path))
    before = snapshot(sd1)
    with pytest.raises(LoraMismatchError, match="GLoRA with a Tucker core"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])
    assert_bit_identical(sd1, before)


def test_keys_of_an_unknown_algorithm_are_not_blamed_on_the_base_model(tmp_path, sd1):
    path = tmp_path / "unknown.safetensors"
    save_file({f"{KEY}.mystery_w1": torch.zeros(4, 4), f"{KEY}.mystery_w2": torch.zeros(4, 4)}, str(path))
    with pytest.raises(LoraMismatchError, match="belong to no LoRA algorithm mixkit applies") as error:
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])
    assert "GLoRA" in str(error.value) and "base model" not in str(error.value)
