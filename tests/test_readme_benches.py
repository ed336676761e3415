"""Every bench script the README names runs with ``--help`` and parses the README's flags for it (split from
``test_readme_commands.py`` so that two test workers share the README's commands)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from test_readme_commands import ENV, ROOT, _bench_commands


@pytest.mark.parametrize("cmd", _bench_commands(), ids=lambda c: c.id)
def test_bench_command_exists_and_its_flags_parse(cmd):
    script = ROOT / cmd.argv[0]
    assert script.is_file(), f"README names {cmd.argv[0]}, which does not exist"
    helped = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, env=ENV, capture_output=True,
                            text=True, timeout=300)
    assert helped.returncode == 0, helped.stderr[-3000:]
    flags = [a.split("=")[0] for a in cmd.argv[1:] if a.startswith("--")]
    for flag in flags:
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", helped.stdout), (cmd.text, flag)
    # the values parse (argparse reads them before it reaches --help)
    parsed = subprocess.run([sys.executable, str(script), *cmd.argv[1:], "--help"], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert parsed.returncode == 0, (cmd.text, parsed.stderr[-3000:])
