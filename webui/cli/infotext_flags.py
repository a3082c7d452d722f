"""`--infotext-omit`: leave model, VAE, version, LoRA or embedding details out of the infotext the CLI writes;
`--no-pnginfo` / `--save-txt`: where the infotext goes.

The same switches as the web UI's Settings > Infotext (A1111's `add_model_name_to_info` ... options,
`pipelines.infotext_options`), named by what they leave out. The user-name option has no flag: the CLI has no
authenticated user to write. The other two are Settings > Saving images' `enable_pnginfo` and `save_txt`
(`pipelines.png.InfotextWriting`).
"""

from __future__ import annotations

import argparse

# flag value -> the A1111 option it turns off
OMITTABLE = {
    "model": "add_model_name_to_info",
    "model-hash": "add_model_hash_to_info",
    "vae": "add_vae_name_to_info",
    "vae-hash": "add_vae_hash_to_info",
    "version": "add_version_to_infotext",
    "lora-hashes": "lora_add_hashes_to_infotext",
    "ti-hashes": "textual_inversion_add_hashes_to_infotext",
    "bundled-ti": "lora_bundled_ti_to_infotext",
}


def omitted_keys(text: str) -> list[str]:
    """An `--infotext-omit` value ("model,model-hash" or one name) as its names; ArgumentTypeError for others."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in OMITTABLE]
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(map(repr, unknown))} is not something the infotext can leave "
                                         f"out; choose from {', '.join(OMITTABLE)}")
    return names


def add_infotext_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--infotext-omit", type=omitted_keys, action="append", default=[], metavar="WHAT[,WHAT]",
                        help="leave WHAT out of the images' infotext (A1111's Settings > Infotext): "
                             f"{', '.join(OMITTABLE)}; repeat or comma-separate (e.g. model,model-hash,vae,vae-hash "
                             "to publish images without naming the checkpoint)")
    add_saving_flags(parser)


def add_saving_flags(parser: argparse.ArgumentParser) -> None:
    """`--no-pnginfo` / `--save-txt` (A1111's Settings > Saving images), shared with `mixkit extras`."""
    parser.add_argument("--no-pnginfo", action="store_true",
                        help="write no infotext into the PNG files (A1111's enable_pnginfo off): the images carry no "
                             "generation parameters")
    parser.add_argument("--save-txt", action="store_true",
                        help="also write each image's infotext to a .txt of the same name beside it (A1111's "
                             "save_txt); `--infotext FILE.txt` reads it back")


def infotext_options_of(args: argparse.Namespace):
    """The `InfotextOptions` the flags ask for (A1111's defaults for every name not given)."""
    from pipelines.infotext_options import InfotextOptions

    omitted = {name for names in getattr(args, "infotext_omit", None) or [] for name in names}
    return InfotextOptions(**{OMITTABLE[name]: False for name in omitted})


def infotext_writing_of(args: argparse.Namespace):
    """Where `--no-pnginfo` / `--save-txt` put the saved images' infotext (`pipelines.png.InfotextWriting`)."""
    from pipelines.png import InfotextWriting

    return InfotextWriting(pnginfo=not getattr(args, "no_pnginfo", False), txt=bool(getattr(args, "save_txt", False)))
