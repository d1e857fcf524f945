"""python -m fuzz run|replay|corpus ... (see docs/fuzzing.md)."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from . import runner


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=2, help="child processes (default 2)")
    parser.add_argument("--remote", action="store_true",
                        help="also read every input from a local moto S3 server (s3://)")
    parser.add_argument("--work-dir", help="where mutants, the corpus and logs go (default: a temporary "
                        "folder under $SACKLI_FUZZ_TMP or the system's; it needs O_DIRECT for DIRECT_IO)")
    parser.add_argument("--remote-every", type=int, default=4,
                        help="with --remote, read every N-th mutant remotely too (default 4)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds without progress before a child counts as hung (default 20)")
    parser.add_argument("--regressions", default=str(runner.REGRESSIONS),
                        help="folder of regression cases (default fuzz/regressions)")
    parser.add_argument("--save-to", help="where new regression cases go (default: --regressions)")
    parser.add_argument("--paths", help="comma-separated read paths (default: all)")
    parser.add_argument("--report", help="write the full report as JSON here")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description="sackli's differential fuzzer")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="replay the regressions, then fuzz")
    run.add_argument("--seconds", type=float, default=60)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--max-mutants", type=int)
    run.add_argument("--max-minimize", type=int, default=8,
                     help="new kinds of failure minimised and saved per run (default 8)")
    run.add_argument("--seeds", help="comma-separated seed names to mutate (default: all; see "
                     "`python -m fuzz corpus DIR`)")
    run.add_argument("--no-replay", action="store_true", help="skip the regression cases")
    _common(run)
    replay = commands.add_parser("replay", help="replay the regression cases only")
    _common(replay)
    corpus = commands.add_parser("corpus", help="write the seed corpus to a folder")
    corpus.add_argument("out_dir")
    corpus.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    if args.command == "corpus":
        from .corpus import main as corpus_main

        return corpus_main([args.out_dir, "--seed", str(args.seed)])
    options = dict(jobs=args.jobs, remote=args.remote, work_dir=args.work_dir, idle_timeout=args.timeout,
                   regressions_dir=args.regressions, save_dir=args.save_to,
                   paths=args.paths.split(",") if args.paths else None, remote_every=args.remote_every)
    if args.command == "run":
        report = runner.run(args.seconds, args.seed, max_mutants=args.max_mutants,
                            replay_first=not args.no_replay, max_minimize=args.max_minimize,
                            seeds=args.seeds.split(",") if args.seeds else None, **options)
    else:
        report = runner.replay(**options)
    print(report.table())
    failing = report.failing()
    if failing:
        print("\nFAILURES (crash, hang, mismatch):")
        print(report.format_failures())
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(report.as_json(), indent=1, default=str))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
