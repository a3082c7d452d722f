"""End to end in a real browser: type a prompt, Generate, wait for the gallery, read the infotext in PNG Info;
a reloaded page, or one opened after the tab closed, reattaches to its running generation.

Runs headless Debian Chromium through Playwright's Python package (`.ci/install-browser.sh`
installs both); skipped, with the reason, only when either is missing.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (run .ci/install-browser.sh)")


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    root = tmp_path_factory.mktemp("browser")
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), preview_every=1))
    # Settings defaults the page starts from (and the values the first test types in anyway).
    state.options.apply(state.options.check_update({"default_steps": 2, "default_width": 64, "default_height": 64}))
    with serving(state) as running:
        yield running


def playwright_api():
    """Playwright's sync API; the test is skipped, saying what to run, when the package is missing."""
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed (run .ci/install-browser.sh)")


@contextmanager
def headless_chromium(tmp_path):
    """(Playwright's sync API, a headless Chromium context with its own profile under `tmp_path`); closed on exit."""
    sync_api = playwright_api()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1280, "height": 900})
        try:
            yield sync_api, browser
        finally:
            browser.close()


def open_txt2img(browser, url: str):
    """A new page on the UI, once its txt2img prompt box is there."""
    page = browser.new_page()
    page.goto(url + "/", timeout=60_000)
    page.locator("#txt2img_prompt textarea").wait_for(timeout=60_000)
    return page


