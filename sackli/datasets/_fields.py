"""Part of `sackli.datasets`' internal interface: field types and values,
for `sackli.arrow`, `sackli.beam` and `sackli.cli`.

Who may use it: those packages (`FieldType`, `decoders`, `DatasetWriter`
and the other public names come from `sackli.datasets` itself). No
stability promise. Each name is defined and documented where it says:

- a spec's field types: `parse_spec` (`_spec`) and their text, as a spec
  spells them, `type_text` (`_type_text`);
- a field's compression, as a spec names it: `parse_compression`
  (`_field_files`);
- encoding values: `encoder_table` (`_dataset_writer`: each field's
  encoder, the built-in ones and those given);
- masks: the check of a mask's shape without a spec, `check_mask`
  (`_mask`, the rules of the engine's dataset read plan);
- values read as their stored bytes: `bytes_identity` (`_codecs`).
"""

from __future__ import annotations

from ._codecs import bytes_identity
from ._dataset_writer import encoder_table
from ._field_files import parse_compression
from ._mask import check_mask
from ._spec import parse_spec
from ._type_text import type_text

__all__ = ["bytes_identity", "check_mask", "encoder_table", "parse_compression", "parse_spec",
           "type_text"]
