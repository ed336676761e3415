"""Distractor sensitivity: one relevant passage plus weak vs hard distractors (UDCG paper, Table 1).

For every query with a relevant passage, two contexts of ``k`` passages are answered by the LLM: the relevant passage
plus ``k - 1`` irrelevant passages whose distracting effect ``DE = 1 - P(NO-RESPONSE | q, p)`` (the magnitude of Eq. 2's
negative utility, from the single-passage annotations) is below ``weak_threshold`` (**weak**, default 0.2) or above
``hard_threshold`` (**hard**, default 0.8). Only the distractors differ between the arms (:func:`plan_query`, which also
adapts a threshold the pool cannot meet); ``adapt_k`` lowers ``k`` to what the pools hold (:func:`fit_k_to_pools`).

Statistics: accuracy (``correct`` rate) per arm with bootstrap 95% CIs over queries; the paired difference weak - hard
with its bootstrap CI and centred-bootstrap p; the Wilcoxon signed-rank test on per-query paired correctness (zero
differences dropped); McNemar's exact test on the same pairs; abstained / wrong rates.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import ensure_annotations
from udcg_ltr.annotate.end_to_end import Context
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.sampling import query_rng
from udcg_ltr.report import Column, fmt_ci, fmt_float, fmt_p, fmt_pct, plot_bars, write_csv
from udcg_ltr.stats.bootstrap import paired_difference
from udcg_ltr.stats.paired import mcnemar_exact, wilcoxon_paired
from udcg_ltr.studies import common

log = logging.getLogger(__name__)

ARMS = ("weak", "hard")


@dataclass(frozen=True)
class DistractorConfig(common.StudyParams):
    """Parameters of :func:`run_distractor_sensitivity`. ``relevant``: as in :func:`.common.pick_passages`;
    ``relevant_position``: ``"random"`` (seeded per query, uniform over 1..k) or a 1-based position;
    ``selection``: how a fixed-threshold arm picks its ``k - 1`` passages among its candidates (``"random"``,
    seeded, or ``"extreme"``: the lowest / highest DE); ``adapt_k``: ``k`` is an upper bound."""

    k: int = 5
    weak_threshold: float = 0.2
    hard_threshold: float = 0.8
    adaptive: bool = True
    relevant: str = "top_ranked"
    relevant_position: str | int = "random"
    selection: str = "random"
    adapt_k: bool = False

    def __post_init__(self):
        if self.k < 2:
            raise ValueError(f"k must be >= 2 (one relevant passage plus distractors), got {self.k}")
        if not 0.0 <= self.weak_threshold <= self.hard_threshold <= 1.0:
            raise ValueError(f"need 0 <= weak_threshold <= hard_threshold <= 1, got {self.weak_threshold}, "
                             f"{self.hard_threshold}")
        if self.relevant not in ("top_ranked", "best_utility"):
            raise ValueError(f"relevant must be 'top_ranked' or 'best_utility', got {self.relevant!r}")
        if self.selection not in ("random", "extreme"):
            raise ValueError(f"selection must be 'random' or 'extreme', got {self.selection!r}")
        pos = self.relevant_position
        if pos != "random" and not (isinstance(pos, int) and 1 <= pos <= self.k):
            raise ValueError(f"relevant_position must be 'random' or in 1..{self.k}, got {pos!r}")


@dataclass
class DistractorPlan:
    """The two paired contexts of one query and how their distractors were chosen."""

    qid: str
    relevant_pid: str
    position: int  # 1-based position of the relevant passage (both arms)
    weak: tuple[str, ...]  # context pids in prompt order
    hard: tuple[str, ...]
    weak_de: tuple[float, ...]  # DE of the weak arm's distractors (sorted descending)
    hard_de: tuple[float, ...]
    weak_adapted: bool
    hard_adapted: bool
    n_irrelevant: int

    @property
    def weak_threshold_eff(self) -> float:
        return max(self.weak_de)

    @property
    def hard_threshold_eff(self) -> float:
        return min(self.hard_de)


def plan_query(record: QueryRecord, llm: str, cfg: DistractorConfig) -> DistractorPlan | str:
    """The paired weak / hard contexts of one query, or the reason it is left out.

    Both arms put the relevant passage at the same (seeded) position and deal their distractors, sorted by DE,
    into the other slots by one shared seeded permutation. A retrieval pool seldom holds ``k - 1`` passages
    beyond a fixed threshold: then (``adaptive``) the arm takes the pool's ``k - 1`` lowest- (weak) or
    highest-DE (hard) irrelevant passages, and its effective threshold is their largest / smallest DE. Left
    out: pools with fewer than ``2 (k - 1)`` irrelevant passages, arms that overlap or do not separate."""
    rel, irr = common.pick_passages(record, llm, cfg.relevant, cfg.relevance_threshold)
    if rel is None:
        return "no relevant passage"
    m = cfg.k - 1
    if len(irr) < 2 * m:
        return f"fewer than 2(k-1)={2 * m} irrelevant passages"
    de = np.array([common.distracting_effect(p, llm) for p in irr])
    # stable sorts: equal DEs keep retrieval order
    asc, desc = np.argsort(de, kind="stable"), np.argsort(-de, kind="stable")
    weak_cand, hard_cand = np.flatnonzero(de < cfg.weak_threshold), np.flatnonzero(de > cfg.hard_threshold)
    weak_adapted, hard_adapted = len(weak_cand) < m, len(hard_cand) < m
    if (weak_adapted or hard_adapted) and not cfg.adaptive:
        return "too few distractors beyond a fixed threshold (adaptive off)"
    rng = query_rng(cfg.seed, record.qid, "distractors")

    def pick(cands: np.ndarray, exclude: np.ndarray | None, order: np.ndarray) -> np.ndarray | None:
        cands = np.array([c for c in cands if exclude is None or c not in exclude], dtype=np.int64)
        if len(cands) < m:
            return None
        if cfg.selection == "extreme":
            return np.array([i for i in order if i in cands][:m], dtype=np.int64)
        return rng.choice(cands, size=m, replace=False)

    hard = desc[:m] if hard_adapted else None
    weak = asc[:m] if weak_adapted else pick(weak_cand, hard, asc)
    if hard is None:
        hard = pick(hard_cand, weak, desc)
    if weak is None or hard is None or set(weak.tolist()) & set(hard.tolist()):
        return "weak and hard arms overlap"
    if de[weak].max() >= de[hard].min():
        return "weak and hard distractors do not separate (ties)"
    pos = int(rng.integers(1, cfg.k + 1)) if cfg.relevant_position == "random" else int(cfg.relevant_position)
    slots = [s for s in range(cfg.k) if s != pos - 1]
    slot_order = rng.permutation(len(slots))  # shared by both arms: j-th most distracting -> same slot

    def build(idx: np.ndarray) -> tuple[tuple[str, ...], tuple[float, ...]]:
        by_de = idx[np.argsort(-de[idx], kind="stable")]
        pids = [""] * cfg.k
        pids[pos - 1] = rel.pid
        for j, s in enumerate(slot_order):
            pids[slots[s]] = irr[by_de[j]].pid
        return tuple(pids), tuple(float(de[i]) for i in by_de)

    weak_pids, weak_de = build(weak)
    hard_pids, hard_de = build(hard)
    return DistractorPlan(qid=record.qid, relevant_pid=rel.pid, position=pos, weak=weak_pids, hard=hard_pids,
                          weak_de=weak_de, hard_de=hard_de, weak_adapted=bool(weak_adapted),
                          hard_adapted=bool(hard_adapted), n_irrelevant=len(irr))


def fit_k_to_pools(records: Sequence[QueryRecord], cfg: DistractorConfig) -> tuple[int, str | None]:
    """``(k', note)``: the largest ``k' <= cfg.k`` (at least 2) at which at least half of the candidate queries
    (a relevant passage, in ``cfg.splits``) hold the ``2 (k' - 1)`` irrelevant passages two disjoint arms need;
    ``note`` says why when ``k' < cfg.k``, e.g. in the demo world's pools of 8 passages (else None)."""
    pools = [(len(r.passages), sum(p.is_relevant(cfg.relevance_threshold) for p in r.passages))
             for r in common.order_by_splits(records, cfg.splits)]
    counts = [n - n_relevant for n, n_relevant in pools if n_relevant]  # irrelevant passages of each candidate pool
    if not counts:
        return cfg.k, None

    def holding(k: int) -> int:
        return sum(n >= 2 * (k - 1) for n in counts)

    k = cfg.k
    while k > 2 and holding(k) * 2 < len(counts):
        k -= 1
    if k == cfg.k:
        return k, None
    return k, (f"k lowered from {cfg.k} to {k}: two disjoint arms need 2(k-1) = {2 * (cfg.k - 1)} irrelevant "
               f"passages, which {holding(cfg.k)} of {len(counts)} candidate pools hold "
               f"(at most {max(counts)} irrelevant passages a pool); at k = {k}, {holding(k)} do")


def run_distractor_sensitivity(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm,
                               out_dir: str | os.PathLike, logger=None, cache=True, progress: bool = True,
                               **params) -> common.StudyReport:
    """Accuracy with weak vs hard distractors around the same relevant passage (UDCG paper, Table 1).

    Arguments as in :mod:`udcg_ltr.studies.common` (``records`` need the single-passage ``p_no_response``);
    ``out_dir`` receives the tables, the per-query CSV, the PNG, ``report.md`` and ``summary.json``;
    ``params``: :class:`DistractorConfig` fields (or ``config=DistractorConfig(...)``)."""
    cfg, k_note = _config_for_pools(records, common.config_from(params, DistractorConfig))
    name, runner, runs, out = common.study_inputs(llm, scorer_or_runs, out_dir, cache)
    ann = ensure_annotations(records, name, ["p_no_response"], runner, progress=progress)
    by_qid = {r.qid: r for r in records}
    plans, info = _eligible_plans(records, cfg, name)
    contexts = [Context(p.qid, 2 * i + j, getattr(p, arm), arm) for i, p in enumerate(plans)
                for j, arm in enumerate(ARMS)]  # weak then hard, query by query
    graded = common.answer_contexts(by_qid, contexts, llm=name, scorer=runner, runs=runs, rule=cfg.rule,
                                    relevance_threshold=cfg.relevance_threshold, progress=progress)
    weak_runs, hard_runs = graded[0::2], graded[1::2]
    arms = _arm_statistics(plans, weak_runs, hard_runs, cfg)
    per_query = _per_query_rows(plans, weak_runs, hard_runs, by_qid)
    paths: dict[str, Any] = {}
    table_md = _write_tables(paths, out, arms, per_query, cfg, name, n_queries=len(plans))
    paths["png"] = _plot_arms(out, arms, cfg, name, info, n_queries=len(plans))
    n_weak, n_hard = int(arms.adapted["weak"].sum()), int(arms.adapted["hard"].sum())
    meta = {"study": "distractors", "llm": name, "config": asdict(cfg), "k_note": k_note, "n_queries": len(plans),
            "n_contexts": len(graded), "selection": info, "annotations": ann, "source": "scorer" if runner else "runs",
            "n_weak_adapted": n_weak, "n_hard_adapted": n_hard,
            "n_any_adapted": int((arms.adapted["weak"] | arms.adapted["hard"]).sum()),
            "wilcoxon": arms.wil, "mcnemar": arms.mcn, "difference": arms.diff}
    rows, diff = arms.rows, arms.diff
    scalars = {"k": cfg.k, "acc_weak": rows[0]["correct"], "acc_hard": rows[1]["correct"], "acc_diff": diff["diff"],
               "acc_diff_lo": diff["lo"], "acc_diff_hi": diff["hi"], "p_wilcoxon": arms.wil["p"],
               "n_queries": len(plans), "n_adapted_weak": n_weak, "n_adapted_hard": n_hard}
    md = _markdown(cfg, name, rows, info, meta, table_md)
    report = common.StudyReport(name="distractors", rows=rows, markdown=md, paths=paths, meta=meta,
                                tables={"table": rows, "breakdown": arms.breakdown, "per_query": per_query},
                                scalars=scalars, runs=graded)
    return common.finish_report(report, out, logger)


def _config_for_pools(records: Sequence[QueryRecord], cfg: DistractorConfig) -> tuple[DistractorConfig, str | None]:
    """``cfg`` with ``k`` lowered to what the pools hold when ``adapt_k`` asks (and the note saying so)."""
    k, k_note = fit_k_to_pools(records, cfg) if cfg.adapt_k else (cfg.k, None)
    if k_note is not None:
        log.warning("distractor study: %s", k_note)
        if isinstance(cfg.relevant_position, int) and cfg.relevant_position > k:
            raise ValueError(f"relevant_position {cfg.relevant_position} > k = {k} after {k_note}")
        cfg = replace(cfg, k=k)
    return cfg, k_note


def _eligible_plans(records: Sequence[QueryRecord], cfg: DistractorConfig, name: str) -> tuple[list, dict]:
    """The selected queries' plans and the selection info; none is an error that says which k the pools support."""
    plans, info = common.select_plans(records, cfg, lambda r: plan_query(r, name, cfg))
    if not plans:
        feasible, _ = fit_k_to_pools(records, replace(cfg, adapt_k=True))
        hint = (f"; the pools support k = {feasible} (studies.distractors.k={feasible}, or adapt_k=true)"
                if feasible < cfg.k else "")
        raise ValueError(f"no eligible query for the distractor study at k = {cfg.k} "
                         f"(excluded: {info['excluded']}){hint}")
    return plans, info


@dataclass
class _ArmStatistics:
    """Both arms' outcome indicators and rates, and the paired weak - hard tests."""

    rows: list[dict[str, Any]]  # weak, hard, then weak - hard
    ind: dict[str, dict[str, np.ndarray]]
    adapted: dict[str, np.ndarray]
    mean_de: dict[str, np.ndarray]
    diff: dict[str, Any]
    wil: dict[str, Any]
    mcn: dict[str, Any]
    breakdown: list[dict[str, Any]]


def _arm_statistics(plans: Sequence[DistractorPlan], weak_runs, hard_runs, cfg: DistractorConfig) -> _ArmStatistics:
    """Accuracy, abstention and error rates per arm (bootstrap CIs), and the paired weak - hard difference with its
    Wilcoxon, bootstrap and McNemar p-values."""
    ind = {"weak": common.outcome_indicators(weak_runs), "hard": common.outcome_indicators(hard_runs)}
    B, seed = cfg.n_bootstrap, cfg.seed
    adapted = {arm: np.array([getattr(p, f"{arm}_adapted") for p in plans]) for arm in ARMS}
    mean_de = {arm: np.array([np.mean(getattr(p, f"{arm}_de")) for p in plans]) for arm in ARMS}
    rows: list[dict[str, Any]] = []
    for arm, rule in zip(ARMS, (f"DE < {cfg.weak_threshold:g}", f"DE > {cfg.hard_threshold:g}")):
        ad = adapted[arm]
        eff = np.array([getattr(p, f"{arm}_threshold_eff") for p in plans])[ad]  # of the adapted arms
        rows.append({"arm": arm, "queries": len(plans), "threshold": rule,
                     **common.outcome_rates(ind[arm], B, seed), "mean_de": float(mean_de[arm].mean()),
                     "n_adapted": int(ad.sum()),
                     **{f"eff_threshold_{stat}": float(fn(eff)) if ad.any() else float("nan")
                        for stat, fn in (("median", np.median), ("min", np.min), ("max", np.max))}})
    diffs = {o: paired_difference(ind["weak"][o], ind["hard"][o], B, seed) for o in common.OUTCOMES}
    diff = diffs["correct"]
    wil = wilcoxon_paired(ind["weak"]["correct"], ind["hard"]["correct"])
    mcn = mcnemar_exact(ind["weak"]["correct"], ind["hard"]["correct"])
    rows.append({"arm": "weak - hard", "queries": len(plans), "threshold": "",
                 **dict(zip(common.OUTCOME_COLUMNS, (d[x] for d in diffs.values() for x in ("diff", "lo", "hi")))),
                 "mean_de": float((mean_de["weak"] - mean_de["hard"]).mean()), "p_wilcoxon": wil["p"],
                 "wilcoxon_statistic": wil["statistic"], "n_discordant": wil["n_nonzero"],
                 "p_bootstrap": diff["p_bootstrap"], "p_mcnemar": mcn["p"],
                 "only_weak_correct": mcn["only_a"], "only_hard_correct": mcn["only_b"]})
    return _ArmStatistics(rows=rows, ind=ind, adapted=adapted, mean_de=mean_de, diff=diff, wil=wil, mcn=mcn,
                          breakdown=_breakdown(ind, adapted, mean_de, B, seed))


def _per_query_rows(plans: Sequence[DistractorPlan], weak_runs, hard_runs, by_qid) -> list[dict[str, Any]]:
    """One row per query: its plan (pids, DE, adapted thresholds) and both arms' outcomes and answers."""
    return [{"qid": p.qid, "split": by_qid[p.qid].split, "relevant_pid": p.relevant_pid, "position": p.position,
             "n_irrelevant": p.n_irrelevant, "weak_pids": " ".join(p.weak), "hard_pids": " ".join(p.hard),
             "weak_mean_de": float(np.mean(p.weak_de)), "hard_mean_de": float(np.mean(p.hard_de)),
             "weak_max_de": p.weak_threshold_eff, "hard_min_de": p.hard_threshold_eff,
             "weak_adapted": p.weak_adapted, "hard_adapted": p.hard_adapted,
             "weak_outcome": w.outcome, "hard_outcome": h.outcome, "weak_answer": w.answer,
             "hard_answer": h.answer} for p, w, h in zip(plans, weak_runs, hard_runs)]


def _write_tables(paths: dict[str, Any], out, arms: _ArmStatistics, per_query, cfg: DistractorConfig, name: str, *,
                  n_queries: int) -> str:
    """The main table and the breakdown (markdown + CSV) and the per-query CSV, into ``paths``; returns the tables'
    markdown."""
    md_cols = [Column("arm", "Distractors"), Column("threshold", "Rule"), Column("queries", "Queries"),
               Column("acc", "Accuracy % [95% CI]"), Column("abst", "Abstained %"), Column("wrongs", "Wrong %"),
               Column("mean_de", "Mean DE", fmt_float), Column("adapted", "Adapted thr. (queries; median [range])")]
    # markdown from the rendered strings, CSV from the raw values (``rendered`` holds both)
    rendered = [{**r, "acc": common.pct_ci(r, "correct"), "abst": common.pct_ci(r, "abstained"),
                 "wrongs": common.pct_ci(r, "wrong"), "adapted": _adapted_cell(r)} for r in arms.rows]
    csv_cols = ["arm", "threshold", "queries", *common.OUTCOME_COLUMNS, "mean_de", "n_adapted", "eff_threshold_median",
                "eff_threshold_min", "eff_threshold_max", "p_wilcoxon", "wilcoxon_statistic", "n_discordant",
                "p_bootstrap", "p_mcnemar", "only_weak_correct", "only_hard_correct"]
    wil, mcn = arms.wil, arms.mcn
    note = (f"Paired on {n_queries} queries (same relevant passage and position in both arms). weak - hard: "
            f"Wilcoxon signed-rank p = {fmt_p(wil['p'])} on per-query correctness ({wil['n_nonzero']} discordant "
            f"pairs), paired bootstrap p = {fmt_p(arms.diff['p_bootstrap'])}, McNemar exact p = {fmt_p(mcn['p'])}.")
    table_md = common.add_table(paths, "table", out / "distractors", rendered, md_cols, note=note,
                                csv_columns=csv_cols, title=f"Distractor sensitivity, k = {cfg.k} (LLM {name})")
    breakdown = arms.breakdown
    table_md += "\n" + common.add_table(paths, "breakdown", out / "distractors_breakdown", [
        {**r, "w": fmt_pct(r["acc_weak"]), "h": fmt_pct(r["acc_hard"]), "d": common.pct_ci(r, "diff"),
         "de": f"{fmt_float(r['mean_de_weak'])} / {fmt_float(r['mean_de_hard'])}"} for r in breakdown],
        [Column("by", "By"), Column("group", "Group"), Column("queries", "Queries"), Column("w", "Acc. weak %"),
         Column("h", "Acc. hard %"), Column("d", "weak - hard (pts) [95% CI]"), Column("de", "Mean DE weak / hard")],
        title="Breakdown: threshold adaptation and DE contrast", csv_columns=list(breakdown[0]))
    paths["per_query_csv"] = write_csv(out / "distractors_per_query.csv", per_query)
    return table_md


def _plot_arms(out, arms: _ArmStatistics, cfg: DistractorConfig, name: str, info, *, n_queries: int):
    """The bar chart: each arm's outcome rates and the accuracy lost to hard distractors (``distractors.png``)."""
    diff = arms.diff
    labels, vals, lo, hi = common.outcome_bars(arms.rows[:2], lambda r: r["arm"])
    labels.append("accuracy lost to hard (weak - hard)")
    vals.append(100 * diff["diff"])
    lo.append(100 * diff["lo"])
    hi.append(100 * diff["hi"])
    title = common.plot_title(f"Weak vs hard distractors, k = {cfg.k}", dataset=cfg.dataset,
                              n_queries=n_queries, llm=name, by_split=info["by_split"])
    return plot_bars(labels, vals, out / "distractors.png", lo=lo, hi=hi, ylabel="% of queries (95% CI)",
                     highlight=[labels[0], labels[1], labels[-1]], digits=1, title=title)


def _breakdown(ind, adapted, mean_de, n_bootstrap: int, seed: int) -> list[dict[str, Any]]:
    """weak - hard by how the arms were built (the fixed-threshold contrast is the paper's; adapted arms are
    closer) and by the per-query DE contrast (terciles of mean hard DE - mean weak DE)."""
    weak_ad, hard_ad = adapted["weak"], adapted["hard"]
    gap = mean_de["hard"] - mean_de["weak"]
    groups = [("adaptation", "both fixed", ~weak_ad & ~hard_ad), ("adaptation", "weak adapted only", weak_ad & ~hard_ad),
              ("adaptation", "hard adapted only", ~weak_ad & hard_ad), ("adaptation", "both adapted", weak_ad & hard_ad)]
    bins = np.digitize(gap, np.quantile(gap, [1 / 3, 2 / 3]))  # 0, 1, 2: low / middle / high contrast
    for b, label in enumerate(("low", "middle", "high")):
        sel = bins == b
        if sel.any():
            groups.append(("DE gap tercile", f"{label}: {gap[sel].min():.2f}-{gap[sel].max():.2f}", sel))
    rows = []
    for by, label, sel in groups:
        if not sel.any():
            continue
        weak, hard = ind["weak"]["correct"][sel], ind["hard"]["correct"][sel]
        d = paired_difference(weak, hard, n_bootstrap, seed)
        rows.append({"by": by, "group": label, "queries": int(sel.sum()), "acc_weak": float(weak.mean()),
                     "acc_hard": float(hard.mean()), "diff": d["diff"], "diff_lo": d["lo"], "diff_hi": d["hi"],
                     "mean_de_weak": float(mean_de["weak"][sel].mean()),
                     "mean_de_hard": float(mean_de["hard"][sel].mean())})
    return rows


def _adapted_cell(row) -> str:
    """The table's "adapted" cell: an arm's adapted queries and their effective thresholds."""
    if row["arm"] == "weak - hard":
        return ""
    return f"{row['n_adapted']}; {_effective_thresholds(row)}" if row["n_adapted"] else "0"


def _effective_thresholds(row) -> str:
    """An arm's effective thresholds over its adapted queries: ``median [min, max]``."""
    return fmt_ci(row["eff_threshold_median"], row["eff_threshold_min"], row["eff_threshold_max"])


def _markdown(cfg: DistractorConfig, name: str, rows, info, meta, table_md: str) -> str:
    weak, hard, diff = rows
    lines = [f"# Distractor sensitivity (UDCG paper, Table 1): LLM `{name}`, k = {cfg.k}", "",
             f"- Queries: {common.describe_selection(info, cfg.max_queries)}.",
             *([f"- Context size: {meta['k_note']} (adapt_k)."] if meta.get("k_note") else []),
             f"- Each query: its {'best-ranked' if cfg.relevant == 'top_ranked' else 'highest-utility'} relevant "
             f"passage at {'a seeded random position' if cfg.relevant_position == 'random' else 'position ' + str(cfg.relevant_position)}"
             f" (the same in both arms) plus {cfg.k - 1} distractors; DE = 1 - P(NO-RESPONSE) of the distractor alone.",
             f"- Thresholds: weak DE < {cfg.weak_threshold:g}, hard DE > {cfg.hard_threshold:g}; adaptive = "
             f"{cfg.adaptive}. Adapted (too few passages beyond the fixed threshold; the arm took the k-1 most "
             f"extreme passages of the pool): weak arm {meta['n_weak_adapted']} queries, hard arm "
             f"{meta['n_hard_adapted']} queries, either {meta['n_any_adapted']} of {meta['n_queries']}.",
             f"- Effective thresholds of adapted arms: weak max DE median {_effective_thresholds(weak)}; "
             f"hard min DE median {_effective_thresholds(hard)}.",
             f"- Mean distractor DE: weak {fmt_float(weak['mean_de'])}, hard {fmt_float(hard['mean_de'])}.",
             "", table_md, "",
             f"Accuracy lost to hard distractors: {fmt_pct(diff['correct'])} points "
             f"(95% CI [{fmt_pct(diff['correct_lo'])}, {fmt_pct(diff['correct_hi'])}]); Wilcoxon signed-rank "
             f"p = {fmt_p(diff['p_wilcoxon'])} ({diff['n_discordant']} of {meta['n_queries']} pairs differ: "
             f"{diff['only_weak_correct']} correct only with weak, {diff['only_hard_correct']} only with hard).",
             "", f"Statistics: CIs are bootstrap percentile intervals over queries ({cfg.n_bootstrap} resamples, seed "
             f"{cfg.seed}); the difference row is paired (weak minus hard per query). Correct = the answer contains a "
             "gold answer (whole tokens, normalised) and the context holds a relevant passage."]
    return "\n".join(lines) + "\n"
