"""The differential fuzzer of sackli: mutants of small bags are read through
every read path of sackli, with every option combination, in child
processes, and compared with an independent pure-Python reader of the
format (fuzz/oracle.py). See docs/fuzzing.md."""
