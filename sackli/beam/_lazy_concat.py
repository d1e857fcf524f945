"""`LazyConcatSource`: a Beam source made of sources it finds only on the
workers (files of a pattern, shards of a dataset), so that building a
pipeline does no I/O."""

from __future__ import annotations

from typing import Any, Iterator

from apache_beam.io import iobase
from apache_beam.io.concat_source import ConcatSource

__all__ = ["LazyConcatSource"]


class LazyConcatSource(iobase.BoundedSource):
    """Splits into the sources `_parts()` lists (each split further), and
    reads as their concatenation. Subclasses implement `_parts`."""

    _concat: ConcatSource | None = None
    _listed: list[iobase.BoundedSource] | None = None

    def _parts(self) -> list[iobase.BoundedSource]:
        """The sources this one is made of (may do I/O: runs on workers)."""
        raise NotImplementedError

    def _listed_parts(self) -> list[iobase.BoundedSource]:
        # Listed once per copy of the source: split and read both need them.
        if self._listed is None:
            self._listed = self._parts()
        return self._listed

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_concat"] = state["_listed"] = None  # workers list the parts themselves
        return state

    def _concat_source(self) -> ConcatSource:
        if self._concat is None:
            self._concat = ConcatSource(
                [iobase.SourceBundle(s.estimate_size(), s, None, None)
                 for s in self._listed_parts()])
        return self._concat

    def split(
        self, desired_bundle_size: int, start_position: Any = None, stop_position: Any = None
    ) -> Iterator[iobase.SourceBundle]:
        # Runners split the whole source once; positions belong to the
        # parts it splits into (as for Beam's ConcatSource).
        if start_position is not None or stop_position is not None:
            raise ValueError(f"a {type(self).__name__} splits whole; split its parts")
        for source in self._listed_parts():
            yield from source.split(desired_bundle_size)

    def get_range_tracker(self, start_position: Any, stop_position: Any) -> Any:
        return self._concat_source().get_range_tracker(start_position, stop_position)

    def read(self, range_tracker: Any) -> Iterator[Any]:
        return self._concat_source().read(range_tracker)
