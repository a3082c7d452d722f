"""`mixkit img2img IMAGE "prompt" --loopback 4 --loopback-final-strength 0.3`: A1111's Loopback from the command line.

Each loop's output is the next loop's init image (`pipelines.scripts.loopback`); the flags are A1111's four controls.
The settings are checked before the model loads; the loops' grid is written as `grid-NNNN.png`, then every loop's
image as `img2img` writes them, into the -o folder. `--loopback-interrogate clip` appends A1111's Interrogate CLIP of
each init image to the prompt: a caption from AppFlow's image2text_generation app (mixkit-tiny-blip2 unless the app
is configured otherwise) and the best terms of the word lists ranked by `--interrogate-clip-model`.
`--loopback-interrogate deepbooru` appends its DeepDanbooru tags, from the `--deepdanbooru-models-path` folder's
tagger under A1111's default DeepBooru settings (threshold 0.5, sorted, spaces, escaped brackets). Their models load
once every check has passed and before the checkpoint, so one that cannot load is one error naming its flag, with no
image generated and nothing written.
"""

from __future__ import annotations

import argparse

from pipelines.scripts.loopback_config import ARG_DEFAULTS, CURVES, MAX_LOOPS


def add_loopback_flags(p: argparse.ArgumentParser) -> None:
    loops, final, curve, _ = ARG_DEFAULTS
    group = p.add_argument_group("Loopback (A1111's script): img2img again on each output")
    group.add_argument("--loopback", type=int, default=None, metavar="LOOPS",
                       help=f"run LOOPS img2img passes, each on the one before's output (1-{MAX_LOOPS}; A1111's "
                            f"default {loops}); --denoising-strength is the first loop's strength")
    group.add_argument("--loopback-final-strength", type=float, default=None, metavar="STRENGTH",
                       help=f"the last loop's denoising strength, 0-1 (default {final})")
    group.add_argument("--loopback-curve", default=None, metavar="CURVE",
                       help=f"how the strength moves to the final one: {', '.join(CURVES)} (default {curve})")
    group.add_argument("--loopback-interrogate", default=None, metavar="WHAT",
                       help="append an interrogation of each loop's init image to the prompt: none, clip or "
                            "deepbooru (needs --deepdanbooru-models-path)")
    group.add_argument("--interrogate-clip-model", default=None, metavar="CLIP",
                       help="with --loopback-interrogate clip: the CLIP that ranks the word lists (default "
                            "mixkit-tiny-clip)")
    group.add_argument("--interrogate-categories-dir", default=None, metavar="DIR",
                       help="with --loopback-interrogate clip: an A1111 interrogate/ folder of *.txt word lists "
                            "(default: the built-in lists)")
    group.add_argument("--deepdanbooru-models-path", default=None, metavar="FOLDER",
                       help="with --loopback-interrogate deepbooru: the folder holding DeepDanbooru's "
                            "model-resnet_custom_v3.pt (A1111's models/torch_deepdanbooru)")


LOOPBACK_ONLY_FLAGS = {"loopback_final_strength": "--loopback-final-strength", "loopback_curve": "--loopback-curve",
                       "loopback_interrogate": "--loopback-interrogate",
                       "interrogate_clip_model": "--interrogate-clip-model",
                       "interrogate_categories_dir": "--interrogate-categories-dir",
                       "deepdanbooru_models_path": "--deepdanbooru-models-path"}


def loopback_config_of(args: argparse.Namespace):
    """The Loopback settings the flags ask for, checked (ValueError naming the setting), or None without --loopback;
    its other flags without it are refused rather than ignored."""
    from pipelines.scripts.loopback_config import LoopbackConfig

    given = [flag for name, flag in LOOPBACK_ONLY_FLAGS.items() if getattr(args, name) is not None]
    if args.loopback is None:
        if given:
            raise ValueError(f"{', '.join(given)} set{'s' if len(given) == 1 else ''} up Loopback; add --loopback "
                             "LOOPS, or leave out " + " and ".join(given))
        return None
    if args.batch_size != 1:  # the API takes and ignores it, as A1111's script; a typed flag is not ignored here
        raise ValueError(f"--loopback draws one image per loop; leave out --batch-size {args.batch_size} (use "
                         "--batch-count for separate runs of the loops).")
    loops, final, curve, interrogation = ARG_DEFAULTS
    try:
        config = LoopbackConfig(args.loopback, _or(args.loopback_final_strength, final),
                                _or(args.loopback_curve, curve), _or(args.loopback_interrogate, interrogation))
    except ValueError as error:
        raise ValueError(in_flag_terms(str(error))) from None
    if config.append_interrogation != "CLIP":
        clip_only = [flag for flag in given if flag.startswith("--interrogate")]
        if clip_only:
            raise ValueError(f"{' and '.join(clip_only)} only matter with --loopback-interrogate clip.")
    if config.append_interrogation != "DeepBooru" and args.deepdanbooru_models_path is not None:
        raise ValueError("--deepdanbooru-models-path only matters with --loopback-interrogate deepbooru.")
    return config


