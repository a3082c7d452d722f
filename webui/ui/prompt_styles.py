"""A1111's "Styles" control of the txt2img and img2img tabs: a multi-select of the `--styles-file` styles, a 🔄
to reread the file, and the 📋 button that writes the chosen styles into the prompt boxes.

Chosen styles are merged at generation by the HTTP API's own `webui.api_convert.with_styles` (and, for the Hires
prompts, by `webui.api_hires.hires_params`), so a UI image and an API image with the same `styles` are the same image. As in
A1111, the dropdown holds style *names*: the merge happens when Generate is pressed, on the prompt as it is then.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import gradio as gr

from webui.server_state import ServerState

APPLY_ICON = "\U0001f4cb"  # A1111's 📋 "Apply all selected styles to the prompts" (modules/ui_prompt_styles.py)
REFRESH_ICON = "\U0001f504"


@dataclass
class StylesControls:
    dropdown: object
    apply: object
    refresh: object


def read_styles(state: ServerState):
    """The server's StyleLibrary, or None without `--styles-file`; a file that cannot be read is a ValueError
    naming it, so the UI refuses in one line (ModelNotFoundError is an OSError, which the handlers do not catch)."""
    try:
        return state.styles()
    except OSError as error:
        raise ValueError(f"{error}; fix --styles-file or restart the server without it") from None


def style_choices(state: ServerState) -> tuple[list[str], str]:
    """(style names, label) for the dropdown; without names the label says why, e.g. there is no styles file."""
    if not state.config.styles_file:
        return [], "Styles (this server has no styles file; start it with --styles-file styles.csv)"
    try:
        library = read_styles(state)
    except ValueError as error:
        return [], f"Styles (unreadable: {error})"
    return library.names(), "Styles"


def merged_prompts(prompt: str, negative_prompt: str, chosen: list[str] | None, library) -> tuple[str, str]:
    """(prompt, negative prompt) with the chosen styles merged exactly as the API merges a request's `styles`
    (`with_styles`: its messages for unknown names and for a server without a styles file)."""
    from webui.api_convert import with_styles
    from webui.api_requests import Txt2ImgRequest

    request = Txt2ImgRequest(prompt=prompt or "", negative_prompt=negative_prompt or "", styles=list(chosen or []))
    return with_styles(request, request.prompt, library)


def styled_params(params, chosen: list[str] | None, library):
    """`params` with the chosen styles merged into its prompt and negative prompt (unchanged when none is chosen)."""
    if not chosen:
        return params
    prompt, negative_prompt = merged_prompts(params.prompt, params.negative_prompt, chosen, library)
    return replace(params, prompt=prompt, negative_prompt=negative_prompt)


def materialize_styles(prompt: str, negative_prompt: str, chosen: list[str] | None,
                       library) -> tuple[str, str, list]:
    """A1111's 📋 (`materialize_styles`): (prompt, negative prompt, selection) with the styles written into the boxes
    and the selection cleared, so the next Generate gives the same image without merging them a second time."""
    return (*merged_prompts(prompt, negative_prompt, chosen, library), [])


def build_styles_controls(state: ServerState, kind: str) -> StylesControls:
    """The Styles row; without a styles file the dropdown is disabled, its label says why, and the buttons are hidden."""
    names, label = style_choices(state)
    has_file = bool(state.config.styles_file)
    with gr.Row(equal_height=True):
        dropdown = gr.Dropdown(names, value=[], multiselect=True, label=label, interactive=has_file, scale=4,
                               elem_id=f"{kind}_styles")
        refresh = gr.Button(REFRESH_ICON, scale=0, min_width=40, visible=has_file, elem_id=f"{kind}_styles_refresh")
        apply = gr.Button(APPLY_ICON, scale=0, min_width=40, visible=has_file, elem_id=f"{kind}_styles_apply")
    return StylesControls(dropdown, apply, refresh)


def wire_styles_controls(state: ServerState, controls: StylesControls, prompt, negative_prompt) -> None:
    """📋 writes the chosen styles into `prompt` / `negative_prompt` and clears the choice; 🔄 rereads the file."""
    from webui.ui.errors import refused

    def apply(prompt_text: str, negative_text: str, chosen: list):
        try:
            return materialize_styles(prompt_text, negative_text, chosen, read_styles(state) if chosen else None)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None

    def refresh():
        names, label = style_choices(state)
        # The selection stays: a name the file lost is refused, not silently dropped.
        return gr.Dropdown(choices=names, label=label)

    controls.apply.click(apply, inputs=[prompt, negative_prompt, controls.dropdown],
                         outputs=[prompt, negative_prompt, controls.dropdown], queue=False)
    controls.refresh.click(refresh, outputs=controls.dropdown, queue=False)
