"""The vocabulary of the shapes world and the typed scene it describes.

The world is deliberately small and closed: every word a caption may use is listed here, so a
caption can be parsed back to exact attributes and a judge can score an image against its prompt.
`BASE_*` are what the default world draws from; the extra entries (a diamond, a heart, orange,
grey) exist so that a LoRA can be trained on a concept the base model never saw, and the judge
still knows how to recognise it.
"""

from __future__ import annotations

from dataclasses import dataclass

# sRGB values chosen far apart (and far from each other's anti-aliased blends) so that colour is
# unambiguous for the judge even after a generator blurs edges.
COLOUR_RGB: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 60, 220),
    "yellow": (240, 220, 30),
    "purple": (140, 50, 180),
    "white": (250, 250, 250),
    "black": (15, 15, 15),
    "orange": (250, 140, 20),
    "grey": (128, 128, 128),
}
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross", "diamond", "heart")
COLOURS: tuple[str, ...] = tuple(COLOUR_RGB)
BASE_SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross")
BASE_COLOURS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple", "white", "black")

# Half-extent of a shape as a fraction of the image side. Large shapes at an off-centre position
# (0.27) still fit inside the frame with the default jitter.
SIZE_RADIUS: dict[str, float] = {"small": 0.10, "medium": 0.15, "large": 0.21}
SIZES: tuple[str, ...] = tuple(SIZE_RADIUS)

# Centre of a single shape, as (x, y) fractions of the image side (y grows downwards, as in PIL).
POSITION_CENTRE: dict[str, tuple[float, float]] = {
    "center": (0.5, 0.5),
    "left": (0.27, 0.5),
    "right": (0.73, 0.5),
    "top": (0.5, 0.27),
    "bottom": (0.5, 0.73),
    "top left": (0.27, 0.27),
    "top right": (0.73, 0.27),
    "bottom left": (0.27, 0.73),
    "bottom right": (0.73, 0.73),
}
POSITIONS: tuple[str, ...] = tuple(POSITION_CENTRE)
POSITION_PHRASE: dict[str, str] = {
    "center": "in the center",
    "left": "on the left",
    "right": "on the right",
    "top": "at the top",
    "bottom": "at the bottom",
    "top left": "at the top left",
    "top right": "at the top right",
    "bottom left": "at the bottom left",
    "bottom right": "at the bottom right",
}

# "A <relation> B": where the first object sits relative to the second.
RELATION_PHRASE: dict[str, str] = {
    "left of": "on the left of",
    "right of": "on the right of",
    "above": "above",
    "below": "below",
}
RELATIONS: tuple[str, ...] = tuple(RELATION_PHRASE)


@dataclass(frozen=True)
class ShapeSpec:
    """One shape in a scene; size and position are None when a caption does not say them."""

    shape: str
    colour: str
    size: str | None = None
    position: str | None = None


@dataclass(frozen=True)
class Scene:
    """One or two shapes on a plain background; `relation` places the first shape relative to the second."""

    objects: tuple[ShapeSpec, ...]
    background: str
    relation: str | None = None

    def to_dict(self) -> dict:
        return {
            "objects": [{"shape": o.shape, "colour": o.colour, "size": o.size, "position": o.position}
                        for o in self.objects],
            "background": self.background,
            "relation": self.relation,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Scene":
        objects = tuple(ShapeSpec(o["shape"], o["colour"], o.get("size"), o.get("position")) for o in data["objects"])
        scene = cls(objects, data["background"], data.get("relation"))
        check_scene(scene)
        return scene


def check_scene(scene: Scene) -> None:
    """Raise ValueError naming the first attribute outside the world's vocabulary or rules."""
    if not isinstance(scene, Scene):
        raise TypeError(f"expected a Scene, got {type(scene).__name__}")
    if len(scene.objects) not in (1, 2):
        raise ValueError(f"a scene holds 1 or 2 shapes, got {len(scene.objects)}")
    _check_word("background colour", scene.background, COLOURS)
    for obj in scene.objects:
        _check_word("shape", obj.shape, SHAPES)
        _check_word("colour", obj.colour, COLOURS)
        if obj.size is not None:
            _check_word("size", obj.size, SIZES)
        if obj.position is not None:
            _check_word("position", obj.position, POSITIONS)
        if obj.colour == scene.background:
            raise ValueError(f"a {obj.colour} {obj.shape} on a {scene.background} background would be invisible; "
                             "a shape's colour must differ from the background colour")
    if len(scene.objects) == 2:
        if scene.relation is not None:
            _check_word("relation", scene.relation, RELATIONS)
        if any(o.position is not None for o in scene.objects):
            raise ValueError("in a two-shape scene the relation places the shapes; their position must be None")
    elif scene.relation is not None:
        raise ValueError(f"a single-shape scene has no relation, got {scene.relation!r}")


def _check_word(what: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(allowed)}")
