"""Data model, readers and the embedded demo world."""

from udcg_ltr.data.jsonl import read_records, write_records
from udcg_ltr.data.padded import PaddedSlates, pad_records
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, validate_record

__all__ = ["DataError", "PaddedSlates", "Passage", "QueryRecord", "pad_records", "read_records",
           "validate_record", "write_records"]
