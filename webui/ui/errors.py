"""The UI's errors: a refused input is one log line, a failed job logs its cause's traceback once.

Gradio prints a ~40-line traceback for every `gr.Error` (its `print_exception` defaults to True),
so each refused form value buried the tracebacks of real crashes in the server log. The
traceback Gradio printed was the handler's own (`raise ... from None`), never the failure's cause.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Callable

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


def show_warning(message: str, state) -> None:
    """Show `message` as a yellow toast (`gr.Warning`) with `state`'s server paths redacted, as the error pop-ups are.

    Every UI warning goes through here (a test finds any direct `gr.Warning`/`gr.Info`): a toast is read in the
    browser like an error is, so it must not tell the page the operator's folder layout either. The log keeps the
    full text for the operator."""
    logger.info("UI warning: %s", message)
    gr.Warning(_redactor(state)(message))


def show_info(message: str, state) -> None:
    """Show `message` as an info toast (`gr.Info`), redacted as `show_warning` does."""
    logger.info("UI info: %s", message)
    gr.Info(_redactor(state)(message))


def _redactor(state):
    from webui.error_paths import server_path_redactor

    return server_path_redactor(state)  # made when a message is shown (rarely): it follows the state of now


def redact_handler_errors(blocks, state) -> None:
    """Every handler of `blocks` shows its errors with `state`'s server paths redacted (`webui.error_paths`).

    The loaders' messages name files by absolute path, which the server log should keep and a browser should not
    get (the HTTP API redacts its error bodies the same way). Wrapping each registered handler once covers every
    `refused`/`failed` of today and of handlers written later. A handler's unexpected exception would reach the
    page as its `str()` too (the app is mounted with `show_error=True`), so it becomes a `failed` with the same
    redacted text; its traceback is logged once, unredacted, for the operator. Handlers a `gr.render` registers
    per page are not in `blocks.fns`: wrap them with `redacting` where they are made."""
    for block_fn in blocks.fns.values():
        if block_fn.fn is not None and not getattr(block_fn.fn, "_mixkit_redacted", False):
            block_fn.fn = redacting(block_fn.fn, state)


def _redacted(error: Exception, state) -> gr.Error:
    redact = _redactor(state)
    if isinstance(error, gr.Error):
        error.message = redact(error.message)
        error.title = redact(error.title)
        error.args = (error.message,)
        return error
    return failed(redact(str(error)), error)


def redacting(fn: Callable, state) -> Callable:
    """The handler `fn` (plain, generator, async or async generator) raising its errors with `state`'s server paths
    redacted; same signature (`functools.wraps`), so Gradio still finds its `gr.Request`/`gr.Progress` parameters."""
    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            except Exception as error:
                raise _redacted(error, state) from None
    elif inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return (yield from fn(*args, **kwargs))
            except Exception as error:
                raise _redacted(error, state) from None
    elif inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except Exception as error:
                raise _redacted(error, state) from None
    else:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as error:
                raise _redacted(error, state) from None
    wrapper._mixkit_redacted = True
    return wrapper
