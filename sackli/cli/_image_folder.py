"""An image folder as torchvision's `ImageFolder` lays it out, for
`sackli convert`: `root/<class>/**/<image>`, one class per subfolder.

Classes are the subfolders' names in sorted order, numbered from 0 (as
`ImageFolder.find_classes` numbers them); a class's images are found
recursively, in the order `ImageFolder` takes them (folders sorted by path,
then each folder's files by name), so the same folder always gives the same
records in the same order. Unlike torchvision, hidden files and folders
(names starting with ".", e.g. .DS_Store) are passed over, also as
classes. Everything else is checked before a record is written: a file
beside the class folders, a file whose extension is not an image's, an
empty class or an empty folder is an error naming it (torchvision skips
such files silently; a conversion that drops data should say so). Images
are stored as their file's bytes: their content is not decoded here (that
is the loader's `transform=`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterator


__all__ = ["IMAGE_EXTENSIONS", "ImageFile", "scan_image_folder"]

# torchvision's IMG_EXTENSIONS, compared without case.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@dataclasses.dataclass(frozen=True)
class ImageFile:
    """One image of the folder: its path, its path relative to the root
    (with "/", as stored), and its class's number."""

    path: str
    relative: str
    label: int


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _images_of(root: str, class_folder: str, label: int) -> Iterator[ImageFile]:
    """The images under one class folder, in torchvision's order: folders
    sorted by their paths, the files of each sorted by name."""
    walked = []
    for folder, subfolders, names in os.walk(os.path.join(root, class_folder), followlinks=True):
        subfolders[:] = [name for name in subfolders if not _hidden(name)]
        walked.append((folder, names))
    for folder, names in sorted(walked):
        for name in sorted(names):
            if _hidden(name):
                continue
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if not name.lower().endswith(IMAGE_EXTENSIONS):
                raise ValueError(
                    f"{path}: not an image by its extension (known: "
                    f"{', '.join(IMAGE_EXTENSIONS)}); move it out of {root} or rename it")
            yield ImageFile(path, relative, label)


def scan_image_folder(root: str) -> tuple[list[str], list[ImageFile]]:
    """(class names, images in order) of the image folder `root`.

    Raises ValueError for a folder with no class subfolder, a file beside
    the class folders, a class without images or a file that is not an
    image by its extension; OSError when the folder cannot be listed.
    """
    entries = sorted(name for name in os.listdir(root) if not _hidden(name))
    stray = [name for name in entries if not os.path.isdir(os.path.join(root, name))]
    if stray:
        raise ValueError(
            f"{os.path.join(root, stray[0])}: a file beside the class folders of the image "
            f"folder {root} (images go in one subfolder per class: {root}/<class>/<image>)")
    if not entries:
        raise ValueError(f"{root}: an empty folder (an image folder holds one subfolder per "
                         f"class: {root}/<class>/<image>)")
    images: list[ImageFile] = []
    for label, name in enumerate(entries):
        found = list(_images_of(root, name, label))
        if not found:
            raise ValueError(f"{os.path.join(root, name)}: class {name!r} has no images")
        images.extend(found)
    return entries, images
