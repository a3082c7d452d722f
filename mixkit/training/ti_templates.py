"""Training captions of a textual-inversion run: kohya's object/style templates, or an A1111 template file.

kohya's `--use_object_template` / `--use_style_template` replace every caption by one of the textual-inversion
paper's ImageNet templates ("a photo of a {}"), picked at random each time an image is drawn, with the token string
in the braces. A1111's template files hold one template a line, `[name]` standing for the embedding's name and
`[filewords]` for the image's caption. Both are written here in A1111's form; the pick is drawn from (seed,
micro-batch, row), so a resumed run draws the same captions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from mixkit.registry import Registry

NAME = "[name]"
FILEWORDS = "[filewords]"

# kohya's train_textual_inversion.py `imagenet_templates_small` (from the textual-inversion paper's code), in order.
OBJECT_TEMPLATES = tuple(text.replace("{}", NAME) for text in (
    "a photo of a {}", "a rendering of a {}", "a cropped photo of the {}", "the photo of a {}",
    "a photo of a clean {}", "a photo of a dirty {}", "a dark photo of the {}", "a photo of my {}",
    "a photo of the cool {}", "a close-up photo of a {}", "a bright photo of the {}", "a cropped photo of a {}",
    "a photo of the {}", "a good photo of the {}", "a photo of one {}", "a close-up photo of the {}",
    "a rendition of the {}", "a photo of the clean {}", "a rendition of a {}", "a photo of a nice {}",
    "a good photo of a {}", "a photo of the nice {}", "a photo of the small {}", "a photo of the weird {}",
    "a photo of the large {}", "a photo of a cool {}", "a photo of a small {}",
))
# kohya's `imagenet_style_templates_small`, in order.
STYLE_TEMPLATES = tuple(text.replace("{}", NAME) for text in (
    "a painting in the style of {}", "a rendering in the style of {}", "a cropped painting in the style of {}",
    "the painting in the style of {}", "a clean painting in the style of {}", "a dirty painting in the style of {}",
    "a dark painting in the style of {}", "a picture in the style of {}", "a cool painting in the style of {}",
    "a close-up painting in the style of {}", "a bright painting in the style of {}",
    "a cropped painting in the style of {}", "a good painting in the style of {}",
    "a close-up painting in the style of {}", "a rendition in the style of {}", "a nice painting in the style of {}",
    "a small painting in the style of {}", "a weird painting in the style of {}", "a large painting in the style of {}",
))


# The template sets A1111's Train tab offers by file name (its `textual_inversion_templates` folder), built from the
# paper's templates above: `subject` / `style` are kohya's object / style templates, the `_filewords` ones append the
# image's caption to each, as A1111's files of that name do. Chosen by `template_name`.
NAMED_TEMPLATES: Registry[tuple[str, ...]] = Registry("prompt template")
NAMED_TEMPLATES.register("subject.txt", OBJECT_TEMPLATES)
NAMED_TEMPLATES.register("subject_filewords.txt", tuple(f"{line}, {FILEWORDS}" for line in OBJECT_TEMPLATES))
NAMED_TEMPLATES.register("style.txt", STYLE_TEMPLATES)
NAMED_TEMPLATES.register("style_filewords.txt", tuple(f"{line}, {FILEWORDS}" for line in STYLE_TEMPLATES))
# A1111's hypernetwork.txt: the object templates with the image's caption where the name stands (a hypernetwork has
# no word of its own), the template A1111's Train hypernetwork tab starts with.
NAMED_TEMPLATES.register("hypernetwork.txt", tuple(line.replace(NAME, FILEWORDS) for line in OBJECT_TEMPLATES))


def read_template_file(path: str | Path, *, require_name: bool = True) -> tuple[str, ...]:
    """The templates of an A1111 template file (one a line; blank lines skipped). Refused when unreadable or, with
    `require_name` (an embedding's run), when no line holds `[name]`: the embedding would then appear in no caption
    and never train. A hypernetwork trains on any caption, so its templates need only text (A1111's
    hypernetwork.txt holds `[filewords]` lines)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"template_file {str(path)!r} cannot be read ({error}); name a UTF-8 text file with one "
                         f"template a line, like 'a photo of a {NAME}, {FILEWORDS}'") from None
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not lines:
        raise ValueError(f"template_file {str(path)!r} has no template lines; write one a line, like "
                         f"'a photo of {FILEWORDS}'")
    if require_name and not any(NAME in line for line in lines):
        raise ValueError(f"template_file {str(path)!r} has no line with {NAME}, so the embedding would be in no "
                         f"caption; write templates like 'a photo of a {NAME}, {FILEWORDS}'")
    return lines


@dataclass(frozen=True)
class CaptionTemplates:
    """Templates in A1111's form; `captions` gives a micro-batch's training captions."""

    lines: tuple[str, ...]
    token_string: str

    def fill(self, line: str, caption: str) -> str:
        """`line` with the token string for `[name]` and the image's caption for `[filewords]`."""
        return line.replace(FILEWORDS, caption).replace(NAME, self.token_string)

    def captions(self, captions: list[str], seed: int, micro_batch: int) -> list[str]:
        """Each caption replaced by a template drawn from (seed, micro-batch, row)."""
        return [self.fill(random.Random(f"{seed}:{micro_batch}:{row}:template").choice(self.lines), caption)
                for row, caption in enumerate(captions)]
