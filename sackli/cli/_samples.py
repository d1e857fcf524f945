"""`sackli convert` from training samples: an image folder (torchvision's
`ImageFolder` layout, `_image_folder`) or WebDataset tars (`_webdataset`),
into a row bag set.

Each sample becomes one record in the Arrow row format, with the schema
written beside the shards (sackli.arrow, as for Parquet sources):

- image folder: `image` (binary: the file's bytes), `label` (int64: the
  class's number) and `path` (string: relative to the folder); the class
  names, in label order, are in the schema's metadata under `classes`
  (JSON);
- WebDataset: `__key__` (string) and one binary column per extension found
  in the tars, sorted (null where a sample has no such file).

Why a row bag and not a `sackli.datasets` folder: convert's destinations
are bag specs (`name@N.bagz`, `name@*.bagz` with --max-shard-bytes, the
zstd flags, --force), and a row bag keeps a sample in one record, so a
shuffled epoch reads one record per sample; `sackli.arrow.RowDecoder`
turns a record back into a dict in a loader's `transform=`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from typing import Any, Iterator

import sackli

from .._sets import check_shard_count, refuse_other_sets, sniff_folder
from ._endpoints import BAG, bag_writer_options, format_of, refuse_existing
from ._errors import UsageError
from ._escapes import escape_name
from ._image_folder import scan_image_folder
from ._json_records import mark_bag_set
from ._webdataset import WEBDATASET_SUFFIXES, samples, scan_tars

__all__ = ["IMAGE_FOLDER", "WEBDATASET", "convert_samples", "sample_source"]

IMAGE_FOLDER, WEBDATASET = "image folder", "webdataset"
# A batch of samples handed to the Arrow writer: this many, or about this
# many bytes, whichever comes first (memory stays bounded).
_BATCH_SAMPLES = 1024
_BATCH_BYTES = 16 << 20
_GLOB_CHARACTERS = "*?["
# What makes a folder a sackli.datasets folder (one shard, or sharded).
_DATASET_SPECS = (("spec.json",), ("000000", "spec.json"))


def sample_source(src: str) -> str | None:
    """IMAGE_FOLDER, WEBDATASET, or None when `src` is neither: a local
    folder (not a `sackli.datasets` folder, a folder named with a format's
    suffix or one holding Parquet files), or tars by name (`.tar`,
    `.tar.gz`, `.tgz`: a path, a glob or a comma-separated list)."""
    entries = src.split(",")
    if all(entry.endswith(WEBDATASET_SUFFIXES) for entry in entries):
        return WEBDATASET
    if len(entries) > 1 or not os.path.isdir(src) or any(  # sackli.datasets' rule
            os.path.exists(os.path.join(src, *name)) for name in _DATASET_SPECS):
        return None
    try:
        format_of(src.rstrip("/"))  # a folder of Parquet files named x.parquet
        return None
    except UsageError:
        pass
    return None if sniff_folder(src) is not None else IMAGE_FOLDER


def _tar_paths(src: str) -> list[str]:
    """The tars of `src`, in order: each entry as given, a glob's matches
    sorted; FileNotFoundError for an entry that matches nothing."""
    paths: list[str] = []
    for entry in src.split(","):
        if "://" in entry:
            raise UsageError(f"{entry}: WebDataset tars convert from local files; copy them "
                             "here first (the shards written may go to gs:// or s3://)")
        if any(c in entry for c in _GLOB_CHARACTERS):
            found = sorted(glob.glob(entry))
            if not found:
                raise FileNotFoundError(2, f"{entry}: no tar file matches", entry)
            paths.extend(found)
        elif not os.path.isfile(entry):
            raise FileNotFoundError(2, f"{entry}: no such tar file", entry)
        else:
            paths.append(entry)
    return paths


def _batched(rows: Iterator[dict[str, Any]], size_of: Any) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        batch.append(row)
        size += size_of(row)
        if len(batch) >= _BATCH_SAMPLES or size >= _BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _image_folder_table(root: str) -> Any:
    """The image folder as a TableStream (schema, batches, row count)."""
    import pyarrow as pa

    from ..arrow._codecs import TableStream

    classes, images = scan_image_folder(root.rstrip("/") or root)
    schema = pa.schema([pa.field("image", pa.binary(), nullable=False),
                        pa.field("label", pa.int64(), nullable=False),
                        pa.field("path", pa.string(), nullable=False)],
                       metadata={"classes": json.dumps(classes)})

    def rows() -> Iterator[dict[str, Any]]:
        for image in images:
            with open(image.path, "rb") as file:
                yield {"image": file.read(), "label": image.label, "path": image.relative}

    batches = (pa.RecordBatch.from_pylist(batch, schema=schema)
               for batch in _batched(rows(), lambda row: len(row["image"])))
    return TableStream(schema, batches, len(images))


def _webdataset_table(src: str) -> Any:
    """The tars as a TableStream; ValueError when they hold no sample."""
    import pyarrow as pa

    from ..arrow._codecs import TableStream

    paths = _tar_paths(src)
    scan = scan_tars(paths)
    if scan.num_samples == 0:
        raise ValueError(f"{src}: the tar file(s) hold no files, so no WebDataset sample")
    if "__key__" in scan.fields:
        raise ValueError(f"{src}: a file with the extension __key__ (the key's own column)")
    schema = pa.schema([pa.field("__key__", pa.string(), nullable=False)]
                       + [pa.field(field, pa.binary()) for field in scan.fields])

    def rows() -> Iterator[dict[str, Any]]:
        for key, fields in samples(paths):
            yield {"__key__": key, **fields}

    batches = (pa.RecordBatch.from_pylist(batch, schema=schema)
               for batch in _batched(rows(), lambda row: sum(
                   len(value) for name, value in row.items() if name != "__key__")))
    return TableStream(schema, batches, scan.num_samples)


def convert_samples(source_kind: str, args: argparse.Namespace, force_advice: str) -> int:
    """Converts an image folder or WebDataset tars to the bag set DST
    (an existing one is refused, with `force_advice`, unless --force)."""
    try:
        from .. import arrow
    except ImportError as error:
        raise ValueError(f"converting {source_kind}s needs pyarrow: "
                         f"pip install 'sackli-bagz[arrow]' ({error})") from None
    if not args.dst.split("@")[-1].endswith((".bag", ".bagz")) or "," in args.dst:
        raise UsageError(f"{args.dst}: {source_kind}s convert to bags (.bag, .bagz) only")
    if (args.column is not None or args.skip_nulls or args.encoding != "auto"
            or args.decode != "auto" or args.skip_corrupt):
        raise UsageError("--column, --skip-nulls, --encoding, --decode and --skip-corrupt do "
                         f"not apply to {source_kind} sources")
    try:
        check_shard_count(args.dst)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not args.force:
        refuse_existing(BAG, args.dst)
        refuse_other_sets(args.dst, None, force_advice)
    if source_kind == IMAGE_FOLDER:
        table = _image_folder_table(args.src)
    else:
        table = _webdataset_table(args.src)
    options = bag_writer_options(args.dst, args)
    if args.level is None and not args.dictionary:
        del options["compression"]  # by suffix, as for Parquet (docs/arrow.md)
    paths = arrow.write_table(
        table, args.dst, encoding="row", options=sackli.Writer.Options(**options),
        max_shard_bytes=args.max_shard_bytes, overwrite=args.force)
    mark_bag_set(paths, json_texts=False)
    shown = paths[0] if len(paths) == 1 else f"{len(paths)} shards, {paths[0]} ... {paths[-1]}"
    print(f"converted {table.num_rows} samples from {escape_name(args.src)} "
          f"({source_kind}) to {escape_name(shown)}")
    return 0
