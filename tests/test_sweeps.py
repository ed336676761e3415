"""Hydra multirun sweeps: one W&B offline run per job with its config and final metrics, a summary table,
and a restarted sweep that skips its finished jobs (issue: sweeps over datasets, LLMs and models)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from wandb_offline import offline_runs

from udcg_ltr.data.contexts import write_context_runs
from udcg_ltr.data.jsonl import write_records
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
from udcg_ltr.sweeps import collect_jobs

ROOT = Path(__file__).resolve().parent.parent


def _tiny_dataset(folder: Path, name: str, seed: int) -> None:
    """A dataset config (in a Hydra search path) over synthetic annotated records + ready-made runs."""
    records, runs = synthetic_study_data(24, n_contexts=4, k=5, pool_size=8, seed=seed)
    write_records(folder / f"{name}.jsonl", records)
    write_context_runs(folder / f"{name}_runs.jsonl", runs)
    conf = folder / "conf" / "dataset"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{name}.yaml").write_text(
        "defaults:\n  - jsonl\n  - _self_\n"
        f"name: {name}\nreader:\n  path: {folder / f'{name}.jsonl'}\ncontexts_path: {folder / f'{name}_runs.jsonl'}\n")


def _sweep(tmp_path: Path, sweep_dir: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "train.py"), "-m",
           f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"hydra.sweep.dir={sweep_dir}",
           "dataset=tiny_a,tiny_b", "model=udcg_theta", "model.udcg_theta.variant=full,binary",
           f"llm.name={SYNTHETIC_LLM}", "end_to_end=false", "logger=wandb",
           f"paths.cache_dir={tmp_path / 'cache'}"]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_two_by_two_sweep_logs_four_wandb_runs_and_a_summary(tmp_path):
    _tiny_dataset(tmp_path, "tiny_a", seed=1)
    _tiny_dataset(tmp_path, "tiny_b", seed=2)
    sweep_dir = tmp_path / "multirun"
    proc = _sweep(tmp_path, sweep_dir)
    assert proc.returncode == 0, proc.stderr[-4000:]

    jobs = collect_jobs(sweep_dir)
    assert len(jobs) == 4
    combos = {tuple(sorted(j.overrides)) for j in jobs}
    assert len(combos) == 4
    runs = offline_runs(sweep_dir)
    assert len(runs) == 4, [r.path for r in runs]
    for run in runs:
        # each W&B run: its own config (dataset, variant) and the job's final metrics, grouped by the sweep
        assert run.config["dataset"]["name"] in {"tiny_a", "tiny_b"}
        assert run.config["model"]["udcg_theta"]["variant"] in {"full", "binary"}
        assert 0.0 < run.summary["test/udcg@5"] < 1.0
        assert "udcg_theta/n_pairs" in run.summary
        assert run.group == "train/default"
        assert any(t.startswith("dataset:") for t in run.tags)
    assert len({(r.config["dataset"]["name"], r.config["model"]["udcg_theta"]["variant"]) for r in runs}) == 4

    summary = subprocess.run([sys.executable, "-m", "udcg_ltr.sweeps", str(sweep_dir), "--metric", "test/udcg@5"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert summary.returncode == 0, summary.stderr
    table = (sweep_dir / "sweep_summary.md").read_text().strip().splitlines()
    assert len(table) == 2 + 4  # header, rule, one row per job
    assert all("dataset=tiny_" in row for row in table[2:])
    assert (sweep_dir / "sweep_summary.csv").is_file() and (sweep_dir / "sweep_summary.png").stat().st_size > 0

    # Restarting the same sweep skips every finished job: no new W&B run, same results.
    again = _sweep(tmp_path, sweep_dir)
    assert again.returncode == 0, again.stderr[-4000:]
    assert (again.stdout + again.stderr).count("already finished") == 4
    assert len(offline_runs(sweep_dir)) == 4


@pytest.mark.parametrize(("name", "target"), [("local_parallel", "hydra_joblib_launcher"),
                                            ("slurm", "hydra_submitit_launcher"), ("basic", "BasicLauncher")])
def test_launcher_configs_compose(name, target):
    """The local-parallel (joblib) and SLURM (submitit) launchers are selectable: their plugins are installed."""
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--cfg", "hydra", f"hydra/launcher={name}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launcher = proc.stdout[proc.stdout.index("launcher:"):]
    assert target in launcher.split("sweeper:")[0]


def test_optuna_search_config_composes():
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--cfg", "hydra", "hparams_search=optuna",
                           "model=cross_encoder"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OptunaSweeper" in proc.stdout and "model.cross_encoder.lr" in proc.stdout


# ---- issue 16: skips keyed by the resolved config, failed jobs, summary metric, W&B without machine paths ----
def _data_dir_dataset(tmp_path: Path, data_dirs: dict[str, int]) -> None:
    """Dataset ``tiny_dd`` read from ``${paths.data_dir}/tiny.jsonl``: the data folder is not in the job's folder name."""
    for name, seed in data_dirs.items():
        folder = tmp_path / name
        folder.mkdir(parents=True, exist_ok=True)
        records, runs = synthetic_study_data(24, n_contexts=4, k=5, pool_size=8, seed=seed)
        write_records(folder / "tiny.jsonl", records)
        write_context_runs(folder / "tiny_runs.jsonl", runs)
    conf = tmp_path / "conf" / "dataset"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "tiny_dd.yaml").write_text("defaults:\n  - jsonl\n  - _self_\nname: tiny_dd\n"
                                       "reader:\n  path: ${paths.data_dir}/tiny.jsonl\n"
                                       "contexts_path: ${paths.data_dir}/tiny_runs.jsonl\n")


