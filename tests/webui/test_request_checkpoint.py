"""A request's own checkpoint (`webui.request_checkpoint`): loaded for the job, the server's put back after (or kept),
a failed load leaving the server's in place; with fake loaders that record what was loaded when."""

from __future__ import annotations

import json

import pytest

from webui.request_checkpoint import CheckpointLoadError, checkpoint_for_job


class FakePipeline:
    def __init__(self, name: str) -> None:
        self.name, self.native_size, self.model_hash = name, 64, f"hash-{name}"
        self.model = self


@pytest.fixture
def state(tmp_path):
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState

    models = tmp_path / "models"
    models.mkdir()
    for name in ("a", "b", "broken"):
        (models / f"{name}.safetensors").write_bytes(name.encode())
    settings = tmp_path / "settings.json"
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"),
                                     settings_file=str(settings)))
    state.loads = []

    def loader(source: str, preset: str):
        name = source.rsplit("/", 1)[-1].split(".")[0]
        state.loads.append(name)
        if name == "broken":
            raise OSError("header too large")
        return FakePipeline(name)

    state.holder = ModelHolder(state.catalog, loader=loader, memory_probe=lambda device: 10**12)
    state.switch_checkpoint("a.safetensors")
    state.loads.clear()
    yield state
    state.close()


def running(state) -> str:
    return state.holder.txt2img().name


def saved_checkpoint(state):
    return json.loads(open(state.options.settings_file).read()).get("sd_model_checkpoint")


def test_the_request_runs_on_its_checkpoint_and_the_servers_is_loaded_back(state):
    with checkpoint_for_job(state, state.requested_checkpoint("b")):
        assert running(state) == "b" and state.model_title == "b.safetensors"
    assert running(state) == "a" and state.loads == ["b", "a"]
    assert saved_checkpoint(state) == "a.safetensors"  # the settings file never named b


def test_restore_afterwards_false_keeps_the_requests_checkpoint_and_remembers_it(state):
    with checkpoint_for_job(state, state.requested_checkpoint("b.safetensors"), restore=False):
        pass
    assert running(state) == "b" and state.loads == ["b"]
    assert saved_checkpoint(state) == "b.safetensors"


def test_a_failing_generation_still_puts_the_servers_checkpoint_back(state):
    with pytest.raises(ValueError, match="clip_skip"):
        with checkpoint_for_job(state, state.requested_checkpoint("b")):
            raise ValueError("clip_skip must be an int in 1..5")
    assert running(state) == "a" and state.loads == ["b", "a"]


def test_a_checkpoint_that_fails_to_load_leaves_the_servers_loaded_and_runs_nothing(state):
    ran = []
    with pytest.raises(CheckpointLoadError, match=r"Could not load checkpoint 'broken.safetensors' \(override_settings"
                                                  r"\.sd_model_checkpoint\): header too large; the server's checkpoint "
                                                  r"'a.safetensors' is unchanged"):
        with checkpoint_for_job(state, state.requested_checkpoint("broken")):
            ran.append(True)
    assert not ran and running(state) == "a" and state.loads == ["broken"]


def test_the_servers_own_checkpoint_is_not_reloaded(state):
    for name in ("a", "a.safetensors", "hash-a", None, ""):
        with checkpoint_for_job(state, state.requested_checkpoint(name)):
            assert running(state) == "a"
    assert state.loads == []


def test_an_unloaded_server_checkpoint_is_reloaded_for_a_job_and_stays_unloaded_under_another_requests(state):
    state.holder.unload()
    with checkpoint_for_job(state, None):
        assert running(state) == "a"
    assert state.holder.loaded and state.loads == ["a"]  # a generation reloads it, as A1111's does; it stays
    state.holder.unload()
    with checkpoint_for_job(state, state.requested_checkpoint("b")):
        assert running(state) == "b"
    assert state.holder.unloaded and state.model_title == "a.safetensors" and state.loads == ["a", "b"]


def test_an_unknown_checkpoint_is_refused_before_queueing_listing_the_checkpoints(state):
    with pytest.raises(ValueError, match=r"^override_settings\.sd_model_checkpoint: Unknown checkpoint 'c'; available: "
                                         r"a\.safetensors, b\.safetensors, broken\.safetensors"):
        state.submit_generation("txt2img", object(), save=False, checkpoint="c")
    assert state.worker.queued == 0


def test_a_vae_that_does_not_fit_the_requests_checkpoint_keeps_the_servers_vae_choice(state, tmp_path):
    """The chosen sd_vae falls back to the request's checkpoint's own VAE for the job only: the setting (and the
    settings file) keep it, and the server's checkpoint gets it back."""
    vae_file = tmp_path / "mine.vae.safetensors"
    vae_file.write_bytes(b"vae")
    applied = []

    def set_vae(name, path):
        if running(state) == "b":
            raise ValueError("VAE 'mine' does not fit the loaded model's VAE")
        applied.append((running(state), name))
        state.holder.vae_name = name
        return name

    state.holder.set_vae = set_vae
    state.vaes.find = lambda name: vae_file
    state.options.apply({"sd_vae": "mine"})
    state.holder.vae_name = "mine"
    with checkpoint_for_job(state, state.requested_checkpoint("b")):
        assert state.holder.vae_name == "Automatic"  # b decodes with its own VAE
    assert state.options.get("sd_vae") == "mine"
    assert json.loads(open(state.options.settings_file).read())["sd_vae"] == "mine"
    assert running(state) == "a" and state.holder.vae_name == "mine" and applied == [("a", "mine")]
