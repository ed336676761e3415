"""Every bench script the README names runs with ``--help`` and parses the README's flags for it (split from
``test_readme_commands.py`` so that two test workers share the README's commands).

All the commands run in **one** Python process (:data:`DRIVER`): each bench imports torch and the toolkit before
its argparse, about 5 s a start on a 2-core CPU, and a process per command cost minutes of the suite."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from test_readme_commands import ENV, ROOT, _bench_commands

#: Runs each ``[script, *args]`` of the JSON list in argv[1] as ``__main__`` (with ``--help`` last, so argparse
#: converts the README's values before it prints the help and exits) and prints one JSON result per command.
DRIVER = r"""
import contextlib, io, json, runpy, sys, traceback
out = []
for argv in json.loads(sys.argv[1]):
    sys.path.insert(0, str(__import__("pathlib").Path(argv[0]).parent))  # as `python bench/x.py` would
    sys.argv = list(argv)
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    sys.path.pop(0)
    out.append({"returncode": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
print(json.dumps(out))
"""

COMMANDS = _bench_commands()


@pytest.fixture(scope="module")
def helped() -> dict[str, dict]:
    """Each README bench command's ``--help`` run, by command id."""
    argvs = [[str(ROOT / c.argv[0]), *c.argv[1:], "--help"] for c in COMMANDS if (ROOT / c.argv[0]).is_file()]
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argvs)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    present = [c for c in COMMANDS if (ROOT / c.argv[0]).is_file()]
    return {c.id: r for c, r in zip(present, results)}


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.id)
def test_bench_command_exists_and_its_flags_parse(cmd, helped):
    script = ROOT / cmd.argv[0]
    assert script.is_file(), f"README names {cmd.argv[0]}, which does not exist"
    result = helped[cmd.id]
    # a nonzero exit: a flag argparse does not know, or a value it cannot convert
    assert result["returncode"] == 0, (cmd.text, result["stderr"][-3000:])
    flags = [a.split("=")[0] for a in cmd.argv[1:] if a.startswith("--")]
    for flag in flags:
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", result["stdout"]), (cmd.text, flag)
