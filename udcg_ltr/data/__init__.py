"""Data model, readers and the embedded demo world."""

from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.data.scores import PassageScores, as_passage_scores

__all__ = ["Passage", "PassageScores", "QueryRecord", "as_passage_scores", "pad_records"]
