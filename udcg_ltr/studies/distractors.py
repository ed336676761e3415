"""Distractor sensitivity: one relevant passage plus weak vs hard distractors (UDCG paper, Table 1).

For every query with a relevant passage, two contexts of ``k`` passages are answered by the LLM:

* **weak**: the relevant passage plus ``k - 1`` irrelevant passages whose distracting effect
  ``DE = 1 - P(NO-RESPONSE | q, p)`` (the magnitude of Eq. 2's negative utility, from the
  single-passage annotations) is below ``weak_threshold`` (default 0.2);
* **hard**: the same relevant passage plus ``k - 1`` irrelevant passages with DE above
  ``hard_threshold`` (default 0.8).

Pairing: both arms share the relevant passage **and its position** (seeded per query, uniform over
``1..k`` by default), and their distractors fill the same slots in the same DE order (each arm's
distractors are sorted by DE, then dealt into the non-relevant slots by one seeded permutation
shared by the two arms) -- only the distractors differ.

Adaptive thresholds. A retrieval pool (10 passages here) seldom holds ``k - 1`` passages beyond each
fixed threshold. When an arm has fewer than ``k - 1`` candidates and ``adaptive`` is on, that arm
takes the ``k - 1`` most extreme irrelevant passages of the query's pool instead: the ``k - 1``
lowest-DE ones for the weak arm (effective threshold: the ``(k-1)/n`` empirical quantile of the
pool's DE distribution, i.e. the largest DE in the arm), the ``k - 1`` highest-DE ones for the hard
arm (effective threshold: its smallest DE). A fixed-threshold arm draws its ``k - 1`` passages at
random (seeded) among its candidates, never from the other arm's passages. Queries where the two
arms would share a passage or not separate (weak max DE >= hard min DE), or whose pool holds fewer
than ``2 (k - 1)`` irrelevant passages, are left out and counted. The report states how many queries
used adapted thresholds for each arm, and the effective thresholds (median and range).

Context size. ``k`` is fixed unless ``adapt_k`` is on: then ``k`` is an upper bound and the study
uses the largest ``k' <= k`` at which at least half of the candidate queries (those with a relevant
passage in the chosen splits) hold the ``2 (k' - 1)`` irrelevant passages two disjoint arms need
(:func:`fit_k_to_pools`); a lowered ``k`` is logged and stated in the report. Pools of 8 passages
(the demo world) cannot hold 2 x 4 distractors, so the job default (``k = 5``) becomes 4 there,
while a fixed ``k`` that no pool supports is an error naming the largest ``k`` that would work.

Statistics: accuracy (``correct`` rate; correct needs a relevant passage in the context, which both
arms have) per arm with bootstrap 95% CIs over queries; the paired difference weak - hard (accuracy
points lost to hard distractors) with its bootstrap CI and centred-bootstrap p; the Wilcoxon
signed-rank test (``scipy.stats.wilcoxon``) on per-query paired correctness (0/1; zero differences
dropped); McNemar's exact test on the same pairs for reference; abstained / wrong rates per arm.

Public entry: :func:`run_distractor_sensitivity` (parameters: :class:`DistractorConfig`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import ensure_annotations
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.sampling import query_rng, retrieval_order
from udcg_ltr.report import Column, fmt_float, fmt_p, fmt_pct, plot_bars, write_csv, write_table
from udcg_ltr.stats.bootstrap import paired_difference
from udcg_ltr.stats.paired import mcnemar_exact, wilcoxon_paired
from udcg_ltr.studies.common import (
    OUTCOME_COLUMNS,
    StudyContext,
    StudyParams,
    StudyReport,
    answer_contexts,
    config_from,
    describe_selection,
    distracting_effect,
    finish_report,
    order_by_splits,
    outcome_bars,
    outcome_indicators,
    outcome_rates,
    pct_ci,
    plot_title,
    select_queries,
    study_inputs,
)

log = logging.getLogger(__name__)

ARMS = ("weak", "hard")


@dataclass(frozen=True)
class DistractorConfig(StudyParams):
    """Parameters of :func:`run_distractor_sensitivity` (mirrored by the lead's Hydra config).

    ``relevant``: which relevant passage (``"top_ranked"``: the best-ranked relevant passage of the
    pool; ``"best_utility"``: the relevant passage with the highest utility). ``relevant_position``:
    ``"random"`` (seeded per query, uniform over 1..k) or a 1-based position. ``selection``: how a
    fixed-threshold arm picks its ``k - 1`` passages among its candidates (``"random"`` seeded, or
    ``"extreme"``: the lowest / highest DE). ``splits``: the queries' splits in order of preference
    (``None``: all, input order); ``max_queries`` caps the eligible queries taken in that order.
    ``adapt_k``: ``k`` is an upper bound, lowered to what the pools hold (:func:`fit_k_to_pools`).
    """

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


def _relevant_passage(record: QueryRecord, cfg: DistractorConfig, llm: str) -> Passage | None:
    rel = [p for p in retrieval_order(record) if p.is_relevant(cfg.relevance_threshold)]
    if not rel:
        return None
    if cfg.relevant == "best_utility":
        # stable: among equal utilities the better-ranked passage wins
        return max(rel, key=lambda p: (p.utility(llm, cfg.relevance_threshold), -rel.index(p)))
    return rel[0]


def plan_query(record: QueryRecord, llm: str, cfg: DistractorConfig) -> DistractorPlan | str:
    """The paired weak / hard contexts of one query, or the reason it is left out."""
    rel = _relevant_passage(record, cfg, llm)
    if rel is None:
        return "no relevant passage"
    m = cfg.k - 1
    irr = [p for p in retrieval_order(record) if not p.is_relevant(cfg.relevance_threshold)]
    if len(irr) < 2 * m:
        return f"fewer than 2(k-1)={2 * m} irrelevant passages"
    de = np.array([distracting_effect(p, llm) for p in irr])
    # stable sorts: equal DEs keep retrieval order
    asc = np.argsort(de, kind="stable")
    desc = np.argsort(-de, kind="stable")
    weak_cand = np.flatnonzero(de < cfg.weak_threshold)
    hard_cand = np.flatnonzero(de > cfg.hard_threshold)
    weak_adapted = len(weak_cand) < m
    hard_adapted = len(hard_cand) < m
    if (weak_adapted or hard_adapted) and not cfg.adaptive:
        return "too few distractors beyond a fixed threshold (adaptive off)"
    rng = query_rng(cfg.seed, record.qid, "distractors")

    def pick(cands: np.ndarray, exclude: set[int], order: np.ndarray) -> np.ndarray | None:
        cands = np.array([c for c in cands if c not in exclude], dtype=np.int64)
        if len(cands) < m:
            return None
        if cfg.selection == "extreme":
            ranked = [i for i in order if i in set(cands.tolist())]
            return np.array(ranked[:m], dtype=np.int64)
        return rng.choice(cands, size=m, replace=False)

    weak = asc[:m] if weak_adapted else None
    hard = desc[:m] if hard_adapted else None
    if weak is None:
        weak = pick(weak_cand, set(hard.tolist()) if hard is not None else set(), asc)
    if hard is None:
        hard = pick(hard_cand, set(weak.tolist()) if weak is not None else set(), desc)
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
    (a relevant passage, in ``cfg.splits``) hold ``2 (k' - 1)`` irrelevant passages; ``note`` says why when
    ``k' < cfg.k`` (else None)."""
    counts = []
    for r in order_by_splits(records, cfg.splits):
        rel = sum(p.is_relevant(cfg.relevance_threshold) for p in r.passages)
        if rel:
            counts.append(len(r.passages) - rel)
    if not counts:
        return cfg.k, None
    k = cfg.k
    while k > 2 and sum(n >= 2 * (k - 1) for n in counts) * 2 < len(counts):
        k -= 1
    if k == cfg.k:
        return k, None
    return k, (f"k lowered from {cfg.k} to {k}: two disjoint arms need 2(k-1) = {2 * (cfg.k - 1)} irrelevant "
               f"passages, which {sum(n >= 2 * (cfg.k - 1) for n in counts)} of {len(counts)} candidate pools hold "
               f"(at most {max(counts)} irrelevant passages a pool); at k = {k}, "
               f"{sum(n >= 2 * (k - 1) for n in counts)} do")


def plan_distractor_contexts(records: Sequence[QueryRecord], llm: str, cfg: DistractorConfig
                             ) -> tuple[list[DistractorPlan], list[StudyContext], dict[str, Any]]:
    """Plans for the selected queries, their contexts (weak then hard per query) and the selection info."""
    plans: dict[str, DistractorPlan] = {}

    def eligible(r: QueryRecord):
        out = plan_query(r, llm, cfg)
        if isinstance(out, str):
            return out
        plans[r.qid] = out
        return None

    selected, info = select_queries(records, splits=cfg.splits, max_queries=cfg.max_queries, eligible=eligible)
    chosen = [plans[r.qid] for r in selected]
    contexts = []
    for i, p in enumerate(chosen):
        contexts.append(StudyContext(p.qid, 2 * i, p.weak, "weak"))
        contexts.append(StudyContext(p.qid, 2 * i + 1, p.hard, "hard"))
    return chosen, contexts, info


def run_distractor_sensitivity(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm, out_dir: str | os.PathLike,
                               logger=None, cache=True, progress: bool = True, **params) -> StudyReport:
    """Accuracy with weak vs hard distractors around the same relevant passage (UDCG paper, Table 1).

    Args:
        records: the queries with their pools (single-passage ``p_no_response`` of ``llm``; computed
            with the scorer when missing).
        scorer_or_runs: the LLM that answers the contexts, or ready-made ``ContextRun`` s.
        llm: the annotation name, or the scorer itself.
        out_dir: where the tables (``distractors.md/.csv``), per-query CSV, PNG, ``report.md`` and
            ``summary.json`` go.
        logger: a ``RunLogger`` / W&B run to log to.
        cache: ``True`` (default folder), a path, an ``AnnotationCache``, or ``None``.
        params: :class:`DistractorConfig` fields (or ``config=DistractorConfig(...)``).
    """
    cfg = config_from(params, DistractorConfig)
    k_note = None
    if cfg.adapt_k:
        k, k_note = fit_k_to_pools(records, cfg)
        if k_note is not None:
            log.warning("distractor study: %s", k_note)
            if isinstance(cfg.relevant_position, int) and cfg.relevant_position > k:
                raise ValueError(f"relevant_position {cfg.relevant_position} > k = {k} after {k_note}")
            cfg = replace(cfg, k=k)
    name, runner, runs, out = study_inputs(llm, scorer_or_runs, out_dir, cache)
    ann = ensure_annotations(records, name, ["p_no_response"], runner, progress=progress)
    by_qid = {r.qid: r for r in records}
    plans, contexts, info = plan_distractor_contexts(records, name, cfg)
    if not plans:
        feasible, _ = fit_k_to_pools(records, replace(cfg, adapt_k=True))
        hint = (f"; the pools support k = {feasible} (studies.distractors.k={feasible}, or adapt_k=true)"
                if feasible < cfg.k else "")
        raise ValueError(f"no eligible query for the distractor study at k = {cfg.k} "
                         f"(excluded: {info['excluded']}){hint}")
    graded = answer_contexts(by_qid, contexts, llm=name, scorer=runner, runs=runs, rule=cfg.rule,
                             relevance_threshold=cfg.relevance_threshold, progress=progress)
    weak_runs, hard_runs = graded[0::2], graded[1::2]
    ind = {"weak": outcome_indicators(weak_runs), "hard": outcome_indicators(hard_runs)}
    B, seed = cfg.n_bootstrap, cfg.seed

    weak_eff = np.array([p.weak_threshold_eff for p in plans])
    hard_eff = np.array([p.hard_threshold_eff for p in plans])
    weak_ad = np.array([p.weak_adapted for p in plans])
    hard_ad = np.array([p.hard_adapted for p in plans])
    mean_de = {"weak": np.array([np.mean(p.weak_de) for p in plans]),
               "hard": np.array([np.mean(p.hard_de) for p in plans])}
    rows: list[dict[str, Any]] = []
    for arm in ARMS:
        row: dict[str, Any] = {"arm": arm, "queries": len(plans),
                               "threshold": (f"DE < {cfg.weak_threshold:g}" if arm == "weak"
                                             else f"DE > {cfg.hard_threshold:g}")}
        row.update(outcome_rates(ind[arm], B, seed))
        row["mean_de"] = float(mean_de[arm].mean())
        adapted = weak_ad if arm == "weak" else hard_ad
        eff = weak_eff if arm == "weak" else hard_eff
        row["n_adapted"] = int(adapted.sum())
        row["eff_threshold_median"] = float(np.median(eff[adapted])) if adapted.any() else float("nan")
        row["eff_threshold_min"] = float(eff[adapted].min()) if adapted.any() else float("nan")
        row["eff_threshold_max"] = float(eff[adapted].max()) if adapted.any() else float("nan")
        rows.append(row)
    diff = paired_difference(ind["weak"]["correct"], ind["hard"]["correct"], B, seed)
    wil = wilcoxon_paired(ind["weak"]["correct"], ind["hard"]["correct"])
    mcn = mcnemar_exact(ind["weak"]["correct"], ind["hard"]["correct"])
    diff_row = {"arm": "weak - hard", "queries": len(plans), "threshold": "",
                "correct": diff["diff"], "correct_lo": diff["lo"], "correct_hi": diff["hi"]}
    for o in ("abstained", "wrong"):
        d = paired_difference(ind["weak"][o], ind["hard"][o], B, seed)
        diff_row[o], diff_row[f"{o}_lo"], diff_row[f"{o}_hi"] = d["diff"], d["lo"], d["hi"]
    diff_row["mean_de"] = float((mean_de["weak"] - mean_de["hard"]).mean())
    diff_row.update(p_wilcoxon=wil["p"], wilcoxon_statistic=wil["statistic"], n_discordant=wil["n_nonzero"],
                    p_bootstrap=diff["p_bootstrap"], p_mcnemar=mcn["p"], only_weak_correct=mcn["only_a"],
                    only_hard_correct=mcn["only_b"])
    rows.append(diff_row)

    per_query = []
    for p, w, h in zip(plans, weak_runs, hard_runs):
        rec = by_qid[p.qid]
        per_query.append({"qid": p.qid, "split": rec.split, "relevant_pid": p.relevant_pid, "position": p.position,
                          "n_irrelevant": p.n_irrelevant, "weak_pids": " ".join(p.weak), "hard_pids": " ".join(p.hard),
                          "weak_mean_de": float(np.mean(p.weak_de)), "hard_mean_de": float(np.mean(p.hard_de)),
                          "weak_max_de": p.weak_threshold_eff, "hard_min_de": p.hard_threshold_eff,
                          "weak_adapted": p.weak_adapted, "hard_adapted": p.hard_adapted,
                          "weak_outcome": w.outcome, "hard_outcome": h.outcome,
                          "weak_answer": w.answer, "hard_answer": h.answer})

    # ---- files ---------------------------------------------------------------------------------
    paths: dict[str, Path] = {}
    md_cols = [Column("arm", "Distractors"), Column("threshold", "Rule"), Column("queries", "Queries"),
               Column("acc", "Accuracy % [95% CI]"), Column("abst", "Abstained %"), Column("wrongs", "Wrong %"),
               Column("mean_de", "Mean DE", fmt_float), Column("adapted", "Adapted thr. (queries; median [range])")]
    rendered = []
    for r in rows:
        is_diff = r["arm"] == "weak - hard"
        rendered.append({**r,
                         "acc": pct_ci(r, "correct"), "abst": pct_ci(r, "abstained"), "wrongs": pct_ci(r, "wrong"),
                         "adapted": "" if is_diff else (
                             f"{r['n_adapted']}; {fmt_float(r['eff_threshold_median'])} "
                             f"[{fmt_float(r['eff_threshold_min'])}, {fmt_float(r['eff_threshold_max'])}]"
                             if r["n_adapted"] else "0")})
    csv_cols = ["arm", "threshold", "queries", *OUTCOME_COLUMNS, "mean_de",
                "n_adapted", "eff_threshold_median", "eff_threshold_min", "eff_threshold_max", "p_wilcoxon",
                "wilcoxon_statistic", "n_discordant", "p_bootstrap", "p_mcnemar", "only_weak_correct",
                "only_hard_correct"]
    note = (f"Paired on {len(plans)} queries (same relevant passage and position in both arms). weak - hard: "
            f"Wilcoxon signed-rank p = {fmt_p(wil['p'])} on per-query correctness ({wil['n_nonzero']} discordant "
            f"pairs), paired bootstrap p = {fmt_p(diff['p_bootstrap'])}, McNemar exact p = {fmt_p(mcn['p'])}.")
    # markdown from the rendered strings, CSV from the raw values (``rendered`` holds both)
    t = write_table(out / "distractors", rendered, md_cols, title=f"Distractor sensitivity, k = {cfg.k} (LLM {name})",
                    note=note, csv_columns=csv_cols)
    paths["table_md"], paths["table_csv"] = t["md"], t["csv"]
    # Breakdowns: by how the arms were built (the fixed-threshold contrast is the paper's; adapted arms are
    # closer) and by the per-query DE contrast (terciles of mean hard DE - mean weak DE).
    gap = mean_de["hard"] - mean_de["weak"]
    groups = [("adaptation", "both fixed", ~weak_ad & ~hard_ad), ("adaptation", "weak adapted only", weak_ad & ~hard_ad),
              ("adaptation", "hard adapted only", ~weak_ad & hard_ad), ("adaptation", "both adapted", weak_ad & hard_ad)]
    cuts = np.quantile(gap, [1 / 3, 2 / 3])
    bins = np.digitize(gap, cuts)  # 0, 1, 2: low / middle / high contrast
    for b, label in enumerate(("low", "middle", "high")):
        sel = bins == b
        if sel.any():
            groups.append(("DE gap tercile", f"{label}: {gap[sel].min():.2f}-{gap[sel].max():.2f}", sel))
    breakdown = []
    for by, label, sel in groups:
        if not sel.any():
            continue
        d = paired_difference(ind["weak"]["correct"][sel], ind["hard"]["correct"][sel], B, seed)
        breakdown.append({"by": by, "group": label, "queries": int(sel.sum()),
                          "acc_weak": float(ind["weak"]["correct"][sel].mean()),
                          "acc_hard": float(ind["hard"]["correct"][sel].mean()), "diff": d["diff"], "diff_lo": d["lo"],
                          "diff_hi": d["hi"], "mean_de_weak": float(mean_de["weak"][sel].mean()),
                          "mean_de_hard": float(mean_de["hard"][sel].mean())})
    ta = write_table(out / "distractors_breakdown", [
        {**r, "w": fmt_pct(r["acc_weak"]), "h": fmt_pct(r["acc_hard"]), "d": pct_ci(r, "diff"),
         "de": f"{fmt_float(r['mean_de_weak'])} / {fmt_float(r['mean_de_hard'])}"} for r in breakdown],
        [Column("by", "By"), Column("group", "Group"), Column("queries", "Queries"), Column("w", "Acc. weak %"),
         Column("h", "Acc. hard %"), Column("d", "weak - hard (pts) [95% CI]"), Column("de", "Mean DE weak / hard")],
        title="Breakdown: threshold adaptation and DE contrast", csv_columns=list(breakdown[0]))
    paths["breakdown_md"], paths["breakdown_csv"] = ta["md"], ta["csv"]
    paths["per_query_csv"] = write_csv(out / "distractors_per_query.csv", per_query)
    labels, vals, lo, hi = outcome_bars(rows[:2], lambda r: r["arm"])
    labels.append("accuracy lost to hard (weak - hard)")
    vals.append(100 * diff["diff"])
    lo.append(100 * diff["lo"])
    hi.append(100 * diff["hi"])
    paths["png"] = plot_bars(labels, vals, out / "distractors.png", lo=lo, hi=hi, ylabel="% of queries (95% CI)",
                             highlight=[labels[0], labels[1], labels[-1]], digits=1,
                             title=plot_title(f"Weak vs hard distractors, k = {cfg.k}", dataset=cfg.dataset,
                                              n_queries=len(plans), llm=name, by_split=info["by_split"]))

    n_either = int((weak_ad | hard_ad).sum())
    meta = {"study": "distractors", "llm": name, "config": asdict(cfg), "k_note": k_note, "n_queries": len(plans),
            "n_contexts": len(graded), "selection": info, "annotations": ann, "source": "scorer" if runner else "runs",
            "n_weak_adapted": int(weak_ad.sum()), "n_hard_adapted": int(hard_ad.sum()), "n_any_adapted": n_either,
            "wilcoxon": wil, "mcnemar": mcn, "difference": diff}
    scalars = {"k": cfg.k, "acc_weak": rows[0]["correct"], "acc_hard": rows[1]["correct"], "acc_diff": diff["diff"],
               "acc_diff_lo": diff["lo"], "acc_diff_hi": diff["hi"], "p_wilcoxon": wil["p"], "n_queries": len(plans),
               "n_adapted_weak": int(weak_ad.sum()), "n_adapted_hard": int(hard_ad.sum())}
    md = _markdown(cfg, name, rows, info, meta, t["md"].read_text(encoding="utf-8") + "\n"
                   + ta["md"].read_text(encoding="utf-8"))
    report = StudyReport(name="distractors", rows=rows, markdown=md, paths=paths, meta=meta,
                         tables={"table": rows, "breakdown": breakdown, "per_query": per_query}, scalars=scalars,
                         runs=graded)
    return finish_report(report, out, logger)


def _markdown(cfg: DistractorConfig, name: str, rows, info, meta, table_md: str) -> str:
    weak, hard, diff = rows
    lines = [f"# Distractor sensitivity (UDCG paper, Table 1): LLM `{name}`, k = {cfg.k}", "",
             f"- Queries: {describe_selection(info, cfg.max_queries)}.",
             *([f"- Context size: {meta['k_note']} (adapt_k)."] if meta.get("k_note") else []),
             f"- Each query: its {'best-ranked' if cfg.relevant == 'top_ranked' else 'highest-utility'} relevant "
             f"passage at {'a seeded random position' if cfg.relevant_position == 'random' else 'position ' + str(cfg.relevant_position)}"
             f" (the same in both arms) plus {cfg.k - 1} distractors; "
             "DE = 1 - P(NO-RESPONSE) of the distractor alone.",
             f"- Thresholds: weak DE < {cfg.weak_threshold:g}, hard DE > {cfg.hard_threshold:g}; adaptive = "
             f"{cfg.adaptive}. Adapted (too few passages beyond the fixed threshold; the arm took the k-1 most "
             f"extreme passages of the pool): weak arm {meta['n_weak_adapted']} queries, hard arm "
             f"{meta['n_hard_adapted']} queries, either {meta['n_any_adapted']} of {meta['n_queries']}.",
             f"- Effective thresholds of adapted arms: weak max DE median {fmt_float(weak['eff_threshold_median'])} "
             f"[{fmt_float(weak['eff_threshold_min'])}, {fmt_float(weak['eff_threshold_max'])}]; hard min DE median "
             f"{fmt_float(hard['eff_threshold_median'])} [{fmt_float(hard['eff_threshold_min'])}, "
             f"{fmt_float(hard['eff_threshold_max'])}].",
             f"- Mean distractor DE: weak {fmt_float(weak['mean_de'])}, hard {fmt_float(hard['mean_de'])}.",
             "", table_md, "",
             f"Accuracy lost to hard distractors: {fmt_pct(diff['correct'])} points "
             f"(95% CI [{fmt_pct(diff['correct_lo'])}, {fmt_pct(diff['correct_hi'])}]); Wilcoxon signed-rank "
             f"p = {fmt_p(diff['p_wilcoxon'])} ({diff['n_discordant']} of {meta['n_queries']} pairs differ: "
             f"{diff['only_weak_correct']} correct only with weak, {diff['only_hard_correct']} only with hard).",
             "", "Statistics: CIs are bootstrap percentile intervals over queries "
             f"({cfg.n_bootstrap} resamples, seed {cfg.seed}); the difference row is paired (weak minus hard per "
             "query). Correct = the answer contains a gold answer (whole tokens, normalised) and the context holds "
             "a relevant passage."]
    return "\n".join(lines) + "\n"
