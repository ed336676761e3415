"""The grid: data sets x LLMs, each cell measured from its committed annotations (no LLM call).

For one cell (a data set read by one LLM), three results of the UDCG paper:

- **Correlation** (Table 3): per-query Spearman and Kendall tau-b between each metric's order of the end-to-end
  contexts and their graded outcomes (correct > abstained > wrong), means with bootstrap 95% CIs over queries, and
  the paired difference of every metric to nDCG. UDCG_theta (Eq. 3) and gamma* are fitted on the LLM's own
  training contexts: on the ``train`` split where the cell has one, else cross-fitted over query folds (each fold
  scored by weights fitted on the others), so no context is scored by weights fitted on it.
- **Oracle selection** (after Table 2): among each question's annotated contexts, the ones an oracle would pick
  by summed relevance, by summed eRAG labels and by summed utility (Eq. 2); their correct / abstained / wrong
  rates (ties share the choice: the mean outcome over the tied contexts). The paper builds new top-5 contexts and
  asks the LLM; choosing among contexts the LLM has answered needs no LLM call and asks the same question of the
  three criteria.
- **Distractor effect** (after Table 1): in contexts that hold a relevant passage, the outcome rates by the number
  of hard distractors (irrelevant passages the LLM answers from alone: distracting effect ``1 - P(NO-RESPONSE)``
  at least :data:`HARD_DISTRACTOR`).

Across the two LLMs of a data set, :func:`utility_agreement` compares their per-passage utilities.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.end_to_end import grade_runs
from udcg_ltr.data.cells import cell_qids, read_cell
from udcg_ltr.data.contexts import OUTCOMES, ContextRun
from udcg_ltr.data.readers.annotated import read_annotated_contexts, read_annotated_squad
from udcg_ltr.data.readers.hotpotqa import read_hotpotqa
from udcg_ltr.data.schema import QueryRecord, records_by_qid
from udcg_ltr.fit.gamma import calibrate_gamma
from udcg_ltr.fit.pairs import ContextTable, build_context_table
from udcg_ltr.fit.theta import fit_udcg_theta
from udcg_ltr.metrics.erag import erag_labels
from udcg_ltr.stats.bootstrap import paired_bootstrap_test, rate_ci
from udcg_ltr.stats.correlation import per_query_correlations
from udcg_ltr.stats.groups import group_index
from udcg_ltr.studies.correlation import compute_context_metrics

#: The rows of the correlation table, in the paper's order.
GRID_METRICS: tuple[str, ...] = ("udcg", "udcg_theta", "udcg_gamma_star", "ndcg", "mrr", "map", "precision", "hits",
                                 "erag", "ra_nwg")
#: The paired differences are taken against this row.
REFERENCE = "ndcg"
#: An irrelevant passage is a hard distractor when the LLM answers from it alone this often (DE >= 0.5).
HARD_DISTRACTOR = 0.5
CROSS_FIT_FOLDS = 5
GRID_DATASETS: tuple[str, ...] = ("hotpotqa", "squad")
ORACLE_CRITERIA: tuple[str, ...] = ("relevance", "erag", "utility")


@dataclass
class Cell:
    """A cell's graded data: records (annotated under ``llm``) and end-to-end runs."""

    dataset: str
    llm: str
    records: list[QueryRecord]
    runs: list[ContextRun]
    provenance: dict[str, Any]


def _shared_squad_runs(data_dir: Path, records: Sequence[QueryRecord], n_contexts: int) -> list[ContextRun]:
    wanted = {r.qid for r in records}
    runs = read_annotated_contexts(data_dir / "annotated_full" / "squad_contexts.jsonl.gz")
    return [r for r in runs if r.qid in wanted and r.context_id < n_contexts]