def _one_job_sweep(tmp_path: Path, sweep_dir: Path, data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "train.py"), "-m", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
           f"hydra.sweep.dir={sweep_dir}", "dataset=tiny_dd", "model=udcg_theta", f"llm.name={SYNTHETIC_LLM}",
           "end_to_end=false", "logger=wandb", f"paths.data_dir={data_dir}",
           f"paths.cache_dir={tmp_path / 'cache'}", *extra]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def _only_job(sweep_dir: Path):
    jobs = collect_jobs(sweep_dir)
    assert len(jobs) == 1, jobs
    return jobs[0]


def test_a_changed_data_path_reruns_the_job_instead_of_reporting_stale_results(tmp_path):
    """The reported case: same sweep command, same job folder, another ``paths.data_dir`` -> fresh results."""
    _data_dir_dataset(tmp_path, {"data_a": 1, "data_b": 2})
    sweep = tmp_path / "multirun"
    assert _one_job_sweep(tmp_path, sweep, tmp_path / "data_a").returncode == 0
    on_a = _only_job(sweep)

    moved = _one_job_sweep(tmp_path, sweep, tmp_path / "data_b")
    assert moved.returncode == 0, moved.stderr[-4000:]
    assert "already finished" not in moved.stdout + moved.stderr
    on_b = _only_job(sweep)
    assert on_b.job_dir == on_a.job_dir  # the folder name does not see paths.data_dir ...
    assert on_b.config_hash != on_a.config_hash  # ... the config hash does
    fresh = tmp_path / "fresh"
    assert _one_job_sweep(tmp_path, fresh, tmp_path / "data_b").returncode == 0
    expected = _only_job(fresh).metrics
    for name, value in expected.items():
        if not name.startswith("time/"):
            assert on_b.metrics[name] == pytest.approx(value, abs=1e-12), name
    assert on_b.metrics["test/udcg@5"] != on_a.metrics["test/udcg@5"]
    assert len(offline_runs(on_b.job_dir)) == 1  # the stale run's W&B run went with its results

    # the same command again skips; a data file rewritten in place (same path) reruns
    again = _one_job_sweep(tmp_path, sweep, tmp_path / "data_b")
    assert "already finished" in again.stdout + again.stderr
    records, runs = synthetic_study_data(24, n_contexts=4, k=5, pool_size=8, seed=3)
    write_records(tmp_path / "data_b" / "tiny.jsonl", records)
    write_context_runs(tmp_path / "data_b" / "tiny_runs.jsonl", runs)
    rewritten = _one_job_sweep(tmp_path, sweep, tmp_path / "data_b")
    assert rewritten.returncode == 0 and "already finished" not in rewritten.stdout + rewritten.stderr
    assert _only_job(sweep).config_hash != on_b.config_hash


