"""A UI paste's VAE note: none when the image's VAE decodes now, the listed value to choose, or "not on this server".

A1111 (modules/infotext_utils.py, `connect_paste` -> `paste_settings`) turns the infotext's `VAE:` into an
`sd_vae` override only when it differs from the current setting (`if v == current_value: continue`); here that
setting is not a form field, so a difference is named in a note, and no difference gives no note.
"""

from __future__ import annotations

import pytest

from .test_ui_send_to import outputs_by_id
from .ui_blocks import handler

TEXT = "x\nSteps: 2, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64, VAE hash: 8fce28cdac, VAE: {vae}, RNG: CPU"


@pytest.fixture()
def built(tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (tmp_path / "models").mkdir()
    vaes = tmp_path / "vaes"
    vaes.mkdir()
    for name in ("blue.safetensors", "green.safetensors"):
        (vaes / name).write_bytes(b"not read: listing a .safetensors VAE does not open it")
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     vae_dir=str(vaes)))
    yield state, build_ui(state)
    state.close()


def paste_notes(blocks, text: str) -> str:
    fn = handler(blocks, "txt2img_paste", "click")
    return outputs_by_id(fn, fn.fn(text, []))["txt2img_paste_notes"]


def test_no_vae_note_when_the_images_vae_is_the_one_in_use(built):
    state, blocks = built
    state.holder.vae_name = "blue.safetensors"  # what Settings > SD VAE's swap records (ModelHolder.set_vae)
    assert paste_notes(blocks, TEXT.format(vae="blue.safetensors")) == ""
    assert paste_notes(blocks, TEXT.format(vae="blue")) == ""  # mixkit's infotexts before names carried the extension


def test_another_listed_vae_names_the_value_to_choose(built):
    state, blocks = built
    state.holder.vae_name = "blue.safetensors"
    assert paste_notes(blocks, TEXT.format(vae="green")) == (
        "- VAE: the image was decoded with 'green'; choose 'green.safetensors' in Settings > SD VAE to reproduce it.")
    state.holder.vae_name = "Automatic"
    assert paste_notes(blocks, TEXT.format(vae="blue.safetensors")) == (
        "- VAE: the image was decoded with 'blue.safetensors'; choose 'blue.safetensors' in Settings > SD VAE to "
        "reproduce it.")


def test_an_unknown_vae_is_not_on_this_server(built):
    _, blocks = built
    assert paste_notes(blocks, TEXT.format(vae="kl-f8.safetensors")) == (
        "- VAE: the image was decoded with 'kl-f8.safetensors', which is not on this server (not listed in Settings > "
        "SD VAE); the image will differ.")


class PipelineWithSideCarVae:
    """A loaded single file whose "Automatic" VAE is the `<name>.vae.safetensors` next to it (as the loader records)."""

    def __init__(self, source: str) -> None:
        self.model = self
        self.vae = object()
        self.extras = {"vae_name": "m.vae.safetensors"}


def test_no_vae_note_for_the_side_car_vae_that_automatic_loaded(tmp_path):
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    models = tmp_path / "models"
    models.mkdir()
    (models / "m.safetensors").write_bytes(b"weights")
    (models / "m.vae.safetensors").write_bytes(b"vae weights")  # listed in SD VAE, as A1111 lists it
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out")))
    try:
        state.holder = ModelHolder(state.catalog, loader=lambda source, preset: PipelineWithSideCarVae(source))
        state.holder.switch("m.safetensors")
        blocks = build_ui(state)
        assert state.holder.vae_name == "Automatic" and "m.vae.safetensors" in state.vaes.names()
        assert paste_notes(blocks, TEXT.format(vae="m.vae.safetensors")) == ""
    finally:
        state.close()
