"""Stand-in "CodeFormer" / "GFPGAN" restorers registered in the process's registry for a test (pipelines level: the
registry lives in pipelines.face_restoration, which mixkit.testing may not import)."""

from pathlib import Path

from mixkit.testing.tiny_face_restoration import (StandInRestorer, a1111_face_folders, planted_detector_loader,
                                                  stand_in_loader)


class registered_stand_ins:  # noqa: N801 - used as a context manager, named for what it does
    """Register stand-in "CodeFormer" and "GFPGAN" restorers in the process's FACE_RESTORERS for a `with` block:
    folders laid out under `root`, planted faces given in pixels of a width×height picture, restorers filling each
    face with `fill` (RGB in [-1, 1]) or returning it unchanged. `.loaders[name].network.weights` records the calls."""

    def __init__(self, root, faces, width: int, height: int, fill=(1.0, -1.0, 1.0)):
        self.root, self.faces, self.size, self.fill = Path(root), faces, (width, height), fill
        self.loaders: dict = {}

    def __enter__(self):
        from pipelines.face_restoration import FACE_RESTORERS, FaceRestorer

        folders = a1111_face_folders(self.root)
        for name in ("CodeFormer", "GFPGAN"):
            loader = stand_in_loader(name, StandInRestorer(fill=self.fill))
            self.loaders[name] = loader
            FACE_RESTORERS.register(name, FaceRestorer(name, folders[name], detector_folders=tuple(folders.values()),
                                                       loader=loader,
                                                       detector_loader=planted_detector_loader(self.faces, *self.size)),
                                    replace=True)
        self.folders = folders
        return self

    def __exit__(self, *exc_info):
        from pipelines.face_restoration import FACE_RESTORERS

        for name in ("CodeFormer", "GFPGAN"):
            if name in FACE_RESTORERS:
                FACE_RESTORERS.unregister(name)
        return False
