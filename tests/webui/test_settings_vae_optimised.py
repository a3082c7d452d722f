"""Settings -> SD VAE on a model a performance preset changed: the new weights go into the existing VAE (A1111's
`sd_vae._load_vae_dict` loads them in place), so the preset's half-precision storage and slicing stay, and so does
what the infotext's `Optimization` label says (hunt: a swap put a plain float32 VAE under the `low-memory` label)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from webui.ui.settings_tab import switch_vae

from .test_settings_vae import generate, vae_server


@pytest.fixture(scope="module")
def state(tiny_sd1_dir, tmp_path_factory):
    from diffusers import AutoencoderKL

    root = tmp_path_factory.mktemp("vae-optimised")
    (root / "vaes").mkdir()
    AutoencoderKL(block_out_channels=[8, 8, 16, 32], in_channels=3, out_channels=3,  # another architecture
                  down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                  latent_channels=4, norm_num_groups=4, sample_size=64, layers_per_block=1).save_pretrained(
        root / "vaes" / "wider-vae")
    settings = root / "config.json"
    settings.write_text(json.dumps({"performance_preset": "low-memory"}))
    server = vae_server(tiny_sd1_dir, root, settings_file=str(settings))
    yield server
    server.close()


def test_the_swap_keeps_what_the_preset_did_to_the_vae(state):
    model = state.holder.txt2img().model
    vae, dtypes = model.vae, {p.dtype for p in model.vae.parameters()}
    own_image, own_text = generate(state)
    assert "low-memory" in own_text and torch.float16 in dtypes

    switch_vae(state, "other-vae")
    assert model.vae is vae and {p.dtype for p in model.vae.parameters()} == dtypes
    other_image, other_text = generate(state)
    assert np.abs(other_image - own_image).max() > 0 and "VAE: other-vae" in other_text and "low-memory" in other_text

    switch_vae(state, "Automatic")
    assert model.vae is vae
    back_image, back_text = generate(state)
    assert np.array_equal(back_image, own_image) and back_text == own_text


def test_a_vae_of_another_architecture_is_refused_before_anything_is_copied(state):
    """QA: `load_state_dict` copies every tensor that fits before it raises on the rest, which left a failed swap's
    VAE half overwritten; the layouts are compared first."""
    import gradio as gr

    model = state.holder.txt2img().model
    before = {key: tensor.clone() for key, tensor in model.vae.state_dict().items()}
    with pytest.raises(gr.Error, match=r"wider-vae.*does not fit the loaded model's VAE .*Still using"):
        switch_vae(state, "wider-vae")
    after = model.vae.state_dict()
    assert all(torch.equal(before[key], after[key]) for key in before) and state.holder.vae_name == "Automatic"

