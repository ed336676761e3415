"""The suite's own hygiene: a test that changes the environment (as an in-process job does) does not change the
next test's (conftest's ``_restore_environment``). The two tests run in file order on one worker."""

from __future__ import annotations

import os

from udcg_ltr.jobs.common import prepare_environment
from udcg_ltr.jobs.settings import JobSettings, job_settings

AT_IMPORT = os.environ.get("UDCG_LTR_CACHE")


def test_an_in_process_job_exports_its_cache_folder(tmp_path):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"task_name": "t", "seed": 0, "k": 5, "logger": {"backend": "none"},
                            "paths": {"output_dir": str(tmp_path), "cache_dir": str(tmp_path / "cache")},
                            "dataset": {"name": "x", "reader": {
                                "_target_": "udcg_ltr.data.demo_world.generate_demo_world"}}})
    prepare_environment(job_settings(JobSettings, cfg))
    assert os.environ["UDCG_LTR_CACHE"] == str(tmp_path / "cache")


def test_the_next_test_sees_the_environment_it_started_with():
    assert os.environ.get("UDCG_LTR_CACHE") == AT_IMPORT
