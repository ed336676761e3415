"""Readers for every source layout; each returns validated :class:`~udcg_ltr.data.schema.QueryRecord` s and
raises :class:`~udcg_ltr.data.schema.DataError` naming the file, the line and the field on malformed input.
"""

from udcg_ltr.data.readers.annotated import read_annotated_squad, read_annotation_meta
from udcg_ltr.data.readers.beir import read_beir
from udcg_ltr.data.readers.dpr import BM25Index, build_nq_pool, read_dpr, read_nq_pool
from udcg_ltr.data.readers.hotpotqa import read_hotpotqa
from udcg_ltr.data.readers.squad import assign_splits, chunk_paragraph, read_squad, split_sentences
from udcg_ltr.data.readers.trec import (
    read_dl19,
    read_trec_qrels,
    read_trec_run,
    records_from_run,
    records_to_qrels,
    records_to_run,
    write_trec_qrels,
    write_trec_run,
)
from udcg_ltr.data.readers.udcg_reference import read_udcg_reference

__all__ = [
    "BM25Index", "assign_splits", "build_nq_pool", "chunk_paragraph", "read_annotated_squad",
    "read_annotation_meta", "read_beir", "read_dl19", "read_dpr", "read_hotpotqa", "read_nq_pool",
    "read_squad", "read_trec_qrels", "read_trec_run", "read_udcg_reference", "records_from_run",
    "records_to_qrels", "records_to_run", "split_sentences", "write_trec_qrels", "write_trec_run",
]
