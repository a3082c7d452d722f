"""The AppFlow tab in a real browser: a music app's run ends with its clip in the tab's audio player, served as the
.wav the run wrote (headless Chromium, as tests/webui/test_browser.py; skipped, with the reason, without it)."""

from __future__ import annotations

import io
import wave

import pytest

from .test_browser import CHROMIUM, headless_chromium

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (run .ci/install-browser.sh)")
APP = "music_generation"


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tiny_audioldm_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("browser-audio")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"),
                          appflow_models={APP: {"audio_generator": str(tiny_audioldm_dir)}})
    with serving(config, load_model=False) as running:
        yield running


def test_the_music_apps_clip_plays_in_the_appflow_tab(ui_server, tmp_path):
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui_server.url + "/", timeout=60_000)
        page.get_by_role("tab", name="AppFlow").click()
        page.locator("#appflow_app input").click()
        page.locator("ul[role=listbox] li", has_text=APP).first.click()
        page.get_by_text(f"{APP}:", exact=False).first.wait_for(timeout=30_000)
        page.locator("#appflow_input_prompt textarea").fill("a cello")
        page.locator("#appflow_run").click()
        page.locator("#appflow_progress", has_text=f"Done: {APP}, 0 image(s) and 1 audio clip(s)").wait_for(
            timeout=120_000)
        # Gradio's player (a waveform view over an <audio>) and its download link serve the run's .wav
        sync_api.expect(page.locator("#appflow_audio audio")).to_have_count(2, timeout=30_000)
        link = page.locator("#appflow_audio a[data-testid=download-link]")
        source = link.get_attribute("href")
        assert source.endswith("/audio.wav") and link.get_attribute("download") == "audio.wav", source
        wav = page.request.get(source).body()
        with wave.open(io.BytesIO(wav), "rb") as file:  # the tiny model's native length at 16 kHz
            assert (file.getframerate(), file.getnframes(), file.getsampwidth()) == (16000, 64, 2)
        assert errors == []


def test_every_clip_of_a_batch_can_be_picked_and_played(ui_server, tmp_path):
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui_server.url + "/", timeout=60_000)
        page.get_by_role("tab", name="AppFlow").click()
        page.locator("#appflow_app input").click()
        page.locator("ul[role=listbox] li", has_text=APP).first.click()
        page.get_by_text(f"{APP}:", exact=False).first.wait_for(timeout=30_000)
        page.locator("#appflow_input_prompt textarea").fill("a cello")
        clips_per_prompt = page.locator("#appflow_option_batch_size input[type=number]")
        clips_per_prompt.fill("2")
        clips_per_prompt.press("Enter")
        page.locator("#appflow_run").click()
        page.locator("#appflow_progress", has_text=f"Done: {APP}, 0 image(s) and 2 audio clip(s)").wait_for(
            timeout=120_000)
        picker = page.locator("#appflow_audio_clips")
        sync_api.expect(picker.locator("input[type=radio]")).to_have_count(2, timeout=30_000)
        link = page.locator("#appflow_audio a[data-testid=download-link]")
        first = link.get_attribute("href")
        assert first.endswith("/audio.wav"), first
        picker.get_by_text("Clip 2: audios-01.wav").click()
        sync_api.expect(link).to_have_attribute("download", "audios-01.wav", timeout=30_000)
        second = link.get_attribute("href")
        # the second clip's own file (the tiny vocoder's ~1e-6 samples are silent in 16-bit PCM, so the files, not
        # their bytes, tell the clips apart; tests/webui/test_appflow_audio.py compares the samples)
        assert second.endswith("/audios-01.wav") and second != first, second
        with wave.open(io.BytesIO(page.request.get(second).body()), "rb") as file:
            assert (file.getframerate(), file.getnframes()) == (16000, 64)
        assert errors == []
