"""Every LyCORIS family on tiny SD 1.x and SDXL models, against LyCORIS's own forward pass.

Oracle: the `lycoris-lora` package wraps a copy of the model with the same file's weights; each
wrapped module's output is the ground truth for our merged weights and our runtime patch.
"""

from __future__ import annotations

import pytest
import torch

from mixkit.lora import LoraRequest, apply_loras, load_lora
from tests.mixkit.lora.conftest import assert_bit_identical, make_peer_lora, relative_error, run_model, snapshot

pytest.importorskip("lycoris", reason="test dependency lycoris-lora is required for the parity tests")

# (id, algo, kwargs for lycoris.create_lycoris, expected family label)
CASES = [
    ("lora", "lora", {}, "LoRA/LoCon"),
    ("locon-tucker", "locon", {"use_tucker": True}, "LoRA/LoCon"),
    ("loha", "loha", {}, "LoHa"),
    ("loha-tucker", "loha", {"use_tucker": True}, "LoHa"),
    ("lokr-full", "lokr", {}, "LoKr"),
    ("lokr-factored-tucker", "lokr", {"use_tucker": True, "factor": 4, "decompose_both": True}, "LoKr"),
    ("ia3", "ia3", {}, "IA3"),
    ("full", "full", {}, "Full (diff)"),
    ("norm", "lora", {"train_norm": True}, "Norm"),
    ("dora-out", "lora", {"dora_wd": True}, "LoRA/LoCon + DoRA"),
    ("dora-in", "lora", {"dora_wd": True, "wd_on_output": False}, "LoRA/LoCon + DoRA"),
    ("loha-dora", "loha", {"dora_wd": True}, "LoHa + DoRA"),
    ("glora", "glora", {}, "GLoRA"),
    ("diag-oft", "diag-oft", {}, "OFT"),
    ("diag-oft-constrained", "diag-oft", {"constraint": 1e-3}, "OFT"),
    ("diag-oft-rescaled", "diag-oft", {"rescaled": True}, "OFT"),
]
# Where LyCORIS's strength differs from A1111's, LyCORIS is the oracle at strength 1 only: its DoRA merge and
# rescaled OFT are not linear in the strength, A1111's and ComfyUI's are (see test_strengths.py).
FULL_STRENGTH_ONLY = ("dora-out", "dora-in", "loha-dora", "diag-oft-rescaled")


def _module_pairs(peer, ours):
    """(name, LyCORIS-wrapped module, our module, input key) for every module the file touches."""
    wrapped_roots = [peer.wrapped.unet, *peer.wrapped.text_encoders]
    our_roots = [ours.unet, *ours.text_encoders]
    pairs = []
    for index, (network, wrapped_root, our_root) in enumerate(zip(peer.networks, wrapped_roots, our_roots)):
        paths = {id(m): n for n, m in wrapped_root.named_modules()}
        ours_by_path = dict(our_root.named_modules())
        for lora in network.loras:
            path = paths[id(lora.org_module[0])]
            pairs.append((lora.lora_name, lora.org_module[0], ours_by_path[path], (index, path)))
    return pairs


def _reference_outputs(peer, model, inputs):
    """LyCORIS's output of every wrapped module on its recorded input (the ground truth)."""
    with torch.no_grad():
        return {name: wrapped(inputs[key]) for name, wrapped, _, key in _module_pairs(peer, model)}


def _check_modules(peer, model, inputs, expected=None, tolerance=1e-5):
    expected = expected or _reference_outputs(peer, model, inputs)
    for name, _, our_module, key in _module_pairs(peer, model):
        with torch.no_grad():
            actual = our_module(inputs[key])
        error = relative_error(actual, expected[name])
        assert error < tolerance, f"{name}: relative error {error:.2e}"


