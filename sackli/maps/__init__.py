"""Integer-keyed maps, byte-compatible with seung-lab's `mapbuffer` 1.2.0:
``from sackli.maps import MapBuffer, IntMap`` replaces
``from mapbuffer import MapBuffer, IntMap``.

`MapBuffer` maps uint64 keys to bytes, `IntMap` uint64 keys to uint64 values;
both are read without parsing (the engine searches the Eytzinger-ordered
index and checks each value's crc32c), from bytes, files, paths or any object
answering ``obj[a:b]``. `MapBuffer.get_many` looks up many keys at once, in
parallel; `write` builds a map file from pairs in any order without holding
every value in memory. Paths may be `gs://` or `s3://` URLs. See docs/maps.md.

Other packages import only this module.
Internal interface: none
"""

from ._errors import ValidationError
from ._int_map import IntMap
from ._map_buffer import FORMAT_VERSION, HEADER_LENGTH, MAGIC_NUMBERS, MapBuffer
from ._write import write

__all__ = ["FORMAT_VERSION", "HEADER_LENGTH", "MAGIC_NUMBERS", "IntMap", "MapBuffer",
           "ValidationError", "write"]
