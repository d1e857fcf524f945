"""`sackli convert` from training samples (sackli/cli/_samples.py): an image
folder in torchvision's ImageFolder layout and WebDataset tars, into row
bag sets that sackli.arrow and RowDecoder read back. Real PNG/JPEG files
(Pillow) and real tars (tarfile)."""

from __future__ import annotations

import io
import json
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

import sackli
import sackli.arrow
from cli_helpers import fails, ok, on_terminal  # registered by conftest.py

# The CLI of this checkout: `python -m sackli` with the test's interpreter.
HERE = {"module": True}


def _image(path, value: int, image_format: str = "PNG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 5, 3), value, np.uint8)).save(path, format=image_format)


def _image_folder(root) -> list[tuple[str, int]]:
    """A small ImageFolder tree; (relative path, label) in the order expected."""
    _image(root / "dog" / "b.png", 1)
    _image(root / "dog" / "a.JPG", 2, "JPEG")
    _image(root / "dog" / "z" / "deep.png", 3)
    _image(root / "dog" / "m" / "c.jpeg", 4, "JPEG")
    _image(root / "cat" / "1.png", 5)
    (root / "cat" / ".DS_Store").write_bytes(b"hidden: passed over")
    (root / ".git").mkdir()  # a hidden folder is no class
    # Classes sorted (cat 0, dog 1); a folder's files before its subfolders,
    # subfolders by path.
    return [("cat/1.png", 0), ("dog/a.JPG", 1), ("dog/b.png", 1), ("dog/m/c.jpeg", 1),
            ("dog/z/deep.png", 1)]


def test_image_folder_becomes_rows_of_image_bytes_label_and_path(tmp_path):
    expected = _image_folder(tmp_path / "imgs")
    out = ok("convert", "imgs", "train@2.bagz", cwd=tmp_path, **HERE)
    assert out == (b"converted 5 samples from imgs (image folder) to 2 shards, "
                   b"train-00000-of-00002.bagz ... train-00001-of-00002.bagz\n")
    table = sackli.arrow.read_table(str(tmp_path / "train@*.bagz"))
    assert table.schema.names == ["image", "label", "path"]
    assert [str(t) for t in table.schema.types] == ["binary", "int64", "string"]
    assert json.loads(table.schema.metadata[b"classes"]) == ["cat", "dog"]
    rows = table.to_pylist()
    assert [(row["path"], row["label"]) for row in rows] == expected
    for row in rows:  # the files' own bytes, not re-encoded
        assert row["image"] == (tmp_path / "imgs" / row["path"]).read_bytes()
    assert sackli.Reader(str(tmp_path / "train@*.bagz")).shard_sizes == [3, 2]


def test_image_folder_conversion_is_deterministic(tmp_path):
    _image_folder(tmp_path / "imgs")
    ok("convert", "imgs/", "a.bag", cwd=tmp_path, **HERE)
    ok("convert", "imgs", "b.bag", cwd=tmp_path, **HERE)
    assert (tmp_path / "a.bag").read_bytes() == (tmp_path / "b.bag").read_bytes()


def test_row_decoder_gives_samples_in_a_loader_transform(tmp_path):
    _image_folder(tmp_path / "imgs")
    ok("convert", "imgs", "train.bagz", cwd=tmp_path, **HERE)
    spec = str(tmp_path / "train.bagz")
    rows = pickle.loads(pickle.dumps(sackli.arrow.RowDecoder(spec)))  # as a worker gets it
    reader = sackli.Reader(spec)
    first = rows(reader[0])
    assert (first["label"], first["path"]) == (0, "cat/1.png")
    pixels = np.asarray(Image.open(io.BytesIO(first["image"])))
    assert pixels.shape == (6, 5, 3) and (pixels == 5).all()
    labels = sackli.arrow.RowDecoder(spec, columns=["label"]).decode_many(list(reader))
    assert labels == [{"label": 0}] + [{"label": 1}] * 4
    with pytest.raises(sackli.CorruptionError, match="train.bagz"):
        rows(b"not a row")


@pytest.mark.parametrize("make, message", [
    (lambda root: root.mkdir(), "imgs: an empty folder"),
    (lambda root: (_image(root / "a" / "x.png", 1), (root / "b").mkdir()),
     "imgs/b: class 'b' has no images"),
    (lambda root: (_image(root / "a" / "x.png", 1), (root / "a" / "notes.txt").write_text("x")),
     "imgs/a/notes.txt: not an image by its extension"),
    (lambda root: (_image(root / "a" / "x.png", 1), (root / "labels.csv").write_text("x")),
     "imgs/labels.csv: a file beside the class folders"),
])
def test_image_folder_problems_are_named(tmp_path, make, message):
    make(tmp_path / "imgs")
    assert message in fails("convert", "imgs", "out.bag", cwd=tmp_path, **HERE)
    assert not list(tmp_path.glob("out*"))


def test_image_folder_destination_and_flags_are_checked(tmp_path):
    _image_folder(tmp_path / "imgs")
    assert "image folders convert to bags (.bag, .bagz) only" in fails(
        "convert", "imgs", "out.tfrecord", cwd=tmp_path, status=2, **HERE)
    assert "do not apply to image folder sources" in fails(
        "convert", "imgs", "out.bag", "--encoding", "json", cwd=tmp_path, status=2, **HERE)
    ok("convert", "imgs", "out.bagz", "--level", "9", cwd=tmp_path, **HERE)
    assert "out.bagz exists; pass --force" in fails("convert", "imgs", "out.bagz", cwd=tmp_path,
                                                    **HERE)
    ok("convert", "imgs", "out.bagz", "--force", cwd=tmp_path, **HERE)
    ok("convert", "imgs", "by_size@*.bag", "--max-shard-bytes", "1500", cwd=tmp_path, **HERE)
    assert len(sackli.Reader(str(tmp_path / "by_size@*.bag")).shard_sizes) > 1


def test_a_dataset_folder_is_not_an_image_folder(tmp_path):
    from sackli import datasets

    with datasets.DatasetWriter(tmp_path / "ds", {"label": "int(8)"}) as writer:
        writer.append({"label": 1})
    assert "cannot tell the format" in fails("convert", "ds", "out.bag", cwd=tmp_path,
                                             status=2, **HERE)


def test_image_folder_shows_a_progress_bar_on_a_terminal(tmp_path):
    _image_folder(tmp_path / "imgs")
    status, _, shown = on_terminal("convert", "imgs", "out.bag", cwd=tmp_path, **HERE)
    assert status == 0, shown
    assert "| 0/5 [00:00<?, ? rows/s]" in shown


# --- WebDataset ---------------------------------------------------------------


def _tar(path, files: list[tuple[str, bytes]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


SHARD_0 = [("train/0001.jpg", b"J1"), ("train/0001.cls", b"3"),
           ("train/0002.jpg", b"J2"), ("train/0002.cls", b"4"),
           ("train/0002.seg.PNG", b"S2")]
SHARD_1 = [("train/0003.cls", b"5"), ("0004.jpg", b"J4")]


def test_webdataset_tars_become_one_row_per_sample(tmp_path):
    # Written out of order (the glob's matches are sorted); gzip inside a .tar reads too.
    _tar(tmp_path / "shard-000001.tar", SHARD_1, "w:gz")
    _tar(tmp_path / "shard-000000.tar", SHARD_0)
    out = ok("convert", "shard-*.tar", "wds.bagz", cwd=tmp_path, **HERE)
    assert out == b"converted 4 samples from shard-*.tar (webdataset) to wds.bagz\n"
    table = sackli.arrow.read_table(str(tmp_path / "wds.bagz"))
    assert table.schema.names == ["__key__", "cls", "jpg", "seg.png"]
    assert table.to_pylist() == [
        {"__key__": "train/0001", "cls": b"3", "jpg": b"J1", "seg.png": None},
        {"__key__": "train/0002", "cls": b"4", "jpg": b"J2", "seg.png": b"S2"},
        {"__key__": "train/0003", "cls": b"5", "jpg": None, "seg.png": None},
        {"__key__": "0004", "cls": None, "jpg": b"J4", "seg.png": None},
    ]


def test_webdataset_tars_as_a_list_keep_the_order_given(tmp_path):
    _tar(tmp_path / "b.tar", SHARD_0)
    _tar(tmp_path / "a.tgz", SHARD_1, "w:gz")
    ok("convert", "b.tar,a.tgz", "wds@2.bag", cwd=tmp_path, **HERE)
    keys = sackli.arrow.read_table(str(tmp_path / "wds@*.bag")).column("__key__").to_pylist()
    assert keys == ["train/0001", "train/0002", "train/0003", "0004"]


def test_a_key_that_comes_back_later_is_another_sample(tmp_path):
    # webdataset groups consecutive files; so does convert.
    _tar(tmp_path / "s.tar", [("k.a", b"1"), ("j.a", b"2"), ("k.b", b"3")])
    ok("convert", "s.tar", "s.bag", cwd=tmp_path, **HERE)
    assert sackli.arrow.read_table(str(tmp_path / "s.bag")).to_pylist() == [
        {"__key__": "k", "a": b"1", "b": None}, {"__key__": "j", "a": b"2", "b": None},
        {"__key__": "k", "a": None, "b": b"3"}]


def _truncated(path) -> None:
    _tar(path, [("a.bin", bytes(range(256)) * 40)])
    path.write_bytes(path.read_bytes()[:3000])


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(b"this is no tar file at all" * 40),
     "bad.tar: not a readable tar file"),
    (_truncated,
     "bad.tar: not a readable tar file (damaged or cut short: unexpected end of data)"),
    (lambda p: _tar(p, [("k.jpg", b"1"), ("k.JPG", b"2")]),
     "bad.tar: 'k.JPG': sample 'k' has a second 'jpg' file"),
    (lambda p: _tar(p, [("README", b"1")]), "bad.tar: 'README' has no extension"),
    (lambda p: _tar(p, []), "bad.tar: the tar file(s) hold no files"),
])
def test_webdataset_problems_are_named(tmp_path, make, message):
    make(tmp_path / "bad.tar")
    assert message in fails("convert", "bad.tar", "out.bag", cwd=tmp_path, **HERE)
    assert not list(tmp_path.glob("out*"))


def test_webdataset_tars_that_are_not_there(tmp_path):
    assert "nothing-*.tar: no tar file matches" in fails(
        "convert", "nothing-*.tar", "out.bag", cwd=tmp_path, **HERE)
    assert "missing.tar: no such tar file" in fails(
        "convert", "missing.tar", "out.bag", cwd=tmp_path, **HERE)
    assert "s3://b/x.tar: WebDataset tars convert from local files" in fails(
        "convert", "s3://b/x.tar", "out.bag", cwd=tmp_path, status=2, **HERE)


def test_a_folder_of_parquet_files_is_not_an_image_folder(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "events.parquet").mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "events.parquet" / "part-0.parquet")
    assert ok("convert", "events.parquet", "events.bag", cwd=tmp_path, **HERE).startswith(
        b"converted events.parquet to events.bag")
    assert sackli.arrow.read_table(str(tmp_path / "events.bag")).to_pylist() == [
        {"id": 1}, {"id": 2}]
