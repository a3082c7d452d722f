"""Questions and exact answers about a shapes-world scene, for training and scoring the tiny captioner's VQA.

Only questions with one right answer are asked: "what colour is the circle?" is skipped when a
scene has two circles, so no answer in the data contradicts another.
"""

from __future__ import annotations

from mixkit.data.shapes_vocab import Scene

COUNT_WORDS = {1: "one", 2: "two"}
# What each question asks about, by its opening words; recipes weight the kinds of question separately.
QUESTION_KINDS = {"what colour is the background": "background", "how many": "count", "what colour": "colour",
                  "what size": "size", "where is": "position", "what shape": "shape"}


def question_kind(question: str) -> str:
    """The attribute a question of `scene_questions` asks about ("colour", "size", "position", …)."""
    for opening, kind in QUESTION_KINDS.items():
        if question.startswith(opening):
            return kind
    raise ValueError(f"{question!r} is not a shapes-world question; known openings: {sorted(QUESTION_KINDS)}")


def scene_questions(scene: Scene) -> list[tuple[str, str]]:
    """(question, answer) pairs that `scene` answers unambiguously."""
    pairs = [("what colour is the background?", scene.background),
             ("how many shapes are there?", COUNT_WORDS[len(scene.objects)])]
    shapes = [o.shape for o in scene.objects]
    for obj in scene.objects:
        if shapes.count(obj.shape) == 1:
            pairs.append((f"what colour is the {obj.shape}?", obj.colour))
            if obj.size:
                pairs.append((f"what size is the {obj.shape}?", obj.size))
            if len(scene.objects) == 1 and obj.position:
                pairs.append((f"where is the {obj.shape}?", obj.position))
    if len(scene.objects) == 1:
        pairs.append(("what shape is it?", scene.objects[0].shape))
    return pairs
