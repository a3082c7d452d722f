"""`mixkit img2img --input-dir DIR` with a script (X/Y/Z plot, Prompt matrix, Prompts from file, Loopback, SD upscale):
A1111's img2img Batch runs the chosen script on every input in turn (its `process_batch` calls
`scripts_img2img.run(p, ...)` per image), here with the same flags and checks a single `mixkit img2img IMAGE` run has.

Two things differ from running the script once per image by hand. The script-image cap (`--max-script-images`, 10,000
by default) counts the whole batch: a 100-cell plot over 200 inputs is 20,000 images, refused before the model loads
rather than after 100 inputs. And every file is named after its input, as the batch names plain results
(`webui.cli.img2img_batch.save_named`): `cat.jpg`'s images `cat-1.png`, `cat-2.png`, ... (`cat.png` for one, as SD
upscale makes), its grid `cat-xyz_grid.png` (the script's grid prefix; several: `cat-xyz_grid-1.png`, ...), a taken
name numbered on.
"""

from __future__ import annotations

from pathlib import Path


def check_batch_script_images(title: str, counts: list[int], cap: int) -> None:
    """ValueError when the script over every input generates more than `cap` images in all; `counts` holds each
    input's (each within the cap already: the script checked it)."""
    from pipelines.scripts.image_budget import check_script_images

    total = sum(counts)
    if len(set(counts)) == 1:
        made_of = f"{len(counts):,} inputs x {counts[0]:,} each"
    else:
        made_of = f"{len(counts):,} inputs, {min(counts):,} to {max(counts):,} each"
    check_script_images(f"{title} over --input-dir", total, cap, made_of,
                        "move some inputs out of --input-dir or make the script smaller")


def save_script_named(result, folder: Path, stem: str, taken: set[Path], writing=None) -> list[Path]:
    """Save one input's script result named after the input: its grid(s) `stem-<grid prefix>.png` (several:
    `-1`, `-2`, ...), then every image the script generated as the batch names them (`save_named`)."""
    from pipelines.png import PNG_ONLY, save_png
    from webui.cli.img2img_batch import free_name, save_named

    grids = result.grids()
    prefix = f"{stem}-{result.grid_prefix}"
    names = [prefix] if len(grids) == 1 else [f"{prefix}-{n}" for n in range(1, len(grids) + 1)]
    paths = [save_png(image, free_name(folder, name, taken), text or None, writing=writing or PNG_ONLY)
             for (image, text), name in zip(grids, names)]
    return paths + save_named(result.sample_images(), folder, stem, taken, writing)