def test_a_failed_job_is_marked_failed_and_reruns_cleanly(tmp_path):
    """A job that raises: job_result.json says failed, its W&B run is closed as failed; the rerun after the fix
    runs (it is not skipped) and leaves exactly one W&B run, finished."""
    import json

    _data_dir_dataset(tmp_path, {"data": 1})
    good = (tmp_path / "data" / "tiny.jsonl").read_text()
    (tmp_path / "data" / "tiny.jsonl").write_text(good + '{"qid": "broken", "question": "?", "passages": [{}]}\n')
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "train.py"), f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
           f"hydra.run.dir={run_dir}", "dataset=tiny_dd", "model=udcg_theta", f"llm.name={SYNTHETIC_LLM}",
           "end_to_end=false", "logger=wandb", f"paths.data_dir={tmp_path / 'data'}"]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    failed = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert failed.returncode == 1, failed.stderr[-3000:]
    state = json.loads((run_dir / "job_result.json").read_text())
    assert state["status"] == "failed" and "line 25" in state["error"], state  # the DataError, with its line
    runs = offline_runs(run_dir)
    assert len(runs) == 1 and runs[0].exit_code == 1
    assert collect_jobs(run_dir) == []  # a failed job is no result

    (tmp_path / "data" / "tiny.jsonl").write_text(good)
    fixed = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert json.loads((run_dir / "job_result.json").read_text())["status"] == "finished"
    runs = offline_runs(run_dir)
    assert len(runs) == 1 and runs[0].exit_code == 0 and "test/udcg@5" in runs[0].summary


def _fake_job(folder: Path, metrics: dict, config: dict, status: str = "finished") -> None:
    import json

    folder.mkdir(parents=True)
    (folder / "job_result.json").write_text(json.dumps({"status": status, "config_hash": "x", "metrics": metrics,
                                                        "config": config}))


def test_summary_plots_the_optimized_metric_not_the_first_alphabetically(tmp_path):
    from udcg_ltr.sweeps import plotted_metric, summarize_sweep

    cfg = {"optimized_metric": "test/udcg@5"}
    for i, value in enumerate((0.52, 0.61, 0.58)):  # "annotate/passages" sorts first and is constant
        _fake_job(tmp_path / f"job{i}", {"annotate/passages": 80.0, "test/udcg@5": value, "time/total_s": 3.0 + i},
                  cfg)
    _fake_job(tmp_path / "killed", {}, cfg, status="running")
    out = summarize_sweep(tmp_path)
    header = (tmp_path / "sweep_summary.md").read_text().splitlines()[0]
    assert header.split("|")[2].strip() == "test/udcg@5"  # plotted, and listed first
    assert "plot" in out and out["plot"].stat().st_size > 0
    assert len((tmp_path / "sweep_summary.md").read_text().splitlines()) == 2 + 3  # the killed job is no row
    jobs = collect_jobs(tmp_path)
    assert plotted_metric(jobs, ["annotate/passages", "test/udcg@5", "time/total_s"]) == "test/udcg@5"
    # without optimized_metric: the first metric that varies, never a constant or a wall time
    for j in jobs:
        j.config = {}
    assert plotted_metric(jobs, ["annotate/passages", "test/udcg@5", "time/total_s"]) == "test/udcg@5"
    # a sweep over k: every job optimises its own metric -> each job's own value
    for j, k in zip(jobs, (3, 4, 5)):
        j.config = {"optimized_metric": f"test/udcg@{k}"}
        j.metrics[f"test/udcg@{k}"] = 0.1 * k
    assert plotted_metric(jobs, []) == "optimized_metric"
    assert [j.metrics["optimized_metric"] for j in jobs] == pytest.approx([0.3, 0.4, 0.5])


