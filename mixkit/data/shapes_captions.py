"""Exact captions for shapes-world scenes, and the parser that reads them back to attributes.

Two caption forms are written: the plain one ("a red circle on a blue background") that names only
shape, colour and background, and the rich one ("a small red circle on the left of a large blue
square, on a white background") that also names sizes and positions. The parser accepts both (and
"an" before vowels, any case, a trailing full stop), so `mixkit eval tiny` can score a generated
image against any prompt the world can write. It is strict: an unknown word is an error naming
the word, never a silent guess.
"""

from __future__ import annotations

import re
from typing import Literal

from mixkit.data.shapes_vocab import (
    COLOURS,
    POSITION_PHRASE,
    RELATION_PHRASE,
    SHAPES,
    SIZES,
    Scene,
    ShapeSpec,
    check_scene,
)

CaptionStyle = Literal["plain", "rich"]
CAPTION_STYLES: tuple[str, ...] = ("plain", "rich")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _object_phrase(obj: ShapeSpec, rich: bool) -> str:
    words = ([obj.size] if rich and obj.size else []) + [obj.colour, obj.shape]
    return f"{_article(words[0])} {' '.join(words)}"


def caption_scene(scene: Scene, style: CaptionStyle = "rich") -> str:
    """The exact caption of `scene`: "plain" names shape, colour, background; "rich" adds size and position."""
    if style not in CAPTION_STYLES:
        raise ValueError(f"caption style must be one of {CAPTION_STYLES}, got {style!r}")
    check_scene(scene)
    rich = style == "rich"
    first = _object_phrase(scene.objects[0], rich)
    background = f"on {_article(scene.background)} {scene.background} background"
    if len(scene.objects) == 1:
        position = scene.objects[0].position
        if rich and position:
            return f"{first} {POSITION_PHRASE[position]}, {background}"
        return f"{first} {background}"
    second = _object_phrase(scene.objects[1], rich)
    if rich and scene.relation:
        return f"{first} {RELATION_PHRASE[scene.relation]} {second}, {background}"
    return f"{first} and {second} {background}"


def _alternatives(words) -> str:
    # Longest first so "at the top left" wins over "at the top".
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_WORD = r"[a-z]+"
_OBJECT = rf"an? (?:({_alternatives(SIZES)}) )?({_WORD}) ({_WORD})"
_BACKGROUND = re.compile(rf"^(.*?),? on an? ({_WORD}) background$")
_PHRASE_TO_RELATION = {phrase: name for name, phrase in RELATION_PHRASE.items()}
_PHRASE_TO_POSITION = {phrase: name for name, phrase in POSITION_PHRASE.items()}
_TWO = re.compile(rf"^{_OBJECT} (and|{_alternatives(_PHRASE_TO_RELATION)}) {_OBJECT}$")
_ONE = re.compile(rf"^{_OBJECT}(?: ({_alternatives(_PHRASE_TO_POSITION)}))?$")


def parse_caption(text: str) -> Scene:
    """Read a world caption back into a `Scene`; attributes the caption does not name are None."""
    if not isinstance(text, str):
        raise TypeError(f"caption must be a string, got {type(text).__name__}")
    normalised = " ".join(text.lower().replace(" ,", ",").split()).rstrip(".").strip()
    match = _BACKGROUND.match(normalised)
    if not match:
        raise ValueError(f"cannot parse caption {text!r}: it must end with 'on a <colour> background' "
                         "(e.g. 'a red circle on a blue background')")
    body, background = match.groups()
    two = _TWO.match(body)
    if two:
        size1, colour1, shape1, joiner, size2, colour2, shape2 = two.groups()
        relation = None if joiner == "and" else _PHRASE_TO_RELATION[joiner]
        objects = (_spec(text, shape1, colour1, size1, None), _spec(text, shape2, colour2, size2, None))
        return _checked(text, Scene(objects, _word(text, "background colour", background, COLOURS), relation))
    one = _ONE.match(body)
    if one:
        size, colour, shape, position_phrase = one.groups()
        position = _PHRASE_TO_POSITION[position_phrase] if position_phrase else None
        return _checked(text, Scene((_spec(text, shape, colour, size, position),),
                                    _word(text, "background colour", background, COLOURS)))
    raise ValueError(f"cannot parse caption {text!r}: expected 'a [size] <colour> <shape> [position]' or two such "
                     "shapes joined by 'and' / 'on the left of' / 'on the right of' / 'above' / 'below', "
                     "then 'on a <colour> background'")


def _spec(text: str, shape: str, colour: str, size: str | None, position: str | None) -> ShapeSpec:
    return ShapeSpec(_word(text, "shape", shape, SHAPES), _word(text, "colour", colour, COLOURS), size, position)


def _word(text: str, what: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"cannot parse caption {text!r}: unknown {what} {value!r}; valid: {', '.join(allowed)}")
    return value


def _checked(text: str, scene: Scene) -> Scene:
    try:
        check_scene(scene)
    except ValueError as error:
        raise ValueError(f"caption {text!r} describes an impossible scene: {error}") from None
    return scene
