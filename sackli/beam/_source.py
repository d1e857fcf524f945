"""Reading byte ranges of bag files: the Beam sources behind `ReadFromSackli`
and the splittable DoFn behind `ReadAllFromSackli`.

Positions are bytes, as Beam's `desired_bundle_size` is. Record i of a file
sits at position `begin_i + 8 * i`, where `begin_i` is its offset in the
records section (from the limits): as if each record's 8-byte limit sat right
after it. Positions strictly increase, even across empty records, and spread
evenly over [0, size) (size = records + 8 bytes of limits per record, with
either placement), so a file splits into byte ranges from its size alone,
before it is opened, progress is proportional to bytes, and a range reads
the records whose positions fall inside it.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Iterator

from apache_beam import coders
from apache_beam.io import iobase, range_trackers
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.options.value_provider import ValueProvider
from apache_beam.transforms import core, display

from .. import Reader
from .._bulk import LIMIT_BYTES, ReaderOptions, record_offsets
from ._display import read_display_data
from ._files import DISALLOW, BagFile, estimate_pattern_size, expand_pattern
from ._lazy_concat import LazyConcatSource
from ._provided import value
from ._pipeline_storage import open_reader

__all__ = ["PatternSource", "FileSource", "ReadFileRanges", "first_at_or_after", "read_range"]

# Offsets are fetched this many records at a time while a range is read.
_OFFSETS_CHUNK = 4096


def _position(reader: Reader, i: int) -> int:
    return record_offsets(reader, 0, i, 0)[0] + LIMIT_BYTES * i


def first_at_or_after(reader: Reader, position: int) -> int:
    """The first record whose position is >= `position` (len when none).

    Positions spread evenly over the file, so the search starts at the
    record an even spread puts at `position`, widens in doubling steps
    until it brackets the answer, then bisects: the limits it reads lie
    near the answer (for a remote file: the limits pages a range needs
    anyway), not all over the file as a plain bisection's would.
    """
    n = len(reader)
    size = reader.stored_bytes + LIMIT_BYTES * n
    if n == 0 or position <= 0:
        return 0
    if position >= size:
        return n

    def before(i: int) -> bool:  # record i comes before the answer
        return _position(reader, i) < position

    guess = min(n - 1, position * n // size)
    step = 1
    if before(guess):  # the answer is in (guess, n]
        low, high = guess + 1, n
        while low + step - 1 < n:
            probe = low + step - 1
            if not before(probe):
                high = probe
                break
            low, step = probe + 1, step * 2
    else:  # the answer is in [0, guess]
        low, high = 0, guess
        while high - step >= 0:
            probe = high - step
            if before(probe):
                low = probe + 1
                break
            high, step = probe, step * 2
    while low < high:
        middle = (low + high) // 2
        if before(middle):
            low = middle + 1
        else:
            high = middle
    return low


def read_range(
    path: str,
    options: ReaderOptions,
    start: int,
    stop: int,
    try_claim: Callable[[int], bool],
    decode: Callable[[bytes], Any],
    with_metadata: bool,
) -> Generator[Any, None, bool]:
    """Yields the decoded records of `path` with positions in [start, stop),
    each after `try_claim(position)` accepts it (a tracker's, so dynamic
    splits stop the read where the runner wants). Records come from the
    engine in background batches, not one call each. Returns whether a
    claim was refused."""
    with open_reader(path, options) as reader:
        first = first_at_or_after(reader, start)
        last = first_at_or_after(reader, stop)
        records = reader.read_range_iter(first, last - first)
        for chunk in range(first, last, _OFFSETS_CHUNK):
            count = min(_OFFSETS_CHUNK, last - chunk)
            begins = record_offsets(reader, 0, chunk, count)
            for k in range(count):
                i = chunk + k
                if not try_claim(begins[k] + LIMIT_BYTES * i):
                    return True
                record = decode(next(records))
                yield (path, i, record) if with_metadata else record
    return False


def _decoder(coder: coders.Coder) -> Callable[[bytes], Any]:
    if type(coder) is coders.BytesCoder:
        return bytes  # records already are bytes; skip a call per record
    return coder.decode


def output_coder(coder: coders.Coder, with_metadata: bool) -> coders.Coder:
    """The coder of what a read yields."""
    if with_metadata:
        return coders.TupleCoder([coders.StrUtf8Coder(), coders.VarIntCoder(), coder])
    return coder


class FileSource(iobase.BoundedSource):
    """One bag file as a Beam source over positions [0, size)."""

    def __init__(
        self, file: BagFile, options: ReaderOptions, coder: coders.Coder, with_metadata: bool
    ) -> None:
        self._file = file
        self._options = options
        self._coder = coder
        self._with_metadata = with_metadata

    def estimate_size(self) -> int:
        return self._file.size

    def split(
        self, desired_bundle_size: int, start_position: int | None = None,
        stop_position: int | None = None,
    ) -> Iterator[iobase.SourceBundle]:
        start = 0 if start_position is None else start_position
        stop = self._file.size if stop_position is None else stop_position
        step = max(1, desired_bundle_size)
        for begin in range(start, stop, step):
            end = min(stop, begin + step)
            yield iobase.SourceBundle(end - begin, self, begin, end)

    def get_range_tracker(
        self, start_position: int | None, stop_position: int | None
    ) -> range_trackers.OffsetRangeTracker:
        start = 0 if start_position is None else start_position
        stop = self._file.size if stop_position is None else stop_position
        return range_trackers.OffsetRangeTracker(start, stop)

    def read(self, range_tracker: range_trackers.OffsetRangeTracker) -> Iterator[Any]:
        return read_range(
            self._file.path, self._options,
            range_tracker.start_position(), range_tracker.stop_position(),
            range_tracker.try_claim, _decoder(self._coder), self._with_metadata,
        )

    def default_output_coder(self) -> coders.Coder:
        return output_coder(self._coder, self._with_metadata)

    def display_data(self) -> dict[str, Any]:
        return {"file": display.DisplayDataItem(self._file.path, label="File")}


class PatternSource(LazyConcatSource):
    """Every file of a pattern; the files are listed lazily, on workers."""

    def __init__(
        self, pattern: str | ValueProvider, options: ReaderOptions, coder: coders.Coder,
        with_metadata: bool, empty_match_treatment: str = DISALLOW,
    ) -> None:
        self._pattern = pattern
        self._options = options
        self._coder = coder
        self._with_metadata = with_metadata
        self._empty_match_treatment = empty_match_treatment

    @property
    def pattern(self) -> str:
        """The file pattern; a template's (a ValueProvider) is read, and
        checked, when it is needed: on the workers."""
        return value(self._pattern)

    def validate(self) -> None:
        """Raises unless every file of the pattern exists (I/O: listings)."""
        expand_pattern(self.pattern, self._options, self._empty_match_treatment)

    def _files(self) -> list[BagFile]:
        """The pattern's files that hold records (an empty bag has none)."""
        files = expand_pattern(self.pattern, self._options, self._empty_match_treatment)
        return [f for f in files if f.size > 0]

    def _file_sources(self) -> list[FileSource]:
        return [FileSource(f, self._options, self._coder, self._with_metadata) for f in self._files()]

    def _parts(self) -> list[FileSource]:
        return self._file_sources()

    def estimate_size(self) -> int:
        return estimate_pattern_size(self.pattern, self._options, self._empty_match_treatment)

    def default_output_coder(self) -> coders.Coder:
        return output_coder(self._coder, self._with_metadata)

    def display_data(self) -> dict[str, Any]:
        return read_display_data(
            self._options, self._coder, self._with_metadata,
            file_pattern=self._pattern, empty_match_treatment=self._empty_match_treatment,
        )


