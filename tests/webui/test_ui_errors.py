"""Refused UI input is one log line, not Gradio's traceback; a failed job logs its cause's traceback."""

from __future__ import annotations

import logging

import gradio as gr

from webui.ui.errors import failed, refused


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

