"""The Extras tab's training-data accordions (A1111's "Split oversized images", "Auto focal point crop", "Create
flipped copies", "Caption"; labels, ranges and defaults as its postprocessing scripts), and the job step running them.

The steps run inside the Extras job after the upscale, its crop and face restoration (`pipelines.extras_training`),
so one source may give several pictures; the BLIP captioner is the server's Interrogate CLIP caption model (AppFlow's
`image2text_generation` with Settings > Interrogate's lengths), Deepbooru its Interrogate DeepBooru (offered, and
A1111's default choice, when the server was started with `--deepdanbooru-models-path`; its tags come first, as
A1111's); the focal crop's faces come from the RetinaFace of the configured face restorers (none configured: faces
are not looked for). A1111's "Action for existing captions" setting is "Ignore" here: a caption replaces the `.txt`.
"""

from __future__ import annotations

import gradio as gr

from webui.ui.form_components import form_slider

CONTROL_COUNT = 12  # the values `training_controls` returns, in `training_steps_from_form`'s order


def caption_choices(state) -> tuple[list[str], list[str]]:
    """(the Caption choices, the default ones): A1111's Deepbooru and BLIP with Deepbooru chosen when the server has
    a DeepDanbooru tagger, else BLIP alone."""
    if state is not None and state.deepbooru is not None:
        return ["Deepbooru", "BLIP"], ["Deepbooru"]
    return ["BLIP"], ["BLIP"]


def training_controls(state=None) -> list:
    """Build the four accordions; returns their controls in `training_steps_from_form`'s order."""
    from pipelines.focal_crop import FocalWeights
    from pipelines.split_oversized import DEFAULT_OVERLAP_RATIO, DEFAULT_SPLIT_THRESHOLD, MAX_OVERLAP_RATIO

    weights = FocalWeights()
    with gr.Accordion("Split oversized images", open=False, elem_id="extras_split_oversized"):
        split = gr.Checkbox(False, label="Split oversized images", elem_id="postprocess_split_enable")
        with gr.Row():
            threshold = form_slider(0.0, 1.0, value=DEFAULT_SPLIT_THRESHOLD, step=0.05, label="Threshold",
                                    elem_id="postprocess_split_threshold")
            overlap = form_slider(0.0, MAX_OVERLAP_RATIO, value=DEFAULT_OVERLAP_RATIO, step=0.05, label="Overlap ratio",
                                  elem_id="postprocess_overlap_ratio")
    with gr.Accordion("Auto focal point crop", open=False, elem_id="extras_focal_crop"):
        focal = gr.Checkbox(False, label="Auto focal point crop", elem_id="postprocess_focal_crop_enable")
        face = form_slider(0.0, 1.0, value=weights.face, step=0.05, label="Focal point face weight",
                           elem_id="postprocess_focal_crop_face_weight")
        entropy = form_slider(0.0, 1.0, value=weights.entropy, step=0.05, label="Focal point entropy weight",
                              elem_id="postprocess_focal_crop_entropy_weight")
        edges = form_slider(0.0, 1.0, value=weights.edges, step=0.05, label="Focal point edges weight",
                            elem_id="postprocess_focal_crop_edges_weight")
        debug = gr.Checkbox(False, label="Create debug image", elem_id="train_process_focal_crop_debug")
    with gr.Accordion("Create flipped copies", open=False, elem_id="extras_flipped_copies"):
        flip = gr.Checkbox(False, label="Create flipped copies", elem_id="postprocess_flip_enable")
        flips = gr.CheckboxGroup(["Horizontal", "Vertical", "Both"], value=["Horizontal"], show_label=False,
                                 elem_id="postprocess_flip_choices")
    with gr.Accordion("Caption", open=False, elem_id="extras_caption"):
        caption = gr.Checkbox(False, label="Caption", elem_id="postprocess_caption_enable")
        choices, chosen = caption_choices(state)
        missing = "" if "Deepbooru" in choices else (" Deepbooru: start the server with --deepdanbooru-models-path "
                                                     "FOLDER.")
        captions = gr.CheckboxGroup(choices, value=chosen, show_label=False, elem_id="postprocess_caption_choices",
                                    info="Written to a .txt beside each saved image." + missing)
    return [split, threshold, overlap, focal, face, entropy, edges, debug, flip, flips, caption, captions]


def training_steps_from_form(split, threshold, overlap, focal, face, entropy, edges, debug, flip, flips, caption,
                             captions):
    """The accordions' values as checked `TrainingSteps` (a disabled accordion's choices are ignored, as A1111's)."""
    from pipelines.extras_training import TrainingSteps, check_training_steps
    from pipelines.focal_crop import FocalWeights

    return check_training_steps(TrainingSteps(
        split=bool(split), split_threshold=float(threshold), overlap_ratio=float(overlap), focal_crop=bool(focal),
        focal_weights=FocalWeights(float(face), float(entropy), float(edges)), focal_debug=bool(focal and debug),
        flips=tuple(flips or ()) if flip else (), captions=tuple(captions or ()) if caption else ()))


def training_job_step(state, body, steps, targets: list, faces_after):
    """The Extras job's step after each upscale: A1111's crop, face restoration (`faces_after`, or None), then the
    training steps; returns the pictures (`TrainingImage`s). `targets` are the sources' target sizes, in job order."""
    from pipelines.extras_training import run_training_steps
    from webui.api_extras import crop_to, crops_to_size

    captioner = server_captioner(state) if "BLIP" in steps.captions else None
    deepbooru = server_deepbooru(state) if "Deepbooru" in steps.captions else None
    face_finder = None
    if steps.focal_crop and steps.focal_weights.face > 0:
        from pipelines.focal_crop import face_finder_from_restorers

        face_finder = face_finder_from_restorers()
    remaining = iter(targets)

    def after(image):
        if faces_after is not None:
            image = faces_after(image)  # crops first, as `webui.api_extras.extras_postprocess` does
        elif crops_to_size(body):
            image = crop_to(image, body.upscaling_resize_w, body.upscaling_resize_h)
        return run_training_steps(image, steps, next(remaining), captioner=captioner, deepbooru=deepbooru,
                                  face_finder=face_finder)

    return after


def server_deepbooru(state):
    """The server's Interrogate DeepBooru as a tagger, under Settings > Interrogate as they are at each caption;
    refused before queueing (ValueError naming the flag) when the server has no tagger."""
    from webui.interrogation import DEEPBOORU_UNAVAILABLE, deepbooru_now

    if state.deepbooru is None:
        raise ValueError(f"Caption: Deepbooru: {DEEPBOORU_UNAVAILABLE}")

    def deepbooru(image) -> str:
        return deepbooru_now(state, image)

    return deepbooru


def server_captioner(state):
    """The server's Interrogate CLIP caption model as a captioner (`state.captioner`: dropped after the job unless
    Settings > Interrogate keeps it in memory)."""
    settings = state.options.interrogate_settings()
    options = settings.caption_options()

    def caption(image) -> str:
        return state.captioner.caption(image.convert("RGB"), options, settings.keep_models_in_memory).strip()

    return caption
