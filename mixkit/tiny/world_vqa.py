"""Questions and exact answers about a shapes-world scene, for training and scoring the tiny captioner's VQA.

Only questions with one right answer are asked: "what colour is the circle?" is skipped when a
scene has two circles, so no answer in the data contradicts another.
"""

from __future__ import annotations

from mixkit.data.shapes_vocab import Scene

COUNT_WORDS = {1: "one", 2: "two"}


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
