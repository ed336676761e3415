"""Oracle contexts by annotation schema (UDCG paper, Table 2).

For every query and context size ``k``, each schema's "oracle" context is the top ``k`` of the query's pool
under that schema (:func:`oracle_order`): ``relevance`` (binary relevance), ``erag`` (the LLM's answer to the
passage alone is correct) or ``utility`` (Eq. 2, ``u = R (1 - P(NO-RESPONSE))``: usable relevant passages
first, then, where the pool forces it, the *least distracting* irrelevant ones -- the point of the schema).

Per schema: outcome rates with bootstrap 95% CIs over queries, also on the queries whose pool holds a relevant
passage. Between schemas (paired): differences of the correct and wrong rates, McNemar's exact tests, and the
ratio of wrong rates (the paper reports wrong answers roughly halved by utility-chosen contexts).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import ensure_annotations
from udcg_ltr.annotate.baselines import erag_labels
from udcg_ltr.annotate.end_to_end import Context
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.sampling import retrieval_order
from udcg_ltr.report import Column, fmt_ci, fmt_p, fmt_pct, plot_bars, write_csv
from udcg_ltr.stats.bootstrap import paired_difference, paired_ratio_ci
from udcg_ltr.stats.paired import mcnemar_exact
from udcg_ltr.studies import common

SCHEMAS = ("relevance", "erag", "utility")
_ERAG_FIELD = {"contains": "erag_contains", "em": "erag_em", "f1": "erag_f1"}


@dataclass(frozen=True)
class OracleConfig(common.StudyParams):
    """Parameters of :func:`run_oracle_contexts`: ``ks``, context sizes; ``schemas``, among :data:`SCHEMAS`;
    ``erag_rule``: how a single-passage answer counts as correct for the eRAG label (``contains``, ``em``,
    or ``f1`` with token F1 >= 0.5)."""

    ks: tuple[int, ...] = (5,)
    schemas: tuple[str, ...] = SCHEMAS
    erag_rule: str = "contains"

    def __post_init__(self):
        object.__setattr__(self, "ks", (self.ks,) if isinstance(self.ks, int) else tuple(map(int, self.ks)))
        object.__setattr__(self, "schemas", tuple(self.schemas))
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"ks must be positive context sizes, got {self.ks}")
        bad = set(self.schemas) - set(SCHEMAS)
        if bad or not self.schemas:
            raise ValueError(f"unknown schemas {sorted(bad)} (known: {SCHEMAS})")
        if self.erag_rule not in _ERAG_FIELD:
            raise ValueError(f"erag_rule must be one of {sorted(_ERAG_FIELD)}, got {self.erag_rule!r}")


def oracle_order(record: QueryRecord, schema: str, llm: str, *, erag_rule: str = "contains",
                 relevance_threshold: int = 1) -> list[Passage]:
    """The pool sorted by ``schema`` (descending), ties by retrieval order (a stable sort of the retrieval order).
    ``erag`` labels: :func:`udcg_ltr.annotate.baselines.erag_labels` of ``answer_alone`` under ``erag_rule``."""
    pool = retrieval_order(record)
    if schema == "relevance":
        key = [float(p.is_relevant(relevance_threshold)) for p in pool]
    elif schema == "erag":  # EM and containment are 0 / 1 already; a token F1 counts from 0.5
        labels = [erag_labels(str(p.annotations[llm]["answer_alone"]), record.answers) for p in pool]
        key = [float(label[_ERAG_FIELD[erag_rule]] >= 0.5) for label in labels]
    elif schema == "utility":
        key = [p.utility(llm, relevance_threshold) for p in pool]
    else:
        raise ValueError(f"unknown schema {schema!r}")
    return [pool[i] for i in np.argsort(-np.asarray(key, dtype=np.float64), kind="stable")]


def plan_oracle_contexts(records: Sequence[QueryRecord], llm: str, cfg: OracleConfig) -> list[Context]:
    """The top-``k`` context (pool smaller than ``k``: the whole pool) per ``k``, query and schema, in that
    order: ``k``-major, so an interrupted run leaves complete context sizes in the cache."""
    orders = [{s: oracle_order(r, s, llm, erag_rule=cfg.erag_rule, relevance_threshold=cfg.relevance_threshold)
               for s in cfg.schemas} for r in records]
    S = len(cfg.schemas)
    return [Context(r.qid, ki * S + si, tuple(p.pid for p in order[s][:k]), f"{s}@{k}")
            for ki, k in enumerate(cfg.ks) for r, order in zip(records, orders) for si, s in enumerate(cfg.schemas)]


def run_oracle_contexts(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm, out_dir: str | os.PathLike,
                        logger=None, cache=True, progress: bool = True, **params) -> common.StudyReport:
    """Correct / abstained / wrong rates of oracle contexts per annotation schema (UDCG paper, Table 2).

    Args: as :func:`udcg_ltr.studies.distractors.run_distractor_sensitivity`, with :class:`OracleConfig`
    fields; the eRAG schema also needs ``answer_alone`` annotations."""
    cfg = common.config_from(params, OracleConfig)
    name, runner, runs, out = common.study_inputs(llm, scorer_or_runs, out_dir, cache)
    selected, info = common.select_queries(records, splits=cfg.splits, max_queries=cfg.max_queries,
                                           eligible=lambda r: None if r.passages else "empty pool")
    if not selected:
        raise ValueError("no query for the oracle study")
    fields = ["p_no_response"] + (["answer_alone"] if "erag" in cfg.schemas else [])
    ann = ensure_annotations(selected, name, fields, runner, progress=progress)
    by_qid = {r.qid: r for r in records}
    contexts = plan_oracle_contexts(selected, name, cfg)
    graded = common.answer_contexts(by_qid, contexts, llm=name, scorer=runner, runs=runs, rule=cfg.rule,
                                    relevance_threshold=cfg.relevance_threshold, progress=progress)
    stats = _oracle_statistics(selected, graded, by_qid, cfg)
    rows, pair_rows, n = stats.rows, stats.pair_rows, len(selected)
    paths: dict[str, Any] = {}
    table_md, pairs_md = _write_tables(paths, out, stats, name)
    main = [r for r in rows if r["subset"] == "all"]
    paths["png"] = _plot_rates(out, main, cfg, name, info, n_queries=n)
    meta = {"study": "oracle", "llm": name, "config": asdict(cfg), "n_queries": n,
            "n_queries_with_relevant": int(stats.has_rel.sum()), "n_contexts": len(graded),
            "n_distinct_contexts": len({(c.qid, c.pids) for c in contexts}), "identical_contexts": stats.identical,
            "selection": info, "annotations": ann, "source": "scorer" if runner else "runs"}
    scalars = {"n_queries": n, **{f"{o}/{r['schema']}@{r['k']}": r[o] for r in main for o in common.OUTCOMES}}
    md = _markdown(cfg, name, meta, info, table_md, pairs_md, pair_rows)
    report = common.StudyReport(name="oracle", rows=rows, markdown=md, paths=paths, meta=meta,
                                tables={"table": rows, "pairs": pair_rows, "per_query": stats.per_query},
                                scalars=scalars, runs=graded)
    return common.finish_report(report, out, logger)


@dataclass
class _OracleStatistics:
    """The rates per (k, subset, schema), the paired schema comparisons, and the per-query outcomes."""

    rows: list[dict[str, Any]]
    pair_rows: list[dict[str, Any]]
    identical: dict[str, Any]  # "a=b@k": queries whose two schemas built the same context
    per_query: list[dict[str, Any]]
    has_rel: np.ndarray  # per selected query: its pool holds a relevant passage


def _oracle_statistics(selected: Sequence[QueryRecord], graded, by_qid, cfg: OracleConfig) -> _OracleStatistics:
    n, S = len(selected), len(cfg.schemas)
    has_rel = np.array([any(p.is_relevant(cfg.relevance_threshold) for p in r.passages) for r in selected])
    subsets = {"all": np.ones(n, bool), "with relevant": has_rel}
    # later schema minus earlier one: utility - relevance, utility - erag, erag - relevance
    pairs = [(a, b) for a, b in itertools.permutations(cfg.schemas, 2) if SCHEMAS.index(a) > SCHEMAS.index(b)]
    stats = _OracleStatistics(rows=[], pair_rows=[], identical={}, has_rel=has_rel, per_query=[
        {"qid": r.qid, "split": r.split, "pool_has_relevant": bool(h)} for r, h in zip(selected, has_rel)])
    for ki, k in enumerate(cfg.ks):
        # contexts are laid out k by k, then query by query, then schema (plan_oracle_contexts)
        by_schema = {s: [graded[ki * n * S + qi * S + si] for qi in range(n)] for si, s in enumerate(cfg.schemas)}
        for qi, s in itertools.product(range(n), cfg.schemas):
            run = by_schema[s][qi]
            stats.per_query[qi].update({f"{s}@{k}_outcome": run.outcome, f"{s}@{k}_pids": " ".join(run.pids)})
        for a, b in itertools.combinations(cfg.schemas, 2):
            stats.identical[f"{a}={b}@{k}"] = sum(x.pids == y.pids for x, y in zip(by_schema[a], by_schema[b]))
        _add_rates(stats, k, by_schema, by_qid, subsets, pairs, cfg)
    return stats


def _add_rates(stats: _OracleStatistics, k: int, by_schema, by_qid, subsets, pairs, cfg: OracleConfig) -> None:
    """Append context size ``k``'s rates per subset and schema, and its paired comparisons (bootstrap differences,
    McNemar, the wrong-rate ratio), to ``stats``."""
    B, seed = cfg.n_bootstrap, cfg.seed
    ind = {s: common.outcome_indicators(v) for s, v in by_schema.items()}
    n_rel_in_ctx = {s: np.array([sum(by_qid[run.qid].passage(pid).is_relevant(cfg.relevance_threshold)
                                     for pid in run.pids) for run in v]) for s, v in by_schema.items()}
    for label, sel in subsets.items():
        if not sel.any():
            continue
        for s in cfg.schemas:
            stats.rows.append({"k": k, "subset": label, "schema": s, "queries": int(sel.sum()),
                               **common.outcome_rates(ind[s], B, seed, sel),
                               "mean_relevant_in_context": float(n_rel_in_ctx[s][sel].mean()),
                               "context_has_relevant": float((n_rel_in_ctx[s][sel] > 0).mean())})
        for a, b in pairs:
            row = {"k": k, "subset": label, "comparison": f"{a} - {b}", "queries": int(sel.sum())}
            for o in ("correct", "wrong"):
                d = paired_difference(ind[a][o][sel], ind[b][o][sel], B, seed)
                mc = mcnemar_exact(ind[a][o][sel], ind[b][o][sel])
                row.update({f"d_{o}": d["diff"], f"d_{o}_lo": d["lo"], f"d_{o}_hi": d["hi"],
                            f"p_mcnemar_{o}": mc["p"], f"only_a_{o}": mc["only_a"], f"only_b_{o}": mc["only_b"]})
            ratio = paired_ratio_ci(ind[a]["wrong"][sel], ind[b]["wrong"][sel], B, seed)
            stats.pair_rows.append({**row, **dict(zip(("wrong_ratio", "wrong_ratio_lo", "wrong_ratio_hi"), ratio))})


def _write_tables(paths: dict[str, Any], out, stats: _OracleStatistics, name: str) -> tuple[str, str]:
    """The rates table, the paired-comparisons table (markdown + CSV) and the per-query CSV, into ``paths``;
    returns both tables' markdown."""
    rows, pair_rows = stats.rows, stats.pair_rows
    md_cols = [Column("k", "k"), Column("subset", "Queries"), Column("schema", "Schema"), Column("queries", "n"),
               Column("c", "Correct % [95% CI]"), Column("a", "Abstained % [95% CI]"), Column("w", "Wrong % [95% CI]"),
               Column("context_has_relevant", "Ctx with relevant %", fmt_pct)]
    rendered = [{**r, "c": common.pct_ci(r, "correct"), "a": common.pct_ci(r, "abstained"),
                 "w": common.pct_ci(r, "wrong")} for r in rows]
    csv_cols = ["k", "subset", "schema", "queries", *common.OUTCOME_COLUMNS, "mean_relevant_in_context",
                "context_has_relevant"]
    table_md = common.add_table(paths, "table", out / "oracle", rendered, md_cols, csv_columns=csv_cols,
                                title=f"Oracle contexts by annotation schema (LLM {name})",
                                note="CIs: bootstrap percentile over queries.")
    pair_md_cols = [Column("k", "k"), Column("subset", "Queries"), Column("comparison", "A - B"), Column("queries", "n"),
                    Column("dc", "d correct (pts) [95% CI]"), Column("p_mcnemar_correct", "McNemar p (correct)", fmt_p),
                    Column("dw", "d wrong (pts) [95% CI]"), Column("p_mcnemar_wrong", "McNemar p (wrong)", fmt_p),
                    Column("wr", "wrong A / wrong B [95% CI]")]
    pair_rendered = [{**r, "dc": common.pct_ci(r, "d_correct"), "dw": common.pct_ci(r, "d_wrong"),
                      "wr": _wrong_ratio(r)} for r in pair_rows]
    pairs_md = common.add_table(paths, "pairs", out / "oracle_pairs", pair_rendered, pair_md_cols,
                                title="Paired comparisons between schemas",
                                note="McNemar: exact two-sided binomial test on the discordant queries "
                                     "(per-query correctness, then per-query wrongness); d: paired mean "
                                     "difference with a bootstrap CI.",
                                csv_columns=list(pair_rows[0]) if pair_rows else None)
    paths["per_query_csv"] = write_csv(out / "oracle_per_query.csv", stats.per_query)
    return table_md, pairs_md


