"""The UI's errors: a refused input is one log line, a failed job logs its cause's traceback once.

Gradio prints a ~40-line traceback for every `gr.Error` (its `print_exception` defaults to True),
so each refused form value buried the tracebacks of real crashes in the server log. The
traceback Gradio printed was the handler's own (`raise ... from None`), never the failure's cause.
"""

from __future__ import annotations

import logging

import gradio as gr

logger = logging.getLogger("webui.ui")


def refused(message: str) -> gr.Error:
    """The error shown for input the UI or the API's checks refuse; logged as one line."""
    logger.warning("UI refused: %s", message)
    return gr.Error(message, print_exception=False)


def failed(message: str, cause: BaseException) -> gr.Error:
    """The error shown for a job that failed; the cause's traceback is logged once."""
    logger.error("UI job failed: %s", message, exc_info=cause)
    return gr.Error(message, print_exception=False)
