"""The configured LLM for a job: loaded on first use, always behind the persistent annotation cache."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from udcg_ltr.annotate.annotator import annotate_records, missing_annotations, with_cache
from udcg_ltr.annotate.cache import AnnotationCache, default_cache_root
from udcg_ltr.data.schema import QueryRecord

log = logging.getLogger("udcg_ltr.llm")


def has_annotations(records: list[QueryRecord], llm: str | None) -> bool:
    """True when every passage carries ``p_no_response`` of ``llm``."""
    return llm is not None and not missing_annotations(records, llm, ["p_no_response"])


class LLMAccess:
    """``llm_cfg`` (a Hydra ``llm`` node with ``_target_``) instantiated lazily, wrapped in a CachedScorer.

    Jobs whose data already carries the annotations and that need no end-to-end answers never load
    the model.
    """

    def __init__(self, llm_cfg: Any, cache_dir: str | Path | None = None):
        self.llm_cfg = llm_cfg
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.name: str | None = llm_cfg.get("name") if llm_cfg is not None else None
        self._scorer = None

    @property
    def scorer(self):
        if self._scorer is None:
            if self.llm_cfg is None:
                raise ValueError("this job needs an LLM but none is configured (llm=...)")
            from hydra.utils import instantiate

            t0 = time.perf_counter()
            scorer = instantiate(self.llm_cfg, _convert_="all")
            self.cache_dir = self.cache_dir or default_cache_root(scorer.name)
            self._scorer = with_cache(scorer, AnnotationCache(self.cache_dir))
            log.info("LLM %s ready in %.1fs (annotation cache %s)", scorer.name, time.perf_counter() - t0,
                     self.cache_dir)
        return self._scorer

    def ensure_annotations(self, records: list[QueryRecord], *, answers: bool = True) -> dict[str, Any]:
        """Annotate every passage (P(NO-RESPONSE), and the single-passage answer when ``answers``) unless present."""
        if not missing_annotations(records, self.name, ["p_no_response"] + (["answer_alone"] if answers else [])):
            log.info("annotations of %s already present: no LLM work", self.name)
            return {}
        fields = ["p_no_response"] + (["answer_alone", "erag_em"] if answers else [])
        stats = annotate_records(records, self.scorer, fields=fields, progress=True)
        summary = stats.to_dict() if hasattr(stats, "to_dict") else {}
        log.info("annotation: %s", summary)
        return summary