def _plot_rates(out, main, cfg: OracleConfig, name: str, info, *, n_queries: int):
    """The bar chart of every schema's outcome rates at every k, all queries (``oracle.png``)."""
    labels, vals, lo, hi = common.outcome_bars(main, lambda r: f"{r['schema']}@{r['k']}")
    title = common.plot_title("Oracle contexts by schema", dataset=cfg.dataset, n_queries=n_queries, llm=name,
                              by_split=info["by_split"])
    return plot_bars(labels, vals, out / "oracle.png", lo=lo, hi=hi, ylabel="% of queries (95% CI)",
                     highlight=[lab for lab in labels if lab.startswith("wrong")], digits=1, title=title)


def _wrong_ratio(row) -> str:
    return fmt_ci(row["wrong_ratio"], row["wrong_ratio_lo"], row["wrong_ratio_hi"], 2)


def _markdown(cfg: OracleConfig, name, meta, info, table_md, pairs_md, pair_rows) -> str:
    lines = [f"# Oracle contexts by annotation schema (UDCG paper, Table 2): LLM `{name}`", "",
             f"- Queries: {common.describe_selection(info, cfg.max_queries)}; "
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
            points = {o: f"{fmt_pct(r[f'd_{o}'])} points [{fmt_pct(r[f'd_{o}_lo'])}, {fmt_pct(r[f'd_{o}_hi'])}]"
                      for o in ("wrong", "correct")}
            lines.append(f"- k={r['k']}: utility vs relevance contexts: wrong {points['wrong']} (ratio "
                         f"{_wrong_ratio(r)}, McNemar p = {fmt_p(r['p_mcnemar_wrong'])}); correct "
                         f"{points['correct']} (McNemar p = {fmt_p(r['p_mcnemar_correct'])}).")
    lines += ["", f"Statistics: bootstrap percentile 95% CIs over queries ({cfg.n_bootstrap} resamples, seed "
              f"{cfg.seed}); paired tests: McNemar's exact test on per-query correctness and on per-query wrongness."]
    return "\n".join(lines) + "\n"