def test_config_hash_sees_results_not_bookkeeping(tmp_path):
    from omegaconf import OmegaConf

    from udcg_ltr.jobs.common import config_hash

    data = tmp_path / "d.jsonl"
    data.write_text("one\n")
    base = {"k": 5, "seed": 0, "dataset": {"reader": {"path": str(data)}}, "logger": {"backend": "wandb"},
            "sweep_name": "a", "force": False, "paths": {"cache_dir": "/c1", "output_dir": "/o1", "data_dir": "/d"},
            "trainer": {"max_epochs": 1}}
    h = config_hash(OmegaConf.create(base))
    same = {**base, "logger": {"backend": "csv"}, "sweep_name": "b", "force": True,
            "paths": {"cache_dir": "/c2", "output_dir": "/o2", "data_dir": "/d"},
            # a resume checkpoint's interval, also when the key is new to a job finished before it existed
            "trainer": {"max_epochs": 1, "checkpoint_minutes": 3}}
    assert config_hash(OmegaConf.create(same)) == h
    assert config_hash(OmegaConf.create({**base, "trainer": {"max_epochs": 2}})) != h
    # a setting added later with a null default (the earlier behaviour) keeps finished jobs finished ...
    assert config_hash(OmegaConf.create({**base, "reranker": {"max_questions": None}})) == h
    assert config_hash(OmegaConf.create({**base, "reranker": {"max_questions": 200}})) != h  # ... a value does not
    assert config_hash(OmegaConf.create({**base, "k": 4})) != h
    assert config_hash(OmegaConf.create({**base, "paths": {**base["paths"], "data_dir": "/e"}})) != h
    other = tmp_path / "e.jsonl"
    other.write_text("one\n")
    assert config_hash(OmegaConf.create({**base, "dataset": {"reader": {"path": str(other)}}})) != h
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # provisioned again: new mtime, same bytes
    assert config_hash(OmegaConf.create(base)) == h
    data.write_text("two\n")  # same path and size, new content
    assert config_hash(OmegaConf.create(base)) != h


