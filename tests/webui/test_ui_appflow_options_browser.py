"""The AppFlow tab's options form in a real browser: options typed into the music app's form reach the app, a value
above the server's cap is refused with its message, and a value stays with its app across a switch (headless
Chromium, as tests/webui/test_browser.py; skipped, with the reason, without it)."""

from __future__ import annotations

import io
import wave

import pytest

from .test_browser import CHROMIUM, headless_chromium

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (run .ci/install-browser.sh)")
APP, OTHER = "music_generation", "text2image_generation"


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tiny_audioldm_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("browser-appflow-options")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"),
                          appflow_models={APP: {"audio_generator": str(tiny_audioldm_dir)}})
    with serving(config, load_model=False) as running:
        yield running


def choose(page, app: str) -> None:
    page.locator("#appflow_app input").click()
    page.locator("ul[role=listbox] li", has_text=app).first.click()
    page.get_by_text(f"{app}:", exact=False).first.wait_for(timeout=30_000)


def test_options_typed_in_the_form_reach_the_app_and_stay_with_it(ui_server, tmp_path):
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui_server.url + "/", timeout=60_000)
        page.get_by_role("tab", name="AppFlow").click()
        choose(page, APP)
        page.locator("#appflow_input_prompt textarea").fill("a cello")
        length = page.locator("#appflow_option_audio_length_in_s textarea")
        length.fill("40")  # above the server's 30 s
        length.blur()
        page.locator("#appflow_run").click()
        page.get_by_text("must be a number of seconds in (0, 30] on this server", exact=False).first.wait_for(
            timeout=60_000)
        length.fill("0.02")
        length.blur()
        steps = page.locator("#appflow_option_steps textarea")  # empty: the model's steps
        steps.fill("2")
        steps.blur()
        page.locator("#appflow_run").click()
        page.locator("#appflow_progress", has_text=f"Done: {APP}, 0 image(s) and 1 audio clip(s)").wait_for(
            timeout=120_000)
        link = page.locator("#appflow_audio a[data-testid=download-link]")
        with wave.open(io.BytesIO(page.request.get(link.get_attribute("href")).body()), "rb") as file:
            assert file.getnframes() == 320  # 0.02 s at 16 kHz, not the tiny model's native 64 samples
        choose(page, OTHER)
        page.locator("#appflow_option_batch_count").wait_for(timeout=30_000)  # the SD app's; the music app has none
        choose(page, APP)
        sync_api.expect(page.locator("#appflow_option_audio_length_in_s textarea")).to_have_value("0.02",
                                                                                                  timeout=30_000)
        sync_api.expect(page.locator("#appflow_option_steps textarea")).to_have_value("2")
        assert errors == []
