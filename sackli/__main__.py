"""`python -m sackli`: the sackli command line."""

from sackli.cli import main

raise SystemExit(main())
