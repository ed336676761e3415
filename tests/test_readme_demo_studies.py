"""The README's demo-world studies (``evaluate.py mode=...`` without a trained model or shared data) run for real
in a tiny mode: the slow tier of ``test_readme_commands.py``, split off so that two test workers share it. This
module builds its own tiny annotation cache (the ``tiny_world`` fixture is module-scoped).
"""

from __future__ import annotations

import pytest
from test_readme_commands import _slow_commands, check_command_in_tiny_mode, is_demo_world_study, tiny_world  # noqa: F401


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [c for c in _slow_commands() if is_demo_world_study(c)], ids=lambda c: c.id)
def test_demo_study_runs_in_tiny_mode(cmd, tiny_world, tmp_path, request):  # noqa: F811
    check_command_in_tiny_mode(cmd, tiny_world, tmp_path, request)
