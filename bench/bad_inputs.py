"""Malformed inputs through every reader and the command lines: how many give a clear error?

Runs the generated catalogue of ``tests/bad_inputs_catalogue.py`` (the one ``tests/test_bad_inputs.py``
asserts on): for each (reader, mutation) pair a valid tiny fixture is written, damaged one way, and
read. Outcomes:

* ``clear``: a ``DataError`` naming the file, and the line and field where the damage has them;
* ``traceback``: any other exception (a raw ``UnicodeDecodeError``, ``EOFError``, ``KeyError`` ...);
* ``silent``: no error: the damage was read as data;
* ``unclear``: a ``DataError`` missing its file, line or field (printed on its own line).

Then ``--generated`` (default 2500) inputs drawn by the catalogue's hypothesis strategies (seeded by ``--seed``):
valid fixtures of every layout mutated by byte flips, truncation, duplicated keys, type swaps, extreme
numbers, surrogates, BOMs, CRLF, white space, negative and huge cutoffs, judged by the oracle
(``judge_generated``): a DataError naming the file and a line or field, or the same records as the original.

    .venv/bin/python bench/bad_inputs.py [--no-cli] [--verbose] [--generated N] [--seed S]

``--no-cli`` skips the few subprocess runs of ``python -m udcg_ltr.annotate`` / ``evaluate.py``.
Last line: ``bad_inputs: tried=N clear=C traceback=T silent=S generated=G`` (N = C + T + S + unclear, over the
catalogue and the G generated inputs).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import _offline  # noqa: E402,F401  (before the package: offline hubs, W&B offline, repository root on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the catalogue lives with the tests

from bad_inputs_catalogue import build_catalogue, cli_cases, run_case, run_generated  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cli", action="store_true", help="skip the command-line cases (subprocesses)")
    parser.add_argument("--verbose", action="store_true", help="print every case's outcome")
    parser.add_argument("--generated", type=int, default=2500, help="generated mutations to try")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed of the generated mutations")
    args = parser.parse_args()

    cases = build_catalogue() + ([] if args.no_cli else cli_cases())
    counts: collections.Counter = collections.Counter()
    per_reader: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="bad_inputs_") as tmp:
        for i, case in enumerate(cases):
            folder = Path(tmp) / f"case{i:04d}"
            folder.mkdir()
            outcome = run_case(case, folder)
            counts[outcome.kind] += 1
            per_reader[case.reader][outcome.kind] += 1
            if outcome.kind != "clear" or args.verbose:
                print(f"{outcome.kind:9s} {case.id}: {outcome.detail}")
        def report(gen, outcome) -> None:
            per_reader[f"generated {gen.layout.reader}"][outcome.kind] += 1
            if outcome.kind != "clear" or args.verbose:
                print(f"{outcome.kind:9s} generated {gen.layout.reader}:{gen.mutation}: {outcome.detail}")

        generated = run_generated(args.generated, args.seed, Path(tmp) / "generated", report)
    n_generated = generated.pop("generated", 0)
    counts.update(generated)
    for reader, c in sorted(per_reader.items()):
        print(f"  {reader:24s} " + " ".join(f"{k}={c[k]}" for k in ("clear", "traceback", "silent", "unclear")))
    print(f"bad_inputs_unclear: {counts['unclear']}")
    print(f"bad_inputs: tried={len(cases) + n_generated} clear={counts['clear']} traceback={counts['traceback']} "
          f"silent={counts['silent']} generated={n_generated}")


if __name__ == "__main__":
    main()
