"""The AppFlow tab's run as a UI task: queued with the page's task id, its images written to Gradio's cache and its
other outputs encoded when the run ends, whether or not a page still watches, so a reloaded page (or one opened
after the tab closed) follows it and shows them (`webui.ui.reattach`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from webui.server_state import ServerState
from webui.ui.progress_view import job_status, progress_html

OUTPUT_COUNT = 6  # progress, images, audio player, clip picker, outputs, task box


@dataclass
class AppflowResult:
    """A finished run: its video and image files (in output order), its audio files (every clip once: the tab's
    player plays the first, its clip picker lists them all) and its other outputs as JSON."""

    app: str
    paths: list[str]
    outputs: dict
    video_count: int = 0  # the first paths are videos
    audio_paths: tuple[str, ...] = ()
    interrupted: bool = False  # Interrupt stopped the run: these are what its finished steps made


def appflow_finish(app: str, cache_dir):
    """The task's `finish`: every image among the app's outputs as a PNG under Gradio's cache (a result is kept for
    hours: files, not pictures in memory), every video as a file before them (the gallery plays it), the other
    outputs as the JSON the API answers with; every audio clip as a .wav (the tab's player plays the first), its
    bare samples (`waveform`, `result`) not repeated in the JSON, a batch's clips (`audios`) one .wav each."""
    from pipelines.png import save_png
    from webui.appflow_io import encode_app_output, output_images
    from webui.ui.gallery_files import result_folder

    def finish(outputs: dict) -> AppflowResult:
        from appflow.video import Video
        from webui.appflow_audio import (audio_of_outputs, clip_lists_of_outputs, save_audio_outputs,
                                         save_clip_list_outputs)
        from webui.appflow_video import save_video_outputs

        images = output_images(outputs)
        videos = {key: value for key, value in outputs.items() if isinstance(value, Video)}
        clips, batches = audio_of_outputs(outputs), clip_lists_of_outputs(outputs)
        folder = result_folder(cache_dir, "mixkit-appflow") if images or videos or clips or batches else None
        # a video first in the gallery, where it plays; its frames follow as images
        video_paths = save_video_outputs(videos, folder) if videos else {}
        paths = [*video_paths.values(),
                 *(str(save_png(image, folder / f"{number:05d}.png", None)) for number, image in enumerate(images, 1))]
        audio_paths = save_audio_outputs(outputs, folder) if clips else {}
        batch_paths = save_clip_list_outputs(outputs, folder, audio_paths) if batches else {}
        text_outputs = {key: value for key, value in outputs.items()
                        if key != "result" and key not in videos and key not in clips and key not in batches}
        shown = {key: encode_app_output(value) for key, value in text_outputs.items()
                 if not output_images({key: value})}
        shown.update({key: {"file": Path(path).name, "frame_count": len(videos[key]), "fps": videos[key].fps}
                      for key, path in video_paths.items()})
        shown.update({key: {"file": Path(path).name, "sample_rate": outputs[key].sample_rate,
                            "duration": outputs[key].duration} for key, path in audio_paths.items()})
        shown.update({key: [{"file": Path(path).name, "sample_rate": clip.sample_rate, "duration": clip.duration}
                            for path, clip in zip(batch_paths[key], batches[key])] for key in batch_paths})
        # every clip once, the audio outputs' first (the player plays the first), then a batch's other clips
        every_clip = dict.fromkeys([*audio_paths.values(), *(path for group in batch_paths.values() for path in group)])
        return AppflowResult(app, paths, shown, len(video_paths), interrupted=bool(getattr(outputs, "interrupted", False)),
                             audio_paths=tuple(every_clip))

    return finish


def clip_picker(audio_paths) -> dict:
    """The clip picker's update for a run's clips: one choice per clip ("Clip 2: audios-01.wav"), the first chosen
    (the one the player starts with); shown only when there is more than one to pick from."""
    choices = [(f"Clip {number}: {Path(path).name}", path) for number, path in enumerate(audio_paths, 1)]
    return gr.update(choices=choices, value=choices[0][1] if choices else None, visible=len(choices) > 1)


def clip_player(cache_dir):
    """The clip picker's handler: the chosen clip's .wav for the player. The value comes from the page, so only a
    .wav file a run wrote under the tab's cache folder is played (no other file of the server is served)."""
    root = Path(cache_dir).resolve()

    def play(path):
        from webui.ui.errors import refused

        if not path:
            return gr.skip()
        chosen = Path(str(path)).resolve()
        if chosen.suffix.lower() != ".wav" or root not in chosen.parents or not chosen.is_file():
            raise refused(f"{Path(str(path)).name!r} is not a clip of an AppFlow run; run the app again to pick from "
                          "its clips.")
        return str(path)

    return play


def follow_appflow(state: ServerState, task):
    """The AppFlow tab's outputs for its run `task` until it ends, then its images and outputs."""
    from webui.ui.reattach import follow_ui_task

    def running(task) -> tuple:
        def describe(snapshot) -> str:
            seconds = 0.0 if snapshot.started_at is None else max(0.0, time.monotonic() - snapshot.started_at)
            if snapshot.total_steps:  # an SD step reports its sampling steps (`appflow.progress`)
                return (f"Running {task.label or 'the app'}: step {snapshot.step}/{snapshot.total_steps}, batch "
                        f"{snapshot.batch_index + 1}/{snapshot.batch_count}, ETA {snapshot.eta_seconds:.0f}s "
                        f"({seconds:.0f}s)")
            return f"Running {task.label or 'the app'} ({seconds:.0f}s)"

        return progress_html(*job_status(state, task.job, describe)), gr.skip(), gr.skip(), gr.skip(), gr.skip()

    def shown(task) -> tuple:
        result: AppflowResult = task.result
        label = "Interrupted" if result.interrupted else "Done"  # as the txt2img tab (`webui.ui.reattach`)
        media = f" and {result.video_count} video(s)" if result.video_count else ""
        media += f" and {len(result.audio_paths)} audio clip(s)" if result.audio_paths else ""
        done = progress_html(1.0, f"{label}: {result.app}, {len(result.paths) - result.video_count} image(s){media} in "
                                  f"{task.seconds:.1f}s")
        audio = result.audio_paths[0] if result.audio_paths else None
        return done, [(path, None) for path in result.paths], audio, clip_picker(result.audio_paths), result.outputs

    return follow_ui_task(task, OUTPUT_COUNT, running, shown)