class ReadFileRanges(core.DoFn, core.RestrictionProvider):
    """A splittable DoFn reading the records of `BagFile` elements; it is
    its own restriction provider: a file's restriction is its positions
    [0, size), split into ranges of about `bundle_bytes`, and the runner may
    split a range further while it is read."""

    def __init__(
        self, options: ReaderOptions | ValueProvider, coder: coders.Coder, with_metadata: bool,
        bundle_bytes: int | ValueProvider,
    ) -> None:
        # A template's ValueProviders are read where they are used: on workers.
        self._options = options
        self._decode = _decoder(coder)
        self._with_metadata = with_metadata
        self._bundle_bytes = bundle_bytes

    def initial_restriction(self, element: BagFile) -> OffsetRange:
        return OffsetRange(0, element.size)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return OffsetRestrictionTracker(restriction)

    def split(self, element: BagFile, restriction: OffsetRange) -> Iterator[OffsetRange]:
        return restriction.split(value(self._bundle_bytes))  # a template's: on the workers

    def restriction_size(self, element: BagFile, restriction: OffsetRange) -> int:
        return restriction.size()

    def process(
        self,
        element: BagFile,
        tracker: OffsetRestrictionTracker = core.DoFn.RestrictionParam(),
    ) -> Iterator[Any]:
        restriction = tracker.current_restriction()
        refused = yield from read_range(
            element.path, value(self._options), restriction.start, restriction.stop,
            tracker.try_claim, self._decode, self._with_metadata,
        )
        if not refused:  # no record is left in the range: claim its end
            tracker.try_claim(tracker.current_restriction().stop)