def set_number(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def test_generate_in_the_browser_and_read_infotext_in_png_info(ui_server, tmp_path):
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = open_txt2img(browser, ui_server.url)
        sync_api.expect(page.locator("#txt2img_steps input[type=number]")).to_have_value("2", timeout=30_000)
        sync_api.expect(page.locator("#txt2img_width input[type=number]")).to_have_value("64", timeout=30_000)
        page.locator("#txt2img_prompt textarea").fill("a red cube on a table")
        set_number(page, "txt2img_steps", 2)
        set_number(page, "txt2img_width", 64)
        set_number(page, "txt2img_height", 64)
        set_number(page, "txt2img_seed", 4242)
        page.locator("#txt2img_generate").click()
        page.locator("#txt2img_gallery img").first.wait_for(timeout=120_000)
        page.locator("#txt2img_progress", has_text="Done: 1 image(s)").wait_for(timeout=30_000)
        infotext = page.locator("#txt2img_infotext textarea").input_value()
        assert infotext.startswith("a red cube on a table\nSteps: 2, ") and "Seed: 4242," in infotext
        page.screenshot(path=str(tmp_path / "txt2img.png"), full_page=True)

        saved = sorted(ui_server.state.output_dir.glob("*.png"))
        assert len(saved) == 1 and saved[0].name.endswith("-4242.png")
        page.get_by_role("tab", name="PNG Info").click()
        page.locator("#pnginfo_image input[type=file]").set_input_files(str(saved[0]))
        read = page.locator("#pnginfo_infotext textarea")
        sync_api.expect(read).to_have_value(infotext, timeout=30_000)

        page.locator("#pnginfo_send_to_img2img").click()
        sync_api.expect(page.locator("#img2img_prompt textarea")).to_have_value("a red cube on a table", timeout=30_000)
        sync_api.expect(page.locator("#img2img_seed input")).to_have_value("4242", timeout=30_000)
        page.screenshot(path=str(tmp_path / "pnginfo_sent.png"), full_page=True)
    shots = os.environ.get("MIXKIT_SCREENSHOT_DIR")
    if shots:  # CI keeps them as artifacts
        for name in ("txt2img.png", "pnginfo_sent.png"):
            shutil.copy(tmp_path / name, os.path.join(shots, name))
    assert (tmp_path / "txt2img.png").stat().st_size > 10_000


def kept_task_id(page, kind: str = "txt2img"):
    """The task id the page keeps in the browser's localStorage (None: none)."""
    return page.evaluate(f"() => localStorage.getItem('mixkit_{kind}_task_id')")


def start_long_generation(sync_api, page, prompt: str, steps: int, side: int | None = None) -> None:
    """`side`: a larger picture, so the run outlasts closing and reopening a page on a loaded machine (1000 steps at
    64 px took 14 s, and a reopened page that attached after the end saw "Done", never "Step ")."""
    page.locator("#txt2img_prompt textarea").fill(prompt)
    if side is not None:
        set_number(page, "txt2img_width", side)
        set_number(page, "txt2img_height", side)
        sync_api.expect(page.locator("#txt2img_height input[type=number]")).to_have_value(str(side), timeout=30_000)
    set_number(page, "txt2img_steps", steps)
    set_number(page, "txt2img_seed", 4321)
    sync_api.expect(page.locator("#txt2img_steps input[type=number]")).to_have_value(str(steps), timeout=30_000)
    page.locator("#txt2img_generate").click()
    page.locator("#txt2img_progress", has_text="Step ").wait_for(timeout=60_000)


def test_a_reloaded_page_reattaches_to_its_generation_and_shows_its_images(ui_server, tmp_path):
    # A1111 1.6+ keeps the task id in localStorage and restores the task after a reload; a reload used to end the
    # page's session, which interrupted the generation, and the reloaded page showed nothing of it.
    state = ui_server.state
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = open_txt2img(browser, ui_server.url)
        try:
            start_long_generation(sync_api, page, "a reloaded cube", 400)
            task_id = kept_task_id(page)
            task = state.tasks.find(task_id, None)
            assert task is not None and not task.done.is_set()
            page.reload()
            page.locator("#txt2img_prompt textarea").wait_for(timeout=60_000)
            done = page.locator("#txt2img_progress", has_text="Done: 1 image(s)")
            done.wait_for(timeout=180_000)
        finally:
            state.worker.interrupt()  # never leave a long job behind for later tests
        assert not task.job.control.interrupted and task.result.image_count == 1  # it ran to its end
        page.locator("#txt2img_gallery img").first.wait_for(timeout=30_000)
        infotext = page.locator("#txt2img_infotext textarea").input_value()
        assert infotext.startswith("a reloaded cube\nSteps: 400, ") and "Seed: 4321," in infotext
        assert infotext == task.result.infotexts[0]
        sync_api.expect(page.locator("#txt2img_task_id textarea")).to_have_value("ended " + task_id, timeout=30_000)
        assert kept_task_id(page) is None  # shown: the next load starts clean
        page.reload()
        page.locator("#txt2img_progress", has_text="Idle").wait_for(timeout=60_000)


def test_a_page_opened_after_the_tab_closed_reattaches_and_can_interrupt(ui_server, tmp_path):
    state = ui_server.state
    with headless_chromium(tmp_path) as (sync_api, browser):
        try:
            page = open_txt2img(browser, ui_server.url)
            start_long_generation(sync_api, page, "a long one", 1000, side=256)
            task = state.tasks.find(kept_task_id(page), None)
            page.close()  # its session ends; the generation goes on
            page = open_txt2img(browser, ui_server.url)
            page.locator("#txt2img_progress", has_text="Step ").wait_for(timeout=60_000)
            assert not task.job.control.interrupted and not task.done.is_set()
            page.locator("#txt2img_interrupt").click()
            page.locator("#txt2img_progress", has_text="Interrupted: 1 image(s)").wait_for(timeout=60_000)
        finally:
            state.worker.interrupt()
    assert task.result.interrupted and task.job.control.interrupted


EMPTY_EDITOR_TEXT = "Upload an image"  # Gradio's ImageEditor placeholder, shown while it holds no picture


def put_picture_in_img2img_editor(sync_api, page, picture, attempts: int = 3) -> None:
    """Upload `picture` into the img2img ImageEditor; return once the editor holds it (a Generate then sends it).

    Why this used to flake (Gradio 6.31 ImageEditor, headless Chromium on software WebGL; timed here, the wipe read
    from Gradio's bundled editor code): the img2img tab mounts on its first click and its file input is there at once
    (0.04 s), but the editor's PixiJS canvas takes seconds to initialise (4-5 s on a loaded 2-core box). When it is
    ready, the editor's own "value is empty: reset the canvas" effect runs and can wipe a picture uploaded in the
    meantime, and its toolbar (the zoom the old wait looked for) appears then whether or not the picture survived;
    every Generate after that was refused ("Drop an image into the img2img editor first"). So the upload waits for the
    toolbar, and counts only once the editor has left its empty state: its placeholder gone and its zoom fitted to the
    picture, the last step of Gradio's upload handler. A lost upload is retried; nothing else is."""
    editor = page.locator("#img2img_image")
    zoom = editor.locator(".zoom-number")
    zoom.wait_for(state="visible", timeout=60_000)  # the canvas is initialised: an upload from now on is kept
    sync_api.expect(editor).to_contain_text(EMPTY_EDITOR_TEXT, timeout=30_000)
    empty_zoom = zoom.inner_text()
    for _ in range(attempts):
        editor.locator("input[type=file]").set_input_files(str(picture))
        try:
            sync_api.expect(editor).not_to_contain_text(EMPTY_EDITOR_TEXT, timeout=30_000)
            sync_api.expect(zoom).not_to_have_text(empty_zoom, timeout=30_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the img2img editor never took the upload of {picture} ({attempts} attempts)")


def test_a_reloaded_img2img_page_reattaches_to_its_generation(ui_server, tmp_path):
    from PIL import Image

    state = ui_server.state
    picture = tmp_path / "init.png"
    Image.new("RGB", (64, 64), (200, 60, 30)).save(picture)
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = open_txt2img(browser, ui_server.url)
        try:
            page.get_by_role("tab", name="img2img").click()
            put_picture_in_img2img_editor(sync_api, page, picture)
            page.locator("#img2img_prompt textarea").fill("a reloaded red square")
            set_number(page, "img2img_steps", 600)
            sync_api.expect(page.locator("#img2img_steps input[type=number]")).to_have_value("600", timeout=30_000)
            page.locator("#img2img_generate").click()  # once: the editor holds the picture, a refusal is a failure
            page.locator("#img2img_progress", has_text="Step ").wait_for(timeout=60_000)
            task = state.tasks.find(kept_task_id(page, "img2img"), None)
            assert task is not None and task.kind == "img2img" and not task.done.is_set()
            page.reload()
            page.get_by_role("tab", name="img2img").click()
            page.locator("#img2img_progress", has_text="Done: 1 image(s)").wait_for(timeout=180_000)
        finally:
            state.worker.interrupt()
        assert not task.job.control.interrupted and task.result.image_count == 1
        page.locator("#img2img_gallery img").first.wait_for(timeout=30_000)
        infotext = page.locator("#img2img_infotext textarea").input_value()
        assert infotext == task.result.infotexts[0] and infotext.startswith("a reloaded red square\n")
        assert kept_task_id(page, "img2img") is None


def test_appflow_form_follows_the_chosen_app(ui_server, tmp_path):
    # Switching from {prompt} to {image, prompt} used to crash the page's render (a TypeError in Gallery):
    # the old form stayed, with no input widgets for the new app.
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(ui_server.url + "/", timeout=60_000)
        page.get_by_role("tab", name="AppFlow").click()
        page.locator("#appflow_input_prompt textarea").wait_for(timeout=60_000)
        for app, inputs in (("image2image_text_guided_generation", ["image", "prompt"]),
                            ("zero_shot_classification", ["image", "labels"]), ("text2image_generation", ["prompt"])):
            page.locator("#appflow_app input").click()
            page.locator("ul[role=listbox] li", has_text=app).first.click()
            page.get_by_text(f"{app}:", exact=False).first.wait_for(timeout=30_000)
            shown = page.locator("[id^=appflow_input_]")
            sync_api.expect(shown).to_have_count(len(inputs), timeout=30_000)
            assert [element.get_attribute("id") for element in shown.all()] == [f"appflow_input_{n}" for n in inputs]
        assert errors == []


def test_a_reloaded_appflow_page_follows_its_run_and_shows_its_images(ui_server, tmp_path):
    # An AppFlow run used to end with its page: a reload interrupted it and showed nothing. The worker is held busy
    # so the run is still queued when the page reloads (no timing guess); the run is started once, by the first page.
    from .worker_jobs import submit_until_interrupted

    state = ui_server.state
    with headless_chromium(tmp_path) as (sync_api, browser):
        blocker, _ = submit_until_interrupted(state.worker, "txt2img")
        try:
            page = open_txt2img(browser, ui_server.url)
            page.get_by_role("tab", name="AppFlow").click()
            page.locator("#appflow_input_prompt textarea").fill("a blue cone")
            page.locator("#appflow_run").click()
            page.locator("#appflow_progress", has_text="Waiting in queue").wait_for(timeout=60_000)
            task_id = kept_task_id(page, "appflow")
            task = state.tasks.find(task_id, None)
            assert task is not None and task.kind == "appflow"
            page.reload()
            page.get_by_role("tab", name="AppFlow").click()
            page.locator("#appflow_progress", has_text="Waiting in queue").wait_for(timeout=60_000)
            tasks_before = len(state.tasks)
        finally:
            state.worker.interrupt_job(blocker)
        page.locator("#appflow_progress", has_text="Done: text2image_generation, 1 image(s)").wait_for(timeout=120_000)
        page.locator("#appflow_images img").first.wait_for(timeout=30_000)
        sync_api.expect(page.locator("#appflow_task_id textarea")).to_have_value("ended " + task_id, timeout=30_000)
        assert kept_task_id(page, "appflow") is None and len(state.tasks) == tasks_before  # nothing started twice
    assert task.result.app == "text2image_generation" and len(task.result.paths) == 1


def test_send_to_extras_keeps_the_png_and_its_infotext_through_the_browser(ui_server, tmp_path):
    # A1111 sends the gallery PNG to Extras and `run_postprocessing` keeps its PNG info; a WebP round trip through
    # the page used to change the pixels (up to 73 levels) and drop `parameters`.
    from PIL import Image

    from pipelines.upscale import UPSCALERS, upscale_image

    state = ui_server.state
    state.options.apply({"samples_save": True})
    before = set(state.output_dir.glob("*.png"))
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = open_txt2img(browser, ui_server.url)
        sync_api.expect(page.locator("#txt2img_steps input[type=number]")).to_have_value("2", timeout=30_000)
        page.locator("#txt2img_prompt textarea").fill("a green cone")
        set_number(page, "txt2img_seed", 777)
        page.locator("#txt2img_generate").click()
        page.locator("#txt2img_progress", has_text="Done: 1 image(s)").wait_for(timeout=120_000)
        page.locator("#txt2img_send_to_extras").click()
        page.locator("#extras_image img").wait_for(timeout=30_000)
        page.locator("#extras_generate").click()
        page.locator("#extras_info textarea").wait_for(timeout=30_000)
        sync_api.expect(page.locator("#extras_info textarea")).to_have_value(
            f"Postprocess upscale by: 2.0, Postprocess upscaler: {UPSCALERS.names()[0]}", timeout=60_000)
    made = sorted(set(state.output_dir.glob("*.png")) - before)
    generated = [path for path in made if path.name.endswith("-777.png")]
    upscaled = [path for path in made if "-" not in path.stem]
    assert len(generated) == 1 and len(upscaled) == 1, made
    with Image.open(generated[0]) as source, Image.open(upscaled[0]) as result:
        source.load()
        assert result.info["parameters"] == source.info["parameters"]
        expected = upscale_image(source.convert("RGB"), 2.0, upscaler=UPSCALERS.names()[0])
        assert result.convert("RGB").tobytes() == expected.tobytes()


def test_a_value_typed_before_the_page_load_events_land_is_kept(ui_server, tmp_path):
    # Hunt finding: Steps typed as 3 was generated with the Settings default of 20, because a page-load event set the
    # field after the form was already editable. Here every request the page makes to run an event is held back until
    # the user has typed, which is the slow case made certain; A1111 serves its defaults in the page, so nothing can
    # replace a typed value, and the page opened after a Settings change must still show the new defaults.
    state = ui_server.state
    changed = {"default_steps": 7, "default_cfg_scale": 5.5, "samples_save": False}
    before = {key: state.options.get(key) for key in changed}
    state.options.apply(state.options.check_update(changed))
    held, holding = [], [True]

    def hold_event_requests(route):
        if holding[0] and route.request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    try:
        with headless_chromium(tmp_path) as (sync_api, browser):
            page = browser.new_page()
            page.route("**/gradio_api/**", hold_event_requests)
            page.goto(ui_server.url + "/", timeout=60_000)
            steps = page.locator("#txt2img_steps input[type=number]")
            steps.wait_for(timeout=60_000)
            page.locator("#txt2img_prompt textarea").fill("a typed value")
            set_number(page, "txt2img_steps", 3)
            set_number(page, "txt2img_seed", 11)
            holding[0] = False
            for route in held:  # the page-load events (before the fix) run now, after the typing
                route.continue_()
            # an untouched field shows the Settings default of this moment (a load event's or the served page's)
            sync_api.expect(page.locator("#txt2img_cfg_scale input[type=number]")).to_have_value("5.5", timeout=30_000)
            page.wait_for_timeout(1000)  # lets any load event still in flight land: the typed value must outlive it
            sync_api.expect(steps).to_have_value("3")
            page.locator("#txt2img_generate").click()
            page.locator("#txt2img_progress", has_text="Done: 1 image(s)").wait_for(timeout=120_000)
            infotext = page.locator("#txt2img_infotext textarea").input_value()
    finally:
        state.options.apply(before)
    assert "Steps: 3," in infotext and "CFG scale: 5.5," in infotext and "Seed: 11," in infotext, infotext


def test_settings_checkpoint_dropdown_shows_the_loaded_model_and_loads_it(ui_server, tmp_path, monkeypatch):
    """The dropdown is served with the loaded (hashed) title; choosing it and pressing Load reloads it. Its
    choices were set by a page-load event before, which could land after the user had chosen."""
    import time

    state = ui_server.state
    title, switches = state.model_title, []
    submit = state.submit_model_switch
    monkeypatch.setattr(state, "submit_model_switch", lambda *args, **kwargs: switches.append(args) or submit(*args, **kwargs))
    with headless_chromium(tmp_path) as (sync_api, browser):
        page = open_txt2img(browser, ui_server.url)
        page.get_by_role("tab", name="Settings").click()
        dropdown = page.locator("#settings_checkpoint input")
        sync_api.expect(dropdown).to_have_value(title, timeout=60_000)
        dropdown.click()
        page.get_by_role("option", name=title).click()
        page.locator("#settings_load_checkpoint").click()
        started = time.monotonic()
        while not switches and time.monotonic() - started < 60:
            time.sleep(0.1)
        sync_api.expect(page.locator("#settings_status")).to_contain_text(f"Loaded: {title}", timeout=120_000)
    assert switches == [(title,)] and state.model_title == title
