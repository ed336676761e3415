"""Dynamic-k selectors: give the LLM as many of the reranker's top passages as help, no more. Each returns
a kept count ``k_q in 0..n_q`` per query (the top-``k_q`` prefix), judged by the UDCG (Eq. 4) of that set."""

from udcg_ltr.select.base import prefix_udcg, rank_slates
from udcg_ltr.select.baselines import FixedK, OracleK, RelativeThreshold
from udcg_ltr.select.calibrated import CalibratedUtilitySelector
from udcg_ltr.select.evaluation import EndToEnd, dynamic_k_report, evaluate_selectors, format_rows_markdown
from udcg_ltr.select.io import load_selector, save_selector
from udcg_ltr.select.training import fit_best_selector, fit_selector, group_kfold

__all__ = [
    "CalibratedUtilitySelector", "EndToEnd", "FixedK", "OracleK", "RelativeThreshold", "dynamic_k_report",
    "evaluate_selectors", "fit_best_selector", "fit_selector", "format_rows_markdown", "group_kfold",
    "load_selector", "prefix_udcg", "rank_slates", "save_selector"]
