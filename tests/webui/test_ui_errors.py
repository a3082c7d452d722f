"""Refused UI input is one log line, not Gradio's traceback; a failed job logs its cause's traceback."""

from __future__ import annotations

import inspect
import logging

import gradio as gr
import pytest

from webui.ui.errors import failed, redacting, refused

from .ui_blocks import handler


def test_a_refusal_is_one_log_line_and_no_gradio_traceback(caplog):
    with caplog.at_level(logging.INFO, logger="webui.ui"):
        error = refused("Steps must be in [1, 150], got 500.")
    assert isinstance(error, gr.Error) and error.message == "Steps must be in [1, 150], got 500."
    assert error.print_exception is False  # Gradio prints a traceback for a gr.Error unless this is False
    assert [r.getMessage() for r in caplog.records] == ["UI refused: Steps must be in [1, 150], got 500."]
    assert caplog.records[0].exc_info is None


def test_a_failure_logs_the_cause_not_the_handler(caplog):
    cause = RuntimeError("CUDA out of memory")
    with caplog.at_level(logging.INFO, logger="webui.ui"):
        error = failed("Generation failed: CUDA out of memory", cause)
    assert error.print_exception is False
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info[1] is cause



@pytest.fixture()
def broken_model_ui(tmp_path):
    """A UI over a models folder holding one file that is no checkpoint, and a styles file; closed afterwards."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "broken.safetensors").write_bytes(b"not a checkpoint at all")
    (tmp_path / "styles.csv").write_text("name,prompt,negative_prompt\nPhoto,photo of {prompt},\n", encoding="utf-8")
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     styles_file=str(tmp_path / "styles.csv")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def test_switching_to_a_broken_checkpoint_shows_its_name_not_its_server_path(broken_model_ui, tmp_path, caplog):
    _, blocks = broken_model_ui
    with caplog.at_level(logging.INFO, logger="webui.ui"), pytest.raises(gr.Error) as raised:
        handler(blocks, "settings_load_checkpoint", "click").fn("broken.safetensors")
    message = raised.value.message
    assert message.startswith("Could not load 'broken.safetensors': 'broken.safetensors' is not a recognised "
                              "checkpoint (first bytes 6e 6f 74")
    assert str(tmp_path) not in message and str(tmp_path) not in str(raised.value)
    # the operator's log keeps the full path
    assert any(str(tmp_path / "models" / "broken.safetensors") in r.getMessage() for r in caplog.records)


def test_an_unknown_style_is_refused_naming_the_styles_file_not_its_folder(broken_model_ui):
    _, blocks = broken_model_ui
    with pytest.raises(gr.Error) as raised:
        handler(blocks, "txt2img_styles_apply", "click").fn("a cat", "", ["Foto"])
    assert raised.value.message == "unknown style(s) ['Foto'] in styles.csv; known styles: Photo"


def test_a_generator_handler_streams_and_its_unexpected_error_is_shown_redacted(broken_model_ui, tmp_path, caplog):
    state, _ = broken_model_ui
    missing = tmp_path / "models" / "sub" / "gone.safetensors"

    def streaming(request: gr.Request, steps: int):
        yield f"step 1 of {steps}"
        raise OSError(f"cannot open {missing}")

    wrapped = redacting(streaming, state)
    assert inspect.isgeneratorfunction(wrapped)
    assert list(inspect.signature(wrapped).parameters) == ["request", "steps"]  # Gradio still passes the request
    stream = wrapped(None, 3)
    assert next(stream) == "step 1 of 3"
    with caplog.at_level(logging.INFO, logger="webui.ui"), pytest.raises(gr.Error) as raised:
        next(stream)
    assert raised.value.message == "cannot open sub/gone.safetensors"
    (record,) = caplog.records  # logged once, with the unredacted cause
    assert isinstance(record.exc_info[1], OSError) and str(missing) in str(record.exc_info[1])


def test_a_warning_or_info_toast_names_no_server_path_and_the_log_keeps_it(broken_model_ui, tmp_path, caplog,
                                                                             monkeypatch):
    from webui.ui.errors import show_info, show_warning

    state, _ = broken_model_ui
    shown = []
    monkeypatch.setattr(gr, "Warning", lambda message, *args, **kwargs: shown.append(("warning", message)))
    monkeypatch.setattr(gr, "Info", lambda message, *args, **kwargs: shown.append(("info", message)))
    lora = tmp_path / "models" / "sub" / "x.safetensors"
    with caplog.at_level(logging.INFO, logger="webui.ui"):
        show_warning(f"The mask was resized to {lora} (64x64)", state)
        show_info(f"Saved to {tmp_path / 'out'}/00001.png, in {tmp_path / 'out'}.", state)
    assert shown == [("warning", "The mask was resized to sub/x.safetensors (64x64)"),
                     ("info", "Saved to 00001.png, in <output_dir>.")]
    assert [r.getMessage() for r in caplog.records] == [f"UI warning: The mask was resized to {lora} (64x64)",
                                                       f"UI info: Saved to {tmp_path / 'out'}/00001.png, in "
                                                       f"{tmp_path / 'out'}."]


def test_every_toast_in_the_ui_goes_through_the_redacting_helpers():
    # a direct gr.Warning / gr.Info would show its message unredacted; webui/ui/errors.py holds the only ones
    import re
    from pathlib import Path

    import webui

    root = Path(webui.__file__).parent
    direct = re.compile(r"\b(?:gr|gradio)\.(?:Warning|Info|Success)\s*\(")
    found = [f"{path.relative_to(root)}:{number}" for path in sorted(root.rglob("*.py"))
             if path != root / "ui" / "errors.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if direct.search(line)]
    assert found == []