@dataclass(frozen=True)
class CellSpec:
    """Where a cell's annotations are (the ``grid`` node of ``conf/grid.yaml``, instantiated by Hydra)."""

    dataset: str
    llm: str
    data_dir: str
    annotations_dir: str
    n_contexts: int = 6
    questions_from: str | None = None  # squad x the demo LLM: the questions of this LLM's cell

    def __post_init__(self):
        if self.dataset not in GRID_DATASETS:
            raise ValueError(f"grid.dataset={self.dataset!r}: expected one of {GRID_DATASETS}")
        if self.n_contexts < 1:
            raise ValueError(f"grid.n_contexts={self.n_contexts}: expected >= 1")

    @property
    def name(self) -> str:
        return f"{self.dataset}__{self.llm}"

    def load(self) -> Cell:
        return load_cell(self.dataset, self.llm, data_dir=self.data_dir, annotations_dir=self.annotations_dir,
                         n_contexts=self.n_contexts, questions_from=self.questions_from)


def load_cell(dataset: str, llm: str, *, data_dir: str | Path, annotations_dir: str | Path, n_contexts: int = 6,
              questions_from: str | None = None) -> Cell:
    """A cell read from ``annotations_dir/<dataset>/<llm>`` joined to the shared texts; SQuAD read by the demo LLM
    is ``annotated_full`` itself, restricted to the questions of the cell ``questions_from`` (an LLM name)."""
    data_dir, annotations_dir = Path(data_dir), Path(annotations_dir)
    if dataset not in GRID_DATASETS:
        raise ValueError(f"unknown grid data set {dataset!r} (known: {GRID_DATASETS})")
    if dataset == "hotpotqa":
        base = read_hotpotqa(data_dir / "hotpotqa" / "dev_300.jsonl.gz")
    else:
        base = read_annotated_squad(data_dir / "annotated_full" / "squad_top10.jsonl.gz")
    folder = annotations_dir / dataset / llm
    if folder.is_dir():
        records, runs, provenance = read_cell(folder, base)
    elif dataset == "squad" and questions_from is not None:
        chosen = set(cell_qids(annotations_dir / dataset / questions_from))
        records = [r for r in base if r.qid in chosen]
        runs = _shared_squad_runs(data_dir, records, n_contexts)
        provenance = {"llm": llm, "source": "annotated_full (shared data)", "questions_from": questions_from}
    else:
        raise FileNotFoundError(f"no annotations for cell {dataset} x {llm} in {folder}")
    return Cell(dataset, llm, records, grade_runs(records, runs), provenance)


# --- correlation -------------------------------------------------------------------------------------------------

def fit_folds(table: ContextTable, records: Mapping[str, QueryRecord], seed: int) -> np.ndarray:
    """Fold of each context row: 0 = the fit (train) split, 1 = scored, when the cell has a train split; else
    ``CROSS_FIT_FOLDS`` folds by a seeded hash of the query id (cross-fitting)."""
    splits = [records[q].split for q in table.qids.tolist()]
    if "train" in splits and any(s != "train" for s in splits):
        return np.array([0 if s == "train" else 1 for s in splits])
    return np.array([zlib.crc32(f"{seed}:{q}".encode()) % CROSS_FIT_FOLDS + 1 for q in table.qids.tolist()])


