"""Word lists as A1111 reads its interrogate/ folder: top-N names, the line limit, skipped and broken lists."""

from __future__ import annotations

import pytest

from mixkit.interrogate.categories import BUILTIN_CATEGORIES, builtin_categories, read_categories, top_n_of


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "mediums.txt").write_text("oil painting\n\n  watercolor  \nphotograph\n", encoding="utf-8")
    (tmp_path / "flavors.top3.txt").write_text("\n".join(f"flavor {i}" for i in range(10)), encoding="utf-8")
    (tmp_path / "notes.md").write_text("not a list", encoding="utf-8")
    return tmp_path


def test_every_txt_is_a_category_named_by_its_stem_with_its_top_n(folder):
    categories = read_categories(folder)
    assert [(c.name, c.top_n) for c in categories] == [("flavors.top3", 3), ("mediums", 1)]
    assert categories[1].items == ("oil painting", "watercolor", "photograph")  # stripped, blank lines dropped


@pytest.mark.parametrize("stem, top_n", [("artists", 1), ("flavors.top3", 3), ("a.top12", 12), ("top3", 1),
                                         ("x.top0", 1), ("x.top3.old", 1)])
def test_top_n_comes_from_a_trailing_topN(stem, top_n):
    assert top_n_of(stem) == top_n


def test_dict_limit_keeps_the_first_lines_and_zero_keeps_all(folder):
    assert read_categories(folder, dict_limit=4)[0].items == ("flavor 0", "flavor 1", "flavor 2", "flavor 3")
    assert len(read_categories(folder, dict_limit=0)[0].items) == 10
    assert builtin_categories(dict_limit=2)[0].items == BUILTIN_CATEGORIES["shapes"][:2]


def test_skipped_categories_are_left_out(folder):
    assert [c.name for c in read_categories(folder, skip=["flavors.top3"])] == ["mediums"]
    assert [c.name for c in builtin_categories(skip=["sizes", "shapes"])] == ["colours"]


@pytest.mark.parametrize("make, message", [
    (lambda root: root / "missing", "does not exist"),
    (lambda root: root, "has no *.txt word lists"),
])
def test_a_missing_or_empty_folder_is_refused(tmp_path, make, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        read_categories(make(tmp_path))


def test_an_empty_list_and_an_unknown_skip_name_are_refused_naming_them(folder):
    with pytest.raises(ValueError, match=r"names \['flavours'\].*\['flavors.top3', 'mediums'\]"):
        read_categories(folder, skip=["flavours"])
    with pytest.raises(ValueError, match=r"names \['artists'\].*built-in"):
        builtin_categories(skip=["artists"])
    (folder / "empty.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty.txt' is empty"):
        read_categories(folder)


@pytest.mark.parametrize("limit", [-1, 1.5, True, "10"])
def test_a_bad_dict_limit_is_refused(folder, limit):
    with pytest.raises(ValueError, match="interrogate_clip_dict_limit"):
        read_categories(folder, dict_limit=limit)
