"""A1111's result workflows: "Send to img2img / inpaint / extras" under a gallery, and the ↙️ paste button.

A1111 registers these with `infotext_utils.register_paste_params_button`. A gallery's Send button carries the
selected image, sets the target's width and height to the image's own size (`send_image_and_dimensions`, option
`send_size`) and copies only Prompt, Negative prompt, Steps, Face restoration and, with `send_seed`, Seed
(`paste_field_names`; both options on by default). A1111 copies those from the txt2img form; here they come from
the chosen image's infotext, so the seed is that image's, not the form's -1. The Extra seed options (variation seed
and strength, "Seed resize from") travel with the seed, where A1111 leaves the target's: without them the seed alone
does not reproduce an image made with a variation. The ↙️ button next to the prompt
parses the prompt box as a full infotext, or, when the box is empty, takes the last generation's parameters. Here
"the last generation" is this browser tab's own (several users share one server), not a server-wide params.txt.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.generate_tab import GenerateTab, apply_form_values, controlnet_unit_count, form_outputs
from webui.ui.paste_infotext import infotext_to_form_values, infotext_to_sent_values


def paste_values(state: ServerState, tab: GenerateTab, text: str, sampler_names: list[str],
                 schedule_names: list[str]) -> tuple[dict[str, object], list[str]]:
    """(form values, notes) for pasting infotext `text` into `tab`, with this server's limits, samplers, hires
    upscalers (txt2img) and LoRA files (tags re-linked by hash); the Script dropdown and X/Y/Z axes too
    (`webui.ui.paste_script_values`)."""
    upscalers = None
    if tab.hires is not None:
        from webui.ui.hires_controls import hires_upscaler_names

        upscalers = hires_upscaler_names()
    aliases = frozenset(state.holder.entry.aliases()) if state.holder.entry else frozenset()
    values, notes = infotext_to_form_values(
        text, state.limits, sampler_names, schedule_names, current_model=state.model_title,
        current_model_aliases=aliases, hires_upscalers=upscalers, lora_name_of=lora_lookup(state),
        current_emphasis=state.options.get("emphasis"), current_vae_names=state.vae_names(),
        vae_choice=state.vaes.name_for_infotext, inpaint_fields=tab.inpaint_controls is not None,
        controlnet_units=controlnet_unit_count(tab), controlnet_model_of=controlnet_lookup(state),
        refiner_checkpoint_of=checkpoint_lookup(state) if tab.refiner else None)
    if tab.scripts is not None:  # the Script dropdown and the X/Y/Z plot's axes (A1111's paste fields)
        from pipelines.infotext import parse_infotext
        from pipelines.scripts.xyz_axes import axes_for
        from webui.ui.paste_script_values import infotext_script_values

        labels = [axis.label for axis in axes_for(tab.kind)]
        script_values, script_notes = infotext_script_values(parse_infotext(text), list(tab.scripts.groups), labels)
        values, notes = {**values, **script_values}, [*notes, *script_notes]
    return values, notes


def checkpoint_lookup(state: ServerState):
    """An infotext's checkpoint title (`Refiner:`) -> this server's checkpoint title, None when it has no such one."""

    def listed(name: str) -> str | None:
        try:
            return state.catalog.find(name).title
        except ValueError:
            return None

    return listed


def controlnet_lookup(state: ServerState):
    """An infotext's ControlNet model name -> this server's ControlNet name, None when it has no such model."""
    if state.controlnets is None:
        return None

    def listed(name: str) -> str | None:
        try:
            return state.controlnets.resolve(name)
        except ValueError:
            return None

    return listed


def sent_values(state: ServerState, text: str, image_size: tuple[int, int]) -> tuple[dict[str, object], list[str]]:
    """(form values, notes) a gallery's Send to img2img/inpaint fills: prompts, steps, seed and Extra seed options of
    infotext `text`, and the sent image's size."""
    return infotext_to_sent_values(text, image_size, state.limits, lora_name_of=lora_lookup(state))


