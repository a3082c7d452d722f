"""The Extras tab's upscale as a UI task: one queued job for the image (or the "Batch Process" files), whose result
files are cropped, given their chunks and saved when the job ends, whether or not a page still watches, so a
reloaded page (or one opened after the tab closed) follows it by its task id and shows them (`webui.ui.reattach`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gradio as gr

from webui.server_state import ServerState
from webui.ui.progress_view import job_status, progress_html

OUTPUT_COUNT = 6  # progress, result image, batch gallery, sizes, postprocessing text, task box


@dataclass
class ExtrasResult:
    """A finished upscale: its PNG files in order, "WxH -> WxH" per image, and the last image's postprocessing text
    (A1111's run_extras shows that one)."""

    paths: list[str]
    sizes: list[str]
    postprocessing: str
    batch: bool  # "Upscale all": shown in the batch gallery, not the result image
    requested: int  # the sources: more than `finished` when the job was interrupted between two
    finished: int | None = None  # the sources done (None: one file each, so len(paths)); a source may give several


def extras_finish(state: ServerState, sources: list, pixels: list, body, cache_dir, *, batch: bool) -> Callable:
    """The task's `finish`: the job's upscaled images (one per source) cropped as the request asks ("Scale to" with
    "Crop to fit"), each with its source's chunks plus `postprocessing`, saved to the output folder when "Save
    generated images" is on (A1111's Extras saves), else as PNGs in Gradio's cache. A source the training steps made
    several pictures of (a list of `TrainingImage`s, already cropped) is saved as each, under A1111's suffixes
    (`00008-1.png`), with its caption's `.txt` when saving is on; several pictures are shown in the gallery."""
    from pipelines.extras_training import TrainingImage, file_suffixes, write_caption
    from webui.api_extras import crop_to, crops_to_size, request_postprocessing_text
    from webui.ui.extras_output import POSTPROCESSING_KEY, extras_chunks, save_extras_png, save_extras_png_numbered
    from webui.ui.gallery_files import result_folder

    def finish(upscaled: list) -> ExtrasResult:
        text = request_postprocessing_text(body)
        paths, sizes, shown = [], [], ""
        folder = None if state.options.get("samples_save") else result_folder(cache_dir, "mixkit-extras")
        writing = state.options.infotext_writing()  # enable_pnginfo / save_txt, as A1111's Extras save
        for number, (source, image, result) in enumerate(zip(sources, pixels, upscaled)):
            if isinstance(result, list):  # the training steps' pictures, cropped before them in the job
                pictures = result
            else:
                if crops_to_size(body):
                    result = crop_to(result, body.upscaling_resize_w, body.upscaling_resize_h)
                pictures = [TrainingImage(result)]
            chunks = extras_chunks(source, text)
            for picture, suffix in zip(pictures, file_suffixes(pictures)):
                if folder is None:
                    path = save_extras_png_numbered(picture.image, state.output_dir, chunks, writing=writing,
                                                    suffix=suffix)
                    write_caption(path, picture.caption)  # A1111 writes captions with the saved image only
                else:  # still a PNG with its chunks (unless enable_pnginfo is off), so a download keeps them; no .txt
                    path = save_extras_png(picture.image, folder / f"{number:05d}{suffix}.png",
                                           chunks if writing.pnginfo else {})
                paths.append(str(path))
                sizes.append(f"{image.width}x{image.height} -> {picture.image.width}x{picture.image.height}")
            shown = chunks[POSTPROCESSING_KEY]
        return ExtrasResult(paths, sizes, shown, batch or len(paths) > len(sources), requested=len(sources),
                            finished=len(upscaled))

    return finish


def upscaling_text(snapshot) -> str:
    """What the progress line says while the job runs: which image of how many (a single one: just "Upscaling")."""
    if snapshot.total_steps > 1:
        return f"Upscaling image {min(snapshot.step + 1, snapshot.total_steps)}/{snapshot.total_steps}"
    return "Upscaling..."


def follow_extras(state: ServerState, task):
    """The Extras tab's outputs for its upscale `task` until it ends, then its result image (or batch gallery), the
    sizes and the postprocessing text."""
    from webui.ui.reattach import follow_ui_task

    def running(task) -> tuple:
        return progress_html(*job_status(state, task.job, upscaling_text)), *[gr.skip()] * 4

    def shown(task) -> tuple:
        result: ExtrasResult = task.result
        count = len(result.paths)
        finished = count if result.finished is None else result.finished
        label = "Interrupted" if finished < result.requested else "Done"
        done = progress_html(1.0, f"{label}: {count} image(s) in {task.seconds:.1f}s")
        if result.batch:
            return done, gr.skip(), [(path, None) for path in result.paths], "; ".join(result.sizes), \
                result.postprocessing
        return done, (result.paths[0] if result.paths else None), gr.skip(), "; ".join(result.sizes), \
            result.postprocessing

    return follow_ui_task(task, OUTPUT_COUNT, running, shown)