def test_wandb_run_holds_no_machine_paths(tmp_path, monkeypatch):
    """Config, summary, tables and Lightning hyperparameters logged to W&B are redacted; local files are not."""
    from udcg_ltr.paths import PROJECT_ROOT
    from udcg_ltr.tracking import WandbRunLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    home = str(Path.home())
    run_dir = tmp_path / "run"
    config = {"paths": {"root_dir": str(PROJECT_ROOT), "data_dir": str(tmp_path / "data"), "output_dir": str(run_dir),
                        "cache_dir": f"{home}/.cache/udcg_ltr"},
              "dataset": {"reader": {"path": f"{tmp_path}/data/x.jsonl"}}, "elsewhere": "/opt/secret/place/file.bin",
              "note": f"model saved to {run_dir}/cross_encoder/model", "k": 5}
    logger = WandbRunLogger(run_dir, config=config, tags=[f"dir:{home}"])
    logger.log_table("t", [[f"{run_dir}/a.csv", 1.0]], ["file", "v"])
    logger.summary({"where": f"{home}/x", "udcg": 0.5})
    logger.lightning().log_hyperparams({"model_name_or_path": f"{sys.prefix}/lib/site-packages/m", "lr": 1e-3})
    logger.finish()
    (wandb_file,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    blob = wandb_file.read_bytes()
    for secret in (home, str(tmp_path), str(PROJECT_ROOT), sys.prefix, "/opt/secret", "/tmp/"):
        assert secret.encode() not in blob, secret
    (run,) = offline_runs(run_dir)
    assert run.config["paths"]["output_dir"] == "<run>" and run.config["paths"]["data_dir"] == "<data>"
    assert run.config["paths"]["cache_dir"] == "<cache>"
    assert run.config["elsewhere"] == "<path>/file.bin" and run.config["k"] == 5
    assert run.config["note"] == "model saved to <run>/cross_encoder/model"
    assert run.config["model_name_or_path"] == "<python>/lib/site-packages/m"
    assert run.summary["where"] == "~/x" and run.summary["udcg"] == 0.5
    import json

    assert json.loads((run_dir / "metrics.json").read_text())["where"] == f"{home}/x"  # local files keep real paths


def _job_cfg(run_dir: Path, **extra):
    from omegaconf import OmegaConf

    return OmegaConf.create({"task_name": "t", "seed": 0, "k": 5, "logger": {"backend": "none"},
                             "paths": {"output_dir": str(run_dir)}, "dataset": {"name": "x", "reader": {
                                 "_target_": "udcg_ltr.data.demo_world.generate_demo_world"}}, **extra})


def test_run_job_state_machine_in_process(tmp_path):
    """finished -> skipped; same config after a failure -> rerun keeping resumable files; new config -> cleared."""
    import json

    from udcg_ltr.jobs.common import run_job
    from udcg_ltr.jobs.settings import JobSettings

    run_dir = tmp_path / "job"
    calls = []

    def body(settings, folder, logger):
        calls.append(folder)
        (folder / "artefact.txt").write_text("made")
        if len(calls) == 1:
            (folder / "checkpoints").mkdir()
            (folder / "checkpoints" / "last.ckpt").write_text("state")
            raise RuntimeError("disk full")
        return {"m": float(len(calls))}

    with pytest.raises(RuntimeError, match="disk full"):
        run_job(_job_cfg(run_dir), JobSettings, job_type="t", body=body)
    state = json.loads((run_dir / "job_result.json").read_text())
    assert state["status"] == "failed" and state["error"] == "RuntimeError: disk full"
    assert run_job(_job_cfg(run_dir), JobSettings, job_type="t", body=body) == {"m": 2.0}  # same config: rerun in place ...
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()  # ... resumable state kept
    assert run_job(_job_cfg(run_dir), JobSettings, job_type="t", body=body) == {"m": 2.0} and len(calls) == 2  # skipped
    assert run_job(_job_cfg(run_dir, k=3), JobSettings, job_type="t", body=body) == {"m": 3.0}  # another config: cleared
    assert not (run_dir / "checkpoints").exists()
    assert run_job(_job_cfg(run_dir, k=3, force=True), JobSettings, job_type="t", body=body) == {"m": 4.0}


def test_a_changed_config_keeps_the_self_stamped_training_and_force_drops_it(tmp_path):
    """A new or changed key reruns the job, but ``cross_encoder/`` (whose fit_arguments.json stamp decides its own
    reuse) survives; the rest of the earlier result goes; ``force=true`` drops everything."""
    from udcg_ltr.jobs.common import SELF_STAMPED, run_job
    from udcg_ltr.jobs.settings import JobSettings

    run_dir = tmp_path / "job"
    seen = []

    def body(settings, folder, logger):
        seen.append(sorted(p.name for p in folder.iterdir() if p.name not in (".hydra", "job_result.json")))
        (folder / "results.md").write_text(f"k = {settings.k}")
        (folder / "cross_encoder").mkdir(exist_ok=True)
        (folder / "cross_encoder" / "fit_arguments.json").write_text("{}")
        return {"m": float(settings.k)}

    assert SELF_STAMPED == {"cross_encoder"}
    run_job(_job_cfg(run_dir), JobSettings, job_type="t", body=body)
    run_job(_job_cfg(run_dir, k=3), JobSettings, job_type="t", body=body)  # config changed
    run_job(_job_cfg(run_dir, k=3, force=True), JobSettings, job_type="t", body=body)
    assert seen == [[], ["cross_encoder"], []]


def test_a_checkout_used_as_run_folder_is_never_emptied(tmp_path):
    """``hydra.run.dir=.`` in a checkout: a stale result there removes only the job's own state file."""
    import json

    from udcg_ltr.jobs.common import run_job
    from udcg_ltr.jobs.settings import JobSettings

    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\n")
    (checkout / "wandb" / "offline-run-other").mkdir(parents=True)  # someone else's W&B run
    (checkout / "job_result.json").write_text(json.dumps({"status": "finished", "config_hash": "old", "metrics": {},
                                                          "wandb_run": "wandb/offline-run-mine"}))
    (checkout / "wandb" / "offline-run-mine").mkdir()
    assert run_job(_job_cfg(checkout), JobSettings, job_type="t", body=lambda settings, folder, logger: {"m": 1.0}) == {"m": 1.0}
    assert (checkout / "pyproject.toml").is_file() and (checkout / ".git").is_dir()
    assert (checkout / "wandb" / "offline-run-other").is_dir()
    assert not (checkout / "wandb" / "offline-run-mine").exists()