def _fold_metrics(table: ContextTable, records, train: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Every grid metric on ``rows``, UDCG_theta and gamma* fitted on the ``train`` rows only."""
    fit = table.subset(np.flatnonzero(train))
    theta = {"full": fit_udcg_theta(fit, variant="full")}
    gamma = calibrate_gamma(fit.utility, fit.mask, fit.outcome, fit.qids).gamma
    return compute_context_metrics(table.subset(rows), records, gamma_star=gamma, theta=theta,
                                   metrics=list(GRID_METRICS))


def scored_metrics(table: ContextTable, records: Mapping[str, QueryRecord], folds: np.ndarray
                   ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(rows scored, metric -> values)``: the non-train rows, each scored by weights fitted without its fold."""
    scored = sorted(set(folds.tolist()) - {0})
    pieces, order = [], []
    for fold in scored:
        rows = np.flatnonzero(folds == fold)
        train = (folds == 0) if 0 in folds else (folds != fold)
        pieces.append(_fold_metrics(table, records, train, rows))
        order.append(rows)
    rows = np.concatenate(order)
    return rows, {m: np.concatenate([p[m] for p in pieces]) for m in GRID_METRICS}


def correlation_rows(cell: Cell, *, n_bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per metric: Spearman / Kendall means with CIs, and the paired difference to nDCG."""
    by_qid = records_by_qid(cell.records)
    table = build_context_table(by_qid, cell.runs, cell.llm, k=5)
    rows, values = scored_metrics(table, by_qid, fit_folds(table, by_qid, seed))
    qids = table.qids[rows]
    groups = group_index(qids)
    corr = {m: per_query_correlations(qids, v, table.outcome[rows], groups_idx=groups) for m, v in values.items()}
    out = []
    for metric, qc in corr.items():
        row: dict[str, Any] = {"metric": metric, "queries": int(len(groups[0]))}
        for method in ("spearman", "kendall"):
            v = getattr(qc, method)
            row[method], row[f"{method}_lo"], row[f"{method}_hi"] = rate_ci(v, n_bootstrap, seed)
            row[f"{method}_n"] = int((~np.isnan(v)).sum())
            test = paired_bootstrap_test(v, getattr(corr[REFERENCE], method), n_bootstrap, seed)
            row[f"{method}_diff_vs_{REFERENCE}"] = test.mean_diff
            row[f"{method}_diff_lo"], row[f"{method}_diff_hi"] = test.lo, test.hi
            row[f"{method}_p_vs_{REFERENCE}"] = test.p_value
        out.append(row)
    return out


# --- oracle selection --------------------------------------------------------------------------------------------

def _criterion_scores(cell: Cell, table: ContextTable, by_qid) -> dict[str, np.ndarray]:
    """Per context: summed relevance, summed eRAG labels (answer alone contains a gold answer), summed utility."""
    alone = [[by_qid[q].passage(pid).annotations[cell.llm].get("answer_alone") if ok else None
              for pid, ok in zip(pids, mask)] for q, pids, mask in zip(table.qids, table.pids, table.mask)]
    labels = erag_labels(alone, [by_qid[q].answers for q in table.qids.tolist()], "contains", width=table.k)
    return {"relevance": (table.relevant & table.mask).sum(axis=1).astype(float),
            "erag": np.where(table.mask, np.nan_to_num(labels), 0.0).sum(axis=1),
            "utility": np.where(table.mask, table.utility, 0.0).sum(axis=1)}


def oracle_rows(cell: Cell, *, n_bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Outcome rates of the contexts each criterion picks per question (ties: the mean over the tied contexts)."""
    by_qid = records_by_qid(cell.records)
    table = build_context_table(by_qid, cell.runs, cell.llm, k=5)
    groups, idx = group_index(table.qids)
    out = []
    for criterion, score in _criterion_scores(cell, table, by_qid).items():
        rates = {o: [] for o in OUTCOMES}
        for members in idx:
            members = members[members >= 0]
            best = members[score[members] >= score[members].max() - 1e-12]
            for o, s in zip(OUTCOMES, (2.0, 1.0, 0.0)):
                rates[o].append(float(np.mean(table.outcome[best] == s)))
        row: dict[str, Any] = {"criterion": criterion, "queries": len(groups)}
        for o in OUTCOMES:
            row[o], row[f"{o}_lo"], row[f"{o}_hi"] = rate_ci(np.array(rates[o]), n_bootstrap, seed)
        out.append(row)
    return out


# --- distractor effect -------------------------------------------------------------------------------------------

def hard_distractor_counts(cell: Cell, table: ContextTable) -> np.ndarray:
    """Irrelevant passages of each context with distracting effect (-utility) >= :data:`HARD_DISTRACTOR`."""
    return ((~table.relevant) & table.mask & (-table.utility >= HARD_DISTRACTOR)).sum(axis=1)


def distractor_rows(cell: Cell, *, n_bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Outcome rates of the contexts holding a relevant passage, by their number of hard distractors (0, 1, 2, 3+);
    a group with fewer than 20 contexts is left out (the pools do not allow it)."""
    by_qid = records_by_qid(cell.records)
    table = build_context_table(by_qid, cell.runs, cell.llm, k=5)
    positive = (table.relevant & table.mask).any(axis=1)
    hard = np.minimum(hard_distractor_counts(cell, table), 3)
    out = []
    for n_hard in range(4):
        rows = np.flatnonzero(positive & (hard == n_hard))
        if len(rows) < 20:
            continue
        row: dict[str, Any] = {"hard_distractors": f"{n_hard}+" if n_hard == 3 else str(n_hard),
                               "contexts": int(len(rows))}
        for o, s in zip(OUTCOMES, (2.0, 1.0, 0.0)):
            row[o], row[f"{o}_lo"], row[f"{o}_hi"] = rate_ci(table.outcome[rows] == s, n_bootstrap, seed)
        out.append(row)
    return out


# --- across LLMs -------------------------------------------------------------------------------------------------

def _shared_passages(a: Cell, b: Cell) -> list[tuple[str, Any, Any]]:
    """``(question id, passage of a, passage of b)`` for every passage both cells annotated."""
    b_by_qid = records_by_qid(b.records)
    triples = []
    for record in a.records:
        if (other := b_by_qid.get(record.qid)) is None:
            continue
        theirs = {p.pid: p for p in other.passages}
        triples += [(record.qid, p, theirs[p.pid]) for p in record.passages if p.pid in theirs]
    return triples


def utility_agreement(a: Cell, b: Cell, *, n_bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """How far two LLMs' utilities of the same passages agree: Spearman over passages (CI by resampling
    questions), the share whose sign changes (none can: the sign is the relevance label, Eq. 2) and the share of
    irrelevant passages whose distractor class (hard: DE >= 0.5) changes."""
    triples = _shared_passages(a, b)
    qids = np.array([q for q, _, _ in triples])
    ua = np.array([p.utility(a.llm) for _, p, _ in triples])
    ub = np.array([p.utility(b.llm) for _, _, p in triples])
    irrelevant = np.array([not p.is_relevant() for _, p, _ in triples])
    hard_a, hard_b = -ua[irrelevant] >= HARD_DISTRACTOR, -ub[irrelevant] >= HARD_DISTRACTOR
    rho, lo, hi = _grouped_spearman(ua, ub, qids, n_bootstrap, seed)
    return {"llm_a": a.llm, "llm_b": b.llm, "passages": int(len(triples)), "spearman": rho, "spearman_lo": lo,
            "spearman_hi": hi, "sign_changed": float(np.mean(np.sign(ua) != np.sign(ub))),
            "irrelevant": int(irrelevant.sum()), "distractor_class_changed": float(np.mean(hard_a != hard_b)),
            "hard_a": float(hard_a.mean()), "hard_b": float(hard_b.mean())}


def _grouped_spearman(a: np.ndarray, b: np.ndarray, groups: np.ndarray, n_bootstrap: int, seed: int
                      ) -> tuple[float, float, float]:
    """Spearman correlation over passages and its percentile 95% CI, resampling whole questions."""
    from scipy.stats import rankdata

    def rho(rows: np.ndarray) -> float:
        return float(np.corrcoef(rankdata(a[rows]), rankdata(b[rows]))[0, 1])

    names, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(len(names))]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n_bootstrap):
        rows = np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])
        stats.append(rho(rows))
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return rho(np.arange(len(a))), float(lo), float(hi)