@pytest.mark.parametrize("case_id, algo, kwargs, label", CASES, ids=[c[0] for c in CASES])
def test_sd1_family_matches_lycoris_forward(tmp_path, sd1, sd1_inputs, case_id, algo, kwargs, label):
    peer = make_peer_lora(tmp_path, sd1, algo, seed=3, **kwargs)
    lora = load_lora(peer.path)
    assert label in lora.family_counts()
    assert not lora.unclaimed_keys
    before = snapshot(sd1)
    strength = 1.0 if case_id in FULL_STRENGTH_ONLY else 0.7
    peer.set_multiplier(strength)
    expected = _reference_outputs(peer, sd1, sd1_inputs)
    for mode in ("merge", "runtime"):
        handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(peer.path, strength, strength)], mode=mode)
        assert handle.module_count() == sum(len(n.loras) for n in peer.networks)
        _check_modules(peer, sd1, sd1_inputs, expected)
        if mode == "runtime":
            # Whole-model outputs too (UNet step and text encoder), against the LyCORIS-wrapped copy.
            for ours, reference in zip(run_model(sd1), run_model(peer.wrapped)):
                assert relative_error(ours, reference) < 1e-5
        handle.remove()
        assert_bit_identical(sd1, before)


# Every family runs on SD 1.x; SDXL re-checks the two-text-encoder naming with a few of them.
SDXL_CASES = [c for c in CASES if c[0] in ("lora", "dora-in")]


@pytest.mark.parametrize("case_id, algo, kwargs, label", SDXL_CASES, ids=[c[0] for c in SDXL_CASES])
def test_sdxl_family_matches_lycoris_forward(tmp_path, sdxl, sdxl_inputs, case_id, algo, kwargs, label):
    peer = make_peer_lora(tmp_path, sdxl, algo, seed=5, **kwargs)
    lora = load_lora(peer.path)
    assert {m.component for m in lora.modules} == {"unet", "te1", "te2"}
    before = snapshot(sdxl)
    te = 1.0 if case_id in FULL_STRENGTH_ONLY else 0.5
    peer.set_multiplier(1.0, te)
    expected = _reference_outputs(peer, sdxl, sdxl_inputs)
    for mode in ("merge", "runtime"):
        handle = apply_loras(sdxl.unet, sdxl.text_encoders, [LoraRequest(peer.path, te_weight=te, unet_weight=1.0)], mode=mode)
        _check_modules(peer, sdxl, sdxl_inputs, expected)
        handle.remove()
        assert_bit_identical(sdxl, before)


def test_per_module_alphas_are_honoured(tmp_path, sd1, sd1_inputs):
    peer = make_peer_lora(tmp_path, sd1, "lora", seed=7, per_module_alpha=True)
    lora = load_lora(peer.path)
    assert len(lora.alphas()) == 5, "fixture should carry five distinct alphas"
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(peer.path)], mode="merge")
    _check_modules(peer, sd1, sd1_inputs)
    handle.remove()


def test_kohya_text_model_prefix_resolves_on_transformers5_clip(tmp_path, sd1, sd1_inputs):
    """Real files say `lora_te_text_model_encoder_...`; transformers 5's CLIPTextModel has no `text_model`."""
    from safetensors.torch import save_file

    peer = make_peer_lora(tmp_path, sd1, "lora", seed=9)
    renamed = {k.replace("lora_te_encoder_", "lora_te_text_model_encoder_"): v for k, v in peer.state_dict.items()}
    assert renamed.keys() != peer.state_dict.keys()
    path = tmp_path / "text_model_names.safetensors"
    save_file(renamed, str(path))
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode="merge")
    _check_modules(peer, sd1, sd1_inputs)
    handle.remove()


def test_lycoris_prefix_targets_the_unet(tmp_path, sd1, sd1_inputs):
    """LyCORIS used on a bare module writes `lycoris_<path>`; those keys are UNet modules."""
    from safetensors.torch import save_file

    peer = make_peer_lora(tmp_path, sd1, "lokr", seed=10, include_te=False)
    renamed = {k.replace("lora_unet_", "lycoris_", 1): v for k, v in peer.state_dict.items()}
    path = tmp_path / "lycoris_prefix.safetensors"
    save_file(renamed, str(path))
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode="runtime")
    _check_modules(peer, sd1, sd1_inputs)
    handle.remove()
