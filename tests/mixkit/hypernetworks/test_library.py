"""The hypernetworks folder: A1111's listing (recursive .pt files by stem), lookups with close names, reloads."""

from __future__ import annotations

import os

import pytest

from mixkit.errors import ModelNotFoundError
from mixkit.hypernetworks import HypernetworkLibrary
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork


@pytest.fixture()
def folder(tmp_path):
    root = tmp_path / "hypernetworks"
    for relative in ("anime_3.pt", "Zeta.pt", "sub/beta.pt", "None.pt"):
        write_a1111_hypernetwork(root / relative, widths=(8,))
    (root / "style.safetensors").write_bytes(b"x")  # A1111 lists only .pt files as hypernetworks
    (root / "notes.txt").write_text("x")
    return root


def test_listing_is_a1111s(folder):
    entries = HypernetworkLibrary(folder).entries()
    # sorted case-insensitively by path, "None" left out (A1111 reserves it for "no hypernetwork")
    assert [(entry.name, entry.path) for entry in entries] == [
        ("anime_3", folder / "anime_3.pt"), ("beta", folder / "sub" / "beta.pt"), ("Zeta", folder / "Zeta.pt")]


def test_a_stem_in_two_folders_is_the_last_sorted_file_as_a1111s_dict_keeps(folder):
    write_a1111_hypernetwork(folder / "a" / "beta.pt", widths=(8,))
    library = HypernetworkLibrary(folder)
    assert library.names().count("beta") == 1
    assert library.resolve("beta") == folder / "sub" / "beta.pt"


def test_an_unknown_name_lists_the_closest(folder):
    with pytest.raises(ModelNotFoundError, match=r"hypernetwork 'anime3' not found.*Did you mean anime_3\?"):
        HypernetworkLibrary(folder).resolve("anime3")
    with pytest.raises(ModelNotFoundError, match="case-sensitive"):
        HypernetworkLibrary(folder).resolve("zeta")


def test_a_tag_name_is_never_a_path(folder, tmp_path):
    write_a1111_hypernetwork(tmp_path / "outside.pt", widths=(8,))
    with pytest.raises(ModelNotFoundError):
        HypernetworkLibrary(folder).resolve("../outside")


def test_a_missing_folder_is_refused():
    with pytest.raises(ModelNotFoundError, match="hypernetwork folder not found"):
        HypernetworkLibrary("/no/such/folder")


def test_a_file_is_read_once_and_again_when_it_changes(folder):
    library = HypernetworkLibrary(folder)
    first = library.load("anime_3")
    assert library.load("anime_3") is first
    write_a1111_hypernetwork(folder / "anime_3.pt", widths=(8, 16), seed=5)
    stat = (folder / "anime_3.pt").stat()
    os.utime(folder / "anime_3.pt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert library.load("anime_3").widths == [8, 16]


def test_files_added_later_are_found_without_a_refresh(folder):
    library = HypernetworkLibrary(folder)
    library.names()
    write_a1111_hypernetwork(folder / "late.pt", widths=(8,))
    assert "late" in library.names()