# the config's settings as its errors name them ("Loopback: loops must be ..."), and the flags that set them
SETTING_FLAGS = {"loops": "--loopback", "final_denoising_strength": "--loopback-final-strength",
                 "denoising_curve": "--loopback-curve", "append_interrogation": "--loopback-interrogate"}


def in_flag_terms(message: str) -> str:
    """A `LoopbackConfig` error with its setting named by the flag that set it, as the other scripts' flags report
    theirs ("--loopback must be a whole number from 1 to 32 ..., got 40.")."""
    from pipelines.scripts.loopback_config import TITLE

    for name, flag in SETTING_FLAGS.items():
        if message.startswith(f"{TITLE}: {name} "):
            return flag + message[len(f"{TITLE}: {name}"):]
    return message


def _or(value, default):
    return default if value is None else value


# what an interrogation model that cannot load spares: it loads after every check, before the checkpoint
NOTHING_DONE = "no image was generated"


class LoopbackClip:
    """`image -> text`: Interrogate CLIP as the server runs it (the caption app's caption, then CLIP's best terms),
    with Settings > Interrogate's defaults except that both models stay loaded for the whole command (A1111's
    interrogate_keep_models_in_memory on: a job of N loops loads each once, not N times)."""

    def __init__(self, args: argparse.Namespace, device: str | None) -> None:
        from appflow import Appflow
        from mixkit.interrogate import ClipInterrogator, InterrogateSettings
        from mixkit.interrogate.interrogator import DEFAULT_CLIP
        from webui.interrogation import CAPTION_APP

        self.settings = InterrogateSettings(keep_models_in_memory=True)
        self.ranker = ClipInterrogator(args.interrogate_clip_model or DEFAULT_CLIP, args.interrogate_categories_dir,
                                       device=device or "cpu")
        self.ranker.categories(self.settings)  # the word lists read now: a bad folder fails with the checks
        self.captioner = Appflow(app=CAPTION_APP, device=device or "cpu")  # configs only; weights at `load()`

    def load(self) -> None:
        """Load the captioner and the CLIP now, after the checks and before the first loop; a model that cannot load
        is one `webui.cli.model_loads.ModelLoadError` naming the flag that chose it."""
        from webui.cli.model_loads import loaded_now

        # the caption app's own model (no flag of this command names it): the error names the choice that wants it
        loaded_now("--loopback-interrogate clip's captioner", self.captioner.models.get("captioner"),
                   self.captioner.load_models, NOTHING_DONE)
        loaded_now("--interrogate-clip-model", self.ranker.clip_source, self.ranker.load, NOTHING_DONE)

    def __call__(self, image) -> str:
        from mixkit.interrogate import join_terms

        caption = self.captioner(image=image, **self.settings.caption_options())["text"]
        return join_terms(caption, self.ranker.terms(image, self.settings), self.settings.return_ranks)


def cli_interrogator(args: argparse.Namespace, device: str | None) -> LoopbackClip:
    """Interrogate CLIP for "Append interrogated prompt" (`LoopbackClip`), its word lists read now, its models loaded
    by `load()` once every check has passed."""
    return LoopbackClip(args, device)


def cli_deepbooru(args: argparse.Namespace, device: str | None):
    """`image -> tags` (`webui.cli.deepbooru_tagger.DeepbooruTagger`, its file found now, its network loaded by
    `load()`) from --deepdanbooru-models-path, None without it (Loopback then refuses DeepBooru naming the flag)."""
    if args.deepdanbooru_models_path is None:
        return None
    from webui.cli.deepbooru_tagger import deepbooru_tagger

    return deepbooru_tagger(args.deepdanbooru_models_path, device)


def load_interrogation_models(interrogate: LoopbackClip | None, deepbooru) -> None:
    """Load Loopback's "Append interrogated prompt" models now (after every check, before the checkpoint and the
    first loop), so one that cannot load is one error naming its flag, with no image generated or file written."""
    if interrogate is not None:
        interrogate.load()
    if deepbooru is not None:
        deepbooru.load(NOTHING_DONE)


def run_loopback(pipe, params, config, output, writing=None, interrogate=None, deepbooru=None, save=None,
                 **cap) -> int:
    """Run the loops with a progress bar and Ctrl-C as Interrupt; write the grid, then every loop's image (or
    `save(result) -> paths`); print the paths."""
    from pipelines.scripts import loopback
    from webui.cli.progress import report_written, run_with_progress

    total = config.loops * params.batch_count
    result = run_with_progress(lambda **hooks: loopback.run(pipe, params, config, interrogate=interrogate,
                                                             deepbooru=deepbooru, **cap, **hooks),
                               params.steps * total)
    paths = save(result) if save is not None else [*result.save_grids(output, writing), *result.save(output, writing)]
    return report_written(paths, result.interrupted, f"kept {len(result.samples.images)} of {total} loop image(s)")
