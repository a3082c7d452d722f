"""The word lists CLIP interrogation ranks: A1111's `interrogate/*.txt` folder, or built-in shapes-world lists.

A1111 (modules/interrogate.py) reads every `*.txt` of its `interrogate/` folder as one category named by the
file's stem, takes the top N lines when the name ends in `.topN` (`flavors.top3.txt`: 3 terms, else 1), keeps at
most `interrogate_clip_dict_limit` lines of each (0: all) and skips the categories named in
`interrogate_clip_skip_categories`. A1111 looks for `.topN.` in the stem, which no stem holds since the
extension went out of it, so there every list gives one term; here the suffix works as named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mixkit.data.shapes_vocab import BASE_COLOURS, BASE_SHAPES, SIZES

DEFAULT_DICT_LIMIT = 1500  # A1111's interrogate_clip_dict_limit default
TOP_N_SUFFIX = re.compile(r"\.top(\d+)$")

# What mixkit-tiny-clip tells apart on the shapes world (README "mixkit-tiny": shape 98.5%, size 85%; colour is
# as reliable as shape on renders). Positions (13% there) and backgrounds (the tiny CLIP reads "on a red
# background" as "red") are left out: ranking them would append noise to every caption.
BUILTIN_CATEGORIES: dict[str, tuple[str, ...]] = {"shapes": BASE_SHAPES, "colours": BASE_COLOURS, "sizes": SIZES}


@dataclass(frozen=True)
class Category:
    """One word list: its name (a file stem), how many of its best lines to append, and its lines."""

    name: str
    top_n: int
    items: tuple[str, ...]


def _check_dict_limit(dict_limit: int) -> None:
    if isinstance(dict_limit, bool) or not isinstance(dict_limit, int) or dict_limit < 0:
        raise ValueError(f"interrogate_clip_dict_limit must be a whole number >= 0 (0 = no limit), got {dict_limit!r}.")


def _check_skip(skip: Iterable[str], known: list[str], where: str) -> set[str]:
    if isinstance(skip, str) or not all(isinstance(name, str) for name in skip):
        raise ValueError(f"interrogate_clip_skip_categories must be a list of category names, got {skip!r}.")
    unknown = sorted(set(skip) - set(known))
    if unknown:
        raise ValueError(f"interrogate_clip_skip_categories names {unknown}, which {where} does not have; "
                         f"its categories are {known}.")
    return set(skip)


def top_n_of(stem: str) -> int:
    """How many terms a list appends: N for a stem ending in `.topN` (at least 1), else 1."""
    match = TOP_N_SUFFIX.search(stem)
    return max(1, int(match.group(1))) if match else 1


def category_names(folder: str | Path) -> list[str]:
    """The category names of a folder (the stems of its `*.txt` files, sorted), for skip-list choices."""
    return sorted(path.stem for path in Path(folder).expanduser().glob("*.txt") if path.is_file())


def read_categories(folder: str | Path, *, skip: Iterable[str] = (), dict_limit: int = DEFAULT_DICT_LIMIT
                    ) -> list[Category]:
    """The categories of an A1111-style folder of `*.txt` word lists (one term a line), sorted by name.

    Blank lines are dropped (A1111 keeps them and may append an empty term). Raises ValueError for a missing
    folder, a folder with no lists, an empty list, or a skip name the folder does not have.
    """
    _check_dict_limit(dict_limit)
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ValueError(f"The interrogate categories folder {str(root)!r} does not exist; create it with one "
                         "*.txt word list per category (A1111's interrogate/ folder works as is) or fix the path.")
    names = category_names(root)
    if not names:
        raise ValueError(f"The interrogate categories folder {str(root)!r} has no *.txt word lists; add one "
                         "(e.g. mediums.txt, one term a line; flavors.top3.txt appends its 3 best).")
    skipped = _check_skip(skip, names, f"the folder {str(root)!r}")
    categories = []
    for name in names:
        if name in skipped:
            continue
        path = root / f"{name}.txt"
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"Cannot read the word list {str(path)!r} as UTF-8 text: {error}") from None
        items = tuple(line for line in lines if line)
        if not items:
            raise ValueError(f"The word list {str(path)!r} is empty; put one term a line in it, or remove it.")
        categories.append(Category(name, top_n_of(name), items[:dict_limit] if dict_limit else items))
    return categories


def builtin_categories(*, skip: Iterable[str] = (), dict_limit: int = DEFAULT_DICT_LIMIT) -> list[Category]:
    """The shapes-world lists (shapes, colours, sizes) ranked when no categories folder is given."""
    _check_dict_limit(dict_limit)
    skipped = _check_skip(skip, list(BUILTIN_CATEGORIES), "the built-in categories")
    return [Category(name, 1, items[:dict_limit] if dict_limit else items)
            for name, items in BUILTIN_CATEGORIES.items() if name not in skipped]
