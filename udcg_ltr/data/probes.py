"""Label-free *reader probes*: what the LLM itself said about each candidate passage, alone.

A dynamic-k selector can only use what is known at inference: every utility annotation stores
``p_no_response`` and ``answer_alone`` (the greedy single-passage answer), which this module turns into
features (``PaddedSlates.probes``, as :mod:`udcg_ltr.data.lexical`). Per passage ``i`` of a pool of ``n``:

=============================  ==========================================================================
``p_no_response``              ``P_LLM(NO-RESPONSE | q, p_i)``; ``1 - p_no_response`` is ``|u_i|`` (Eq. 2)
``probe_abstains``             1 when ``answer_alone`` is an abstention (:func:`~udcg_ltr.text.is_abstention`)
``probe_answer_in_passage``    1 when the normalised answer occurs as whole tokens in the passage text
                               (the reader quoted the passage rather than its memory)
``probe_agreement``            share of the *other* ``n - 1`` passages whose answer is the same (normalised,
                               non-abstained): self-consistency across the pool
=============================  ==========================================================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from udcg_ltr.text import answer_tokens, has_answer_tokens, is_abstention, normalize_answer

#: Probe arrays :func:`answer_probes` derives from ``answer_alone`` (``p_no_response`` is a slates field).
ANSWER_PROBES = ("probe_abstains", "probe_answer_in_passage", "probe_agreement")
#: Every probe usable as a selector ``extra_features`` name.
READER_PROBES = ("p_no_response", *ANSWER_PROBES)


def answer_probes(texts: Sequence[str], answers: Sequence[str]) -> dict[str, list[float]]:
    """The ``answer_alone`` probes (module table) of one pool: passage ``texts`` and their single-passage ``answers``."""
    if len(texts) != len(answers):
        raise ValueError(f"{len(texts)} passages but {len(answers)} answers")
    abstains = [is_abstention(a) for a in answers]
    keys = [None if ab else normalize_answer(a) for a, ab in zip(answers, abstains)]
    counts = Counter(k for k in keys if k)
    others = max(len(texts) - 1, 1)
    quoted = [bool(key) and has_answer_tokens(answer_tokens(text), [key.split()]) for text, key in zip(texts, keys)]
    return {"probe_abstains": [float(ab) for ab in abstains], "probe_answer_in_passage": [float(q) for q in quoted],
            "probe_agreement": [(counts[key] - 1) / others if key else 0.0 for key in keys]}
