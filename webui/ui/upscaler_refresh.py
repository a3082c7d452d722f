"""The upscaler dropdowns' refresh button: scan the upscaler model folders again (`ServerState.refresh_upscalers`).

A1111 picks up new upscaler files when its UI reloads; here the button next to a dropdown does it without a restart,
and the dropdown offers what the folders hold now (a removed file's entry gone, a new file's added).
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState

REFRESH_ICON = "\U0001f504"  # A1111's refresh button symbol


def refresh_upscaler_choices(state: ServerState, current: str | None, names) -> dict:
    """Rescan, then the dropdown's new choices (`names()` after the scan), keeping `current` if it is still one of
    them; each refused file is shown as a warning, a folder gone missing as an error (nothing changed then), their
    server paths redacted as every error the page gets."""
    from webui.ui.errors import refused, show_warning

    try:
        scan = state.refresh_upscalers()
    except NotADirectoryError as error:
        raise refused(str(error)) from None  # its path is redacted for the page (`redact_handler_errors`)
    for path, reason in scan.refused.items():
        show_warning(f"Upscaler {path} not available: {reason}", state)  # its paths redacted, as every toast
    choices = names()
    return gr.update(choices=choices, value=current if current in choices else choices[0])


def add_upscaler_refresh(state: ServerState, dropdown: gr.Dropdown, names, *, elem_id: str) -> gr.Button:
    """A refresh button (place it next to `dropdown`) that rescans and updates `dropdown`'s choices to `names()`."""
    button = gr.Button(REFRESH_ICON, scale=0, min_width=40, elem_id=elem_id)
    button.click(lambda current: refresh_upscaler_choices(state, current, names), inputs=dropdown, outputs=dropdown)
    return button
