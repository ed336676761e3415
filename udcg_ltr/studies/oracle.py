"""Oracle contexts by annotation schema (UDCG paper, Table 2).

For every query and context size ``k``, three "oracle" contexts are built from the query's pool, each
the top ``k`` passages under one annotation schema, in that order (document ``[1]`` first):

* ``relevance``: binary relevance (relevant passages first), ties broken by retrieval order;
* ``erag``: eRAG labels -- the LLM's answer to the passage alone (``answer_alone``) is correct
  (gold answer contained, whole tokens, as :func:`udcg_ltr.annotate.baselines.erag_labels`;
  ``rule="em"``: exact match) -- correct ones first, ties broken by retrieval order;
* ``utility``: passage utility (Eq. 2, ``u = R (1 - P(NO-RESPONSE))``), descending, ties broken by
  retrieval order. Relevant passages the LLM can use come first; then, where the pool forces it,
  the *least distracting* irrelevant passages -- the point of the schema.

The LLM answers each context; answers are graded correct / abstained / wrong (correct requires a
gold answer in the answer **and** a relevant passage in the context). Per schema: the three rates
with bootstrap 95% CIs over queries. Between schemas (paired, same queries): the difference of the
correct rate and of the wrong rate with bootstrap CIs, McNemar's exact test on per-query
correctness and, separately, on per-query wrongness (both two-sided binomial tests on the
discordant queries), and the ratio of wrong rates with a bootstrap CI (the paper reports wrong
answers roughly halved by utility-chosen contexts). Rows are also given for the subset of queries
whose pool holds a relevant passage (no extra LLM call). Identical contexts across schemas are
answered once (the cache) and counted.

Public entry: :func:`run_oracle_contexts` (parameters: :class:`OracleConfig`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import ensure_annotations
from udcg_ltr.annotate.baselines import erag_labels
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.sampling import retrieval_order
from udcg_ltr.report import Column, fmt_float, fmt_p, fmt_pct, plot_bars, write_csv, write_table
from udcg_ltr.stats.bootstrap import paired_difference, paired_ratio_ci
from udcg_ltr.stats.paired import mcnemar_exact
from udcg_ltr.studies.common import (
    OUTCOME_COLUMNS,
    OUTCOMES,
    StudyContext,
    StudyParams,
    StudyReport,
    answer_contexts,
    config_from,
    describe_selection,
    finish_report,
    outcome_bars,
    outcome_indicators,
    outcome_rates,
    pct_ci,
    plot_title,
    select_queries,
    study_inputs,
)

SCHEMAS = ("relevance", "erag", "utility")
_ERAG_FIELD = {"contains": "erag_contains", "em": "erag_em", "f1": "erag_f1"}


@dataclass(frozen=True)
class OracleConfig(StudyParams):
    """Parameters of :func:`run_oracle_contexts`.

    ``ks``: context sizes; ``schemas``: among ``relevance``, ``erag``, ``utility``; ``erag_rule``:
    how a single-passage answer counts as correct for the eRAG label (``contains``, ``em``, or
    ``f1`` with token F1 >= 0.5); ``splits`` / ``max_queries``: query selection (order of preference).
    """

    ks: tuple[int, ...] = (5,)
    schemas: tuple[str, ...] = SCHEMAS
    erag_rule: str = "contains"

    def __post_init__(self):
        ks = (self.ks,) if isinstance(self.ks, int) else tuple(int(k) for k in self.ks)
        object.__setattr__(self, "ks", ks)
        object.__setattr__(self, "schemas", tuple(self.schemas))
        if not ks or min(ks) < 1:
            raise ValueError(f"ks must be positive context sizes, got {self.ks}")
        bad = set(self.schemas) - set(SCHEMAS)
        if bad or not self.schemas:
            raise ValueError(f"unknown schemas {sorted(bad)} (known: {SCHEMAS})")
        if self.erag_rule not in _ERAG_FIELD:
            raise ValueError(f"erag_rule must be one of {sorted(_ERAG_FIELD)}, got {self.erag_rule!r}")


def erag_label(p: Passage, answers: Sequence[str], llm: str, rule: str = "contains") -> float:
    """eRAG label of one passage: its single-passage answer is correct (1.0) or not (0.0)."""
    labels = erag_labels(str(p.annotations[llm]["answer_alone"]), answers)
    value = labels[_ERAG_FIELD[rule]]
    return float(value >= 0.5) if rule == "f1" else float(value)


def oracle_order(record: QueryRecord, schema: str, llm: str, *, erag_rule: str = "contains",
                 relevance_threshold: int = 1) -> list[Passage]:
    """The pool sorted by ``schema`` (descending), ties by retrieval order (a stable sort of the retrieval order)."""
    pool = retrieval_order(record)
    if schema == "relevance":
        key = [float(p.is_relevant(relevance_threshold)) for p in pool]
    elif schema == "erag":
        key = [erag_label(p, record.answers, llm, erag_rule) for p in pool]
    elif schema == "utility":
        key = [p.utility(llm, relevance_threshold) for p in pool]
    else:
        raise ValueError(f"unknown schema {schema!r}")
    order = np.argsort(-np.asarray(key, dtype=np.float64), kind="stable")
    return [pool[i] for i in order]


def plan_oracle_contexts(records: Sequence[QueryRecord], llm: str, cfg: OracleConfig) -> list[StudyContext]:
    """The top-``k`` context (pool smaller than ``k``: the whole pool) per ``k``, query and schema, in that
    order: ``k``-major, so the first context size is fully answered before the next one starts (an
    interrupted run leaves complete sizes in the cache)."""
    orders = [{s: oracle_order(r, s, llm, erag_rule=cfg.erag_rule, relevance_threshold=cfg.relevance_threshold)
               for s in cfg.schemas} for r in records]
    S = len(cfg.schemas)
    return [StudyContext(r.qid, ki * S + si, tuple(p.pid for p in order[s][:k]), f"{s}@{k}")
            for ki, k in enumerate(cfg.ks) for r, order in zip(records, orders) for si, s in enumerate(cfg.schemas)]


def run_oracle_contexts(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm, out_dir: str | os.PathLike,
                        logger=None, cache=True, progress: bool = True, **params) -> StudyReport:
    """Correct / abstained / wrong rates of oracle contexts per annotation schema (UDCG paper, Table 2).

    Args: as :func:`udcg_ltr.studies.distractors.run_distractor_sensitivity`; ``params`` are
    :class:`OracleConfig` fields (``ks=(5, 3)``, ``schemas=...``). Needs ``p_no_response`` and, for
    the eRAG schema, ``answer_alone`` annotations (computed with the scorer when missing).
    """
    cfg = config_from(params, OracleConfig)
    name, runner, runs, out = study_inputs(llm, scorer_or_runs, out_dir, cache)
    selected, info = select_queries(records, splits=cfg.splits, max_queries=cfg.max_queries,
                                    eligible=lambda r: None if r.passages else "empty pool")
    if not selected:
        raise ValueError("no query for the oracle study")
    fields = ["p_no_response"] + (["answer_alone"] if "erag" in cfg.schemas else [])
    ann = ensure_annotations(selected, name, fields, runner, progress=progress)
    by_qid = {r.qid: r for r in records}
    contexts = plan_oracle_contexts(selected, name, cfg)
    graded = answer_contexts(by_qid, contexts, llm=name, scorer=runner, runs=runs, rule=cfg.rule,
                             relevance_threshold=cfg.relevance_threshold, progress=progress)
    n, S = len(selected), len(cfg.schemas)
    B, seed = cfg.n_bootstrap, cfg.seed
    has_rel = np.array([any(p.is_relevant(cfg.relevance_threshold) for p in r.passages) for r in selected])
    subsets = {"all": np.ones(n, bool), "with relevant": has_rel}

    rows: list[dict[str, Any]] = []
    pair_rows: list[dict[str, Any]] = []
    identical: dict[str, Any] = {}
    per_query = [{"qid": r.qid, "split": r.split, "pool_has_relevant": bool(h)} for r, h in zip(selected, has_rel)]
    for ki, k in enumerate(cfg.ks):
        # contexts are laid out k by k, then query by query, then schema (plan_oracle_contexts)
        by_schema = {s: [graded[ki * n * S + qi * S + si] for qi in range(n)] for si, s in enumerate(cfg.schemas)}
        ind = {s: outcome_indicators(v) for s, v in by_schema.items()}
        n_rel_in_ctx = {s: np.array([sum(by_qid[run.qid].passage(pid).is_relevant(cfg.relevance_threshold)
                                         for pid in run.pids) for run in v]) for s, v in by_schema.items()}
        for qi in range(n):
            for s in cfg.schemas:
                run = by_schema[s][qi]
                per_query[qi][f"{s}@{k}_outcome"] = run.outcome
                per_query[qi][f"{s}@{k}_pids"] = " ".join(run.pids)
        for a, b in itertools.combinations(cfg.schemas, 2):
            same = np.array([by_schema[a][i].pids == by_schema[b][i].pids for i in range(n)])
            identical[f"{a}={b}@{k}"] = int(same.sum())
        for label, sel in subsets.items():
            if not sel.any():
                continue
            for s in cfg.schemas:
                row: dict[str, Any] = {"k": k, "subset": label, "schema": s, "queries": int(sel.sum())}
                row.update(outcome_rates(ind[s], B, seed, sel))
                row["mean_relevant_in_context"] = float(n_rel_in_ctx[s][sel].mean())
                row["context_has_relevant"] = float((n_rel_in_ctx[s][sel] > 0).mean())
                rows.append(row)
            for a, b in itertools.permutations(cfg.schemas, 2):
                if SCHEMAS.index(a) < SCHEMAS.index(b):
                    continue  # report later schema minus earlier one: utility - relevance, utility - erag, erag - relevance
                ca, cb = ind[a]["correct"][sel], ind[b]["correct"][sel]
                wa, wb = ind[a]["wrong"][sel], ind[b]["wrong"][sel]
                dc = paired_difference(ca, cb, B, seed)
                dw = paired_difference(wa, wb, B, seed)
                mc = mcnemar_exact(ca, cb)
                mw = mcnemar_exact(wa, wb)
                ratio, rlo, rhi = paired_ratio_ci(wa, wb, B, seed)
                pair_rows.append({"k": k, "subset": label, "comparison": f"{a} - {b}", "queries": int(sel.sum()),
                                  "d_correct": dc["diff"], "d_correct_lo": dc["lo"], "d_correct_hi": dc["hi"],
                                  "p_mcnemar_correct": mc["p"], "only_a_correct": mc["only_a"],
                                  "only_b_correct": mc["only_b"],
                                  "d_wrong": dw["diff"], "d_wrong_lo": dw["lo"], "d_wrong_hi": dw["hi"],
                                  "p_mcnemar_wrong": mw["p"], "only_a_wrong": mw["only_a"], "only_b_wrong": mw["only_b"],
                                  "wrong_ratio": ratio, "wrong_ratio_lo": rlo, "wrong_ratio_hi": rhi})

    # ---- files ---------------------------------------------------------------------------------
    paths: dict[str, Path] = {}
    md_cols = [Column("k", "k"), Column("subset", "Queries"), Column("schema", "Schema"), Column("queries", "n"),
               Column("c", "Correct % [95% CI]"), Column("a", "Abstained % [95% CI]"), Column("w", "Wrong % [95% CI]"),
               Column("context_has_relevant", "Ctx with relevant %", fmt_pct)]
    rendered = [{**r, "c": pct_ci(r, "correct"), "a": pct_ci(r, "abstained"), "w": pct_ci(r, "wrong")} for r in rows]
    csv_cols = ["k", "subset", "schema", "queries", *OUTCOME_COLUMNS, "mean_relevant_in_context", "context_has_relevant"]
    t = write_table(out / "oracle", rendered, md_cols, title=f"Oracle contexts by annotation schema (LLM {name})",
                    note="CIs: bootstrap percentile over queries.", csv_columns=csv_cols)
    paths["table_md"], paths["table_csv"] = t["md"], t["csv"]
    pair_md_cols = [Column("k", "k"), Column("subset", "Queries"), Column("comparison", "A - B"), Column("queries", "n"),
                    Column("dc", "d correct (pts) [95% CI]"), Column("p_mcnemar_correct", "McNemar p (correct)", fmt_p),
                    Column("dw", "d wrong (pts) [95% CI]"), Column("p_mcnemar_wrong", "McNemar p (wrong)", fmt_p),
                    Column("wr", "wrong A / wrong B [95% CI]")]
    pair_rendered = [{**r, "dc": pct_ci(r, "d_correct"), "dw": pct_ci(r, "d_wrong"),
                      "wr": (f"{fmt_float(r['wrong_ratio'], 2)} [{fmt_float(r['wrong_ratio_lo'], 2)}, "
                             f"{fmt_float(r['wrong_ratio_hi'], 2)}]")} for r in pair_rows]
    t2 = write_table(out / "oracle_pairs", pair_rendered, pair_md_cols, title="Paired comparisons between schemas",
                     note="McNemar: exact two-sided binomial test on the discordant queries (per-query correctness, "
                          "then per-query wrongness); d: paired mean difference with a bootstrap CI.",
                     csv_columns=list(pair_rows[0]) if pair_rows else None)
    paths["pairs_md"], paths["pairs_csv"] = t2["md"], t2["csv"]
    paths["per_query_csv"] = write_csv(out / "oracle_per_query.csv", per_query)
    main = [r for r in rows if r["subset"] == "all"]
    labels, vals, lo, hi = outcome_bars(main, lambda r: f"{r['schema']}@{r['k']}")
    paths["png"] = plot_bars(labels, vals, out / "oracle.png", lo=lo, hi=hi, ylabel="% of queries (95% CI)",
                             highlight=[lab for lab in labels if lab.startswith("wrong")], digits=1,
                             title=plot_title("Oracle contexts by schema", dataset=cfg.dataset, n_queries=n, llm=name,
                                              by_split=info["by_split"]))

    meta = {"study": "oracle", "llm": name, "config": asdict(cfg), "n_queries": n,
            "n_queries_with_relevant": int(has_rel.sum()), "n_contexts": len(graded),
            "n_distinct_contexts": len({(c.qid, c.pids) for c in contexts}), "identical_contexts": identical,
            "selection": info, "annotations": ann, "source": "scorer" if runner else "runs"}
    scalars: dict[str, float] = {"n_queries": n}
    for r in main:
        for o in OUTCOMES:
            scalars[f"{o}/{r['schema']}@{r['k']}"] = r[o]
    md = _markdown(cfg, name, meta, info, t["md"].read_text(encoding="utf-8"), t2["md"].read_text(encoding="utf-8"),
                   pair_rows)
    report = StudyReport(name="oracle", rows=rows, markdown=md, paths=paths, meta=meta,
                         tables={"table": rows, "pairs": pair_rows, "per_query": per_query}, scalars=scalars,
                         runs=graded)
    return finish_report(report, out, logger)


def _markdown(cfg: OracleConfig, name, meta, info, table_md, pairs_md, pair_rows) -> str:
    lines = [f"# Oracle contexts by annotation schema (UDCG paper, Table 2): LLM `{name}`", "",
             f"- Queries: {describe_selection(info, cfg.max_queries)}; "
             f"{meta['n_queries_with_relevant']} have a relevant passage in their pool (the 'with relevant' rows).",
             f"- Context sizes {list(cfg.ks)}; schemas {list(cfg.schemas)}: top-k by binary relevance (ties: "
             "retrieval order), by eRAG label (single-passage answer correct, rule "
             f"'{cfg.erag_rule}'; ties: retrieval order), by utility (Eq. 2, descending).",
             f"- {meta['n_contexts']} contexts, {meta['n_distinct_contexts']} distinct; identical contexts between "
             f"schemas (queries): {meta['identical_contexts']}.",
             "- Correct = gold answer contained in the answer and a relevant passage in the context.",
             "", table_md, "", pairs_md, ""]
    for r in pair_rows:
        if r["comparison"] == "utility - relevance" and r["subset"] == "all":
            lines.append(f"- k={r['k']}: utility vs relevance contexts: wrong {fmt_pct(r['d_wrong'])} points "
                         f"[{fmt_pct(r['d_wrong_lo'])}, {fmt_pct(r['d_wrong_hi'])}] (ratio "
                         f"{fmt_float(r['wrong_ratio'], 2)} [{fmt_float(r['wrong_ratio_lo'], 2)}, "
                         f"{fmt_float(r['wrong_ratio_hi'], 2)}], McNemar p = {fmt_p(r['p_mcnemar_wrong'])}); correct "
                         f"{fmt_pct(r['d_correct'])} points [{fmt_pct(r['d_correct_lo'])}, "
                         f"{fmt_pct(r['d_correct_hi'])}] (McNemar p = {fmt_p(r['p_mcnemar_correct'])}).")
    lines += ["", f"Statistics: bootstrap percentile 95% CIs over queries ({cfg.n_bootstrap} resamples, seed "
              f"{cfg.seed}); paired tests: McNemar's exact test on per-query correctness and on per-query wrongness."]
    return "\n".join(lines) + "\n"
