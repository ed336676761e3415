"""Data model, readers and the embedded demo world."""

from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.schema import Passage, QueryRecord

__all__ = ["Passage", "QueryRecord", "pad_records"]