def lora_lookup(state: ServerState):
    """Short hash -> local LoRA name, for re-linking pasted `<lora:...>` tags; None without a LoRA folder."""
    if state.lora_library is None:
        return None
    from mixkit.lora.relink import library_lookup

    return library_lookup(state.lora_library)


def notes_markdown(notes: list[str]) -> str:
    return "\n".join(f"- {note}" for note in notes)


def chosen_result(gallery_items: list | None, infotexts: list, selected: int | None) -> tuple[str, str]:
    """(image file, infotext) of the gallery image the user clicked, else of the first one."""
    if not gallery_items:
        raise ValueError("There is no result to send yet; press Generate first.")
    index = selected if isinstance(selected, int) and 0 <= selected < len(gallery_items) else 0
    item = gallery_items[index]
    path = item[0] if isinstance(item, (tuple, list)) else item
    text = infotexts[index] if infotexts and index < len(infotexts) else ""
    return str(path), text or ""


def prompt_box_infotext(prompt: str | None, last_infotexts: list) -> str:
    """What the ↙️ button pastes: the prompt box as an infotext, or the last generation's when the box is empty."""
    if prompt and prompt.strip():
        return prompt
    if last_infotexts and last_infotexts[0]:
        return last_infotexts[0]
    raise ValueError("The prompt box is empty and this tab has no generation yet; paste an infotext (prompt, then "
                     "'Steps: ..., Sampler: ...') into the prompt box and press the button again.")


def wire_paste_button(state: ServerState, tab: GenerateTab, sampler_names: list[str], schedule_names: list[str]) -> None:
    """The ↙️ button next to the prompt fills `tab`'s form from the prompt box (or the last generation)."""

    def paste(prompt: str, last_infotexts: list):
        try:
            text = prompt_box_infotext(prompt, last_infotexts)
        except ValueError as error:
            raise refused(str(error)) from None
        values, notes = paste_values(state, tab, text, sampler_names, schedule_names)
        return [*apply_form_values(tab, values), notes_markdown(notes)]

    tab.paste.click(paste, inputs=[tab.widgets.prompt, tab.infotexts], outputs=[*form_outputs(tab), tab.notes],
                    queue=False)


def wire_send_buttons(state: ServerState, tabs, source: GenerateTab, img2img: GenerateTab, extras_image,
                      sampler_names: list[str], schedule_names: list[str]) -> None:
    """Connect `source`'s Send buttons: the chosen image (and, for img2img/inpaint, its size, prompts, steps, seed and
    Extra seed options) to the target."""
    from webui.ui.png_info_tab import read_upload_image

    def chosen_image(gallery_items, infotexts, selected):
        try:
            path, text = chosen_result(gallery_items, infotexts, selected)
            return read_upload_image(path, state.limits.max_pixels * 4), text
        except ValueError as error:
            raise refused(str(error)) from None

    for target in ("img2img", "inpaint"):
        def send_to_img2img(gallery_items, infotexts, selected, target=target):
            image, text = chosen_image(gallery_items, infotexts, selected)
            values, notes = sent_values(state, text, image.size)
            return [*apply_form_values(img2img, values), image, target, gr.Tabs(selected="img2img"),
                    notes_markdown(notes)]

        source.send_buttons[target].click(
            send_to_img2img, inputs=[source.gallery, source.infotexts, source.selected],
            outputs=[*form_outputs(img2img), img2img.init_image, img2img.mode, tabs, img2img.notes], queue=False)

    def send_to_extras(gallery_items, infotexts, selected):
        image, _ = chosen_image(gallery_items, infotexts, selected)
        return image, gr.Tabs(selected="extras")

    source.send_buttons["extras"].click(send_to_extras, inputs=[source.gallery, source.infotexts, source.selected],
                                        outputs=[extras_image, tabs], queue=False)
