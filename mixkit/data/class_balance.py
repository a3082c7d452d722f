"""DreamBooth class (regularisation) images balanced against the training images, as kohya balances them.

kohya's DreamBoothDataset does not simply add the class images as more samples: it gives an epoch as
many class samples as training samples (repeats included), so the prior-preservation term weighs the
same against the instance term whatever the two folders hold. It walks the class images in order,
first with their own repeats, stopping once the training count is reached (later ones are "not
used", with a warning), then adds one repeat at a time, image by image, until the count is reached.
So 6 class images against 19 training samples become 19 class samples (the first image 4 times, the
others 3), and 40 class images against 19 become the first 19.
"""

from __future__ import annotations

import dataclasses
import logging

from mixkit.data.records import ImageRecord

logger = logging.getLogger(__name__)


def balance_class_images(records: list[ImageRecord]) -> list[ImageRecord]:
    """`records` with the class images (`prior=True`) re-repeated or cut to as many samples per epoch as the
    training images have (kohya's rule, see the module docstring); training images unchanged, order kept."""
    wanted = sum(r.repeats for r in records if not r.prior)
    classes = [r for r in records if r.prior]
    if not classes:
        return list(records)
    repeats: list[int] = []
    count = 0
    for record in classes:  # first pass: each class image with its own repeats, until the count is reached
        if count >= wanted:
            break
        repeats.append(record.repeats)
        count += record.repeats
    while count < wanted:  # then one more repeat per image, in order
        for i in range(len(repeats)):
            repeats[i] += 1
            count += 1
            if count >= wanted:
                break
    if len(repeats) < len(classes):
        logger.warning("%d class images (%d samples with repeats) for %d training samples per epoch: as in kohya, "
                       "only the first %d class images are used", len(classes), sum(r.repeats for r in classes),
                       wanted, len(repeats))
    balanced = iter(dataclasses.replace(r, repeats=n) for r, n in zip(classes, repeats))
    used = {id(r) for r in classes[:len(repeats)]}
    return [r if not r.prior else next(balanced) for r in records if not r.prior or id(r) in used]
