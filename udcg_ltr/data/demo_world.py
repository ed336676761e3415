"""The embedded demo world: a seeded, made-up knowledge base with questions and candidate pools.

Why synthetic: the default job annotates passages with a real (small) LLM, and the UDCG signal is
only meaningful when the LLM must rely on the passages. Every name here is built from syllables
(``Varno Keltis``, ``Kelmora``, ``Dunmere Works``, the ``Tolma River``), so no LLM can know the
facts from pre-training.

The world
    Entities of four types, each with attributes:

    ========  ==================================================
    person    birth year, birthplace (a city), profession
    city      population, founding year, province
    company   founder (a person), founding year, headquarters (a city), product
    river     length, the lake it flows into, the mountains it rises in
    ========  ==================================================

    Entities come in *families* of similarly named entities of one type (siblings sharing a
    surname; towns or rivers sharing a stem; companies sharing a first word) whose attribute
    values all differ: the source of hard distractors.

Passages
    Each entity gets a few short passages (20-60 words, titled with the entity's name), each
    stating one or two of its facts in a natural sentence drawn from varied templates, padded
    with fact-free filler sentences. Every fact appears in at least one passage, some in two.

Questions and pools
    One question per sampled (entity, attribute) pair, e.g. "In which year was Varno Keltis
    born?", with its gold answers. The pool (``pool_size`` passages, default 12) holds

    * the 1-2 passages that state the fact (``relevance=1``, ``extra["kind"]="answer"``);
    * hard distractors, ``is_distractor=True``: the entity's other passages (``"same_entity"``),
      passages stating the same attribute of a family member with a different value
      (``"similar_entity"``), and other passages that mention the entity (``"mentions_entity"``);
    * unrelated passages from the same split (``"unrelated"``, ``is_distractor=False``).

    No passage but the answer-bearing ones contains a gold answer (checked with
    :func:`udcg_ltr.text.has_answer`; colliding passages are left out), so a question is
    answerable from exactly its answer-bearing passages. Each passage gets a deterministic
    pseudo-retrieval ``score`` (lexical overlap with the question plus seeded Gaussian noise, so
    that relevant passages are not always first and distractors, which share the entity's name,
    often score high) and the ``rank`` that score implies; passages are stored in rank order.

Splits (``train``/``val``/``test``) are assigned per entity family, so no entity and none of its
look-alikes spans two splits. Same arguments, same records: :func:`write_demo_world` writes the
same bytes for the same seed.
"""

from __future__ import annotations

import argparse
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.readers.dpr import tokenize
from udcg_ltr.data.readers.squad import assign_splits
from udcg_ltr.data.schema import Passage, QueryRecord, validate_record
from udcg_ltr.text import has_answer

ENTITY_TYPES = ("person", "city", "company", "river")

#: Attributes per entity type, in a fixed order.
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "person": ("birth_year", "birthplace", "profession"),
    "city": ("population", "founded", "province"),
    "company": ("founder", "founded", "headquarters", "product"),
    "river": ("length", "mouth", "source"),
}

DEFAULT_SPLIT_RATIOS = {"train": 0.6, "val": 0.2, "test": 0.2}

# ---- names ---------------------------------------------------------------------------------

_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "th",
           "st", "")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "k", "nd", "rn", "st")
#: Hard-to-say joins are rejected: three consonants or two vowels in a row.
_UNPRONOUNCEABLE = re.compile(r"[^aeiouy\s&.]{3,}|[aeiouy]{2,}")
_SURNAME_ENDS = ("is", "en", "ar", "ov", "ell", "ane", "ith", "ur", "ander", "ow", "ek")
_CITY_ENDS = ("mora", "dal", "vik", "holm", "ford", "stad", "ene", "ith", "wick", "ora")
_RIVER_ENDS = ("a", "en", "is", "ura", "ette", "on")
_COMPANY_ENDS = ("Works", "Brothers", "& Co.", "Holdings", "Company", "Group", "Partners")

_PROFESSIONS = ("botanist", "cartographer", "violinist", "engineer", "poet", "astronomer",
                "glassblower", "architect", "geologist", "painter", "clockmaker", "surgeon", "sculptor",
                "shipwright", "mathematician", "beekeeper")
_PRODUCTS = ("ceramic tiles", "bicycles", "woollen blankets", "pocket watches", "paper lanterns",
             "glass bottles", "pipe organs", "copper kettles", "fishing nets", "leather saddles",
             "typewriters", "hot-air balloons", "wooden toys", "oil lamps")

# ---- templates -----------------------------------------------------------------------------
# {n}: the entity's display name, {v}: the value; {a} the indefinite article for {v}.

_FACTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("person", "birth_year"): ("{n} was born in {v}.", "{n} was born in the year {v}.",
                               "Records show that {n} was born in {v}."),
    ("person", "birthplace"): ("{n} was born in the city of {v}.", "{n} was born and raised in {v}.",
                               "The city of {v} is the birthplace of {n}."),
    ("person", "profession"): ("{n} worked as {a} {v} for most of a long career.", "By profession, {n} was {a} {v}.",
                               "{n} became a well-known {v}."),
    ("city", "population"): ("{n} has a population of {v}.", "The latest census counted {v} inhabitants in {n}.",
                             "{n} is home to {v} people."),
    ("city", "founded"): ("{n} was founded in {v}.", "The town of {n} dates its founding to {v}.",
                          "Settlers founded {n} in {v}."),
    ("city", "province"): ("{n} lies in the province of {v}.", "{n} is a town in {v} Province.",
                           "{n} belongs to the province of {v}."),
    ("company", "founder"): ("{n} was founded by {v}.", "The founder of {n} was {v}.", "{v} established {n}."),
    ("company", "founded"): ("{n} was established in {v}.", "{n} opened its first workshop in {v}.",
                             "{n} has been in business since {v}."),
    ("company", "headquarters"): ("{n} has its headquarters in {v}.", "The head office of {n} is in {v}.",
                                  "{n} is headquartered in the city of {v}."),
    ("company", "product"): ("{n} manufactures {v}.", "{n} is best known for its {v}.",
                             "The main product of {n} is {v}."),
    ("river", "length"): ("The {n} is {v} kilometres long.", "The {n} runs for {v} kilometres.",
                          "With a length of {v} kilometres, the {n} crosses three valleys."),
    ("river", "mouth"): ("The {n} flows into Lake {v}.", "The {n} empties into Lake {v}.",
                         "Lake {v} is where the {n} ends."),
    ("river", "source"): ("The {n} rises in the {v} Mountains.", "The source of the {n} lies in the {v} Mountains.",
                          "The {n} begins high in the {v} Mountains."),
}

_QUESTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("person", "birth_year"): ("In which year was {n} born?", "What year was {n} born in?"),
    ("person", "birthplace"): ("In which city was {n} born?", "Where was {n} born?"),
    ("person", "profession"): ("What was the profession of {n}?", "What did {n} work as?"),
    ("city", "population"): ("What is the population of {n}?", "How many people live in {n}?"),
    ("city", "founded"): ("In which year was {n} founded?", "When was the town of {n} founded?"),
    ("city", "province"): ("In which province is {n} located?", "Which province is {n} in?"),
    ("company", "founder"): ("Who founded {n}?", "Who was the founder of {n}?"),
    ("company", "founded"): ("In which year was {n} established?", "When was {n} founded?"),
    ("company", "headquarters"): ("In which city is {n} headquartered?", "Where is the head office of {n}?"),
    ("company", "product"): ("What does {n} manufacture?", "What product is {n} known for?"),
    ("river", "length"): ("How long is the {n}?", "What is the length of the {n}?"),
    ("river", "mouth"): ("Into which lake does the {n} flow?", "Which lake does the {n} empty into?"),
    ("river", "source"): ("In which mountains does the {n} rise?", "Where is the source of the {n}?"),
}

# Fact-free sentences: no digits and no other entity's name, so they cannot carry an answer.
_FILLERS: dict[str, tuple[str, ...]] = {
    "person": ("Colleagues described {n} as patient and exacting.", "{n} kept detailed notebooks about every project.",
               "A portrait of {n} hangs in a provincial gallery.", "{n} corresponded with many contemporaries.",
               "Several letters written by {n} survive in private collections.",
               "Friends remembered {n} for a dry sense of humour."),
    "city": ("{n} is known for its covered market and narrow lanes.",
             "A stone bridge links the old quarter of {n} to the newer districts.",
             "Visitors to {n} often remark on its painted facades.", "The main square of {n} hosts a seasonal fair.",
             "Many houses in {n} have steep slate roofs.", "The railway station of {n} was rebuilt after a fire."),
    "company": ("{n} remained a family business for several generations.",
                "The early workshops of {n} were small and crowded.",
                "{n} later opened sales offices in neighbouring provinces.",
                "Records of {n} are kept in a municipal archive.", "{n} is admired for its careful craftsmanship.",
                "Apprentices at {n} trained for several years."),
    "river": ("The {n} is popular with anglers and rowers.", "Several old mills stand along the banks of the {n}.",
              "The valley of the {n} is known for its orchards.", "Floods on the {n} were common in spring.",
              "Herons nest in the reed beds of the {n}.", "A towpath follows the {n} for much of its course."),
}


# ---- the world -----------------------------------------------------------------------------

@dataclass
class Entity:
    eid: str
    etype: str
    name: str  # as written in text ("Tolma River", "Varno Keltis")
    family: str
    values: dict[str, Any] = field(default_factory=dict)  # attribute -> rendered value
    split: str = ""


@dataclass
class WorldPassage:
    pid: str
    eid: str
    title: str
    text: str
    attributes: tuple[str, ...]  # the attributes of ``eid`` the passage states


@dataclass
class DemoWorld:
    """Entities and passages of one seeded world (the material :func:`generate_demo_world` samples from)."""

    seed: int
    entities: list[Entity]
    passages: list[WorldPassage]

    def entity(self, eid: str) -> Entity:
        for e in self.entities:
            if e.eid == eid:
                return e
        raise KeyError(eid)


def _syllable(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)


def _stem(rng: random.Random, n_syllables: int) -> str:
    s = "".join(_syllable(rng) for _ in range(n_syllables))
    return s[:1].upper() + s[1:]


class _Names:
    """Fresh made-up names. A name, or a capitalised word of one, is never drawn twice; look-alikes
    are made on purpose from one drawn stem or surname (:meth:`family`), so answers never collide by
    accident."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def take(self, make) -> str:
        for _ in range(1000):
            name = make()
            if not self.ok(name):
                continue
            key = name.lower()
            words = [w.lower() for w in name.replace("&", " ").split() if len(w) > 3 and w[0].isupper()]
            self.used.add(key)
            self.used.update(words)
            return name
        raise RuntimeError("could not find a fresh name; use fewer entities")

    def ok(self, name: str) -> bool:
        key = name.lower()
        words = [w.lower() for w in name.replace("&", " ").split() if len(w) > 3 and w[0].isupper()]
        return not (key in self.used or len(name.replace(" ", "")) < 4 or any(w in self.used for w in words)
                    or _UNPRONOUNCEABLE.search(key.replace(" river", "")))

    def family(self, endings: Sequence[str], size: int, lo: int = 1, hi: int = 2) -> list[str]:
        """``size`` look-alike names: one fresh stem with different endings (``Kelmora``, ``Keldal``)."""
        for _ in range(1000):
            stem = self.stem(lo, hi)
            fits = [stem + end for end in endings if self.ok(stem + end)]
            if len(fits) >= size:
                chosen = self.rng.sample(fits, size)
                for name in chosen:
                    self.used.add(name.lower())
                return chosen
        raise RuntimeError("could not find fresh names; use fewer entities")

    def stem(self, lo: int = 2, hi: int = 2) -> str:
        return self.take(lambda: _stem(self.rng, self.rng.randint(lo, hi)))


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _distinct(rng: random.Random, make, taken: list) -> Any:
    for _ in range(1000):
        v = make()
        if v not in taken:
            taken.append(v)
            return v
    raise RuntimeError("could not draw distinct attribute values")


def build_world(seed: int = 0, n_entities: int = 48, *, family_size: int = 2,
                split_ratios: Mapping[str, float] | None = None) -> DemoWorld:
    """The seeded entities and passages (``n_entities`` split evenly over the four types)."""
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size}")
    if n_entities < 4 * family_size:
        raise ValueError(f"n_entities must be >= {4 * family_size} (one family per type), got {n_entities}")
    rng = random.Random(seed)
    names = _Names(rng)
    per_type = [n_entities // 4 + (1 if i < n_entities % 4 else 0) for i in range(4)]
    provinces = [names.stem(2, 2) for _ in range(6)]
    lakes = [names.stem(2, 2) for _ in range(8)]
    ranges = [names.stem(2, 2) for _ in range(6)]

    entities: list[Entity] = []
    families: dict[str, list[Entity]] = {}
    counter = 0

    def new_entity(etype: str, name: str, family: str) -> Entity:
        nonlocal counter
        e = Entity(eid=f"{etype[0]}{counter:03d}", etype=etype, name=name, family=family)
        counter += 1
        entities.append(e)
        families.setdefault(family, []).append(e)
        return e

    # names first (values of people and companies refer to cities and people)
    for t, etype in enumerate(ENTITY_TYPES):
        remaining, f = per_type[t], 0
        while remaining > 0:
            size = min(family_size, remaining)
            family = f"{etype}-{f}"
            if etype == "person":
                surname = names.take(lambda: _stem(rng, 1) + rng.choice(_SURNAME_ENDS))
                for _ in range(size):
                    new_entity(etype, f"{names.stem(2, 2)} {surname}", family)
            elif etype == "city":
                for name in names.family(_CITY_ENDS, size):
                    new_entity(etype, name, family)
            elif etype == "company":
                stem = names.stem(2, 2)
                for end in rng.sample(_COMPANY_ENDS, size):
                    new_entity(etype, f"{stem} {end}", family)
            else:
                for name in names.family(_RIVER_ENDS, size):
                    new_entity(etype, f"{name} River", family)
            remaining -= size
            f += 1

    people = [e for e in entities if e.etype == "person"]
    cities = [e for e in entities if e.etype == "city"]
    for members in families.values():
        etype = members[0].etype
        taken: dict[str, list] = {a: [] for a in ATTRIBUTES[etype]}
        for e in members:
            v = e.values
            if etype == "person":
                v["birth_year"] = _distinct(rng, lambda: rng.randint(1780, 1975), taken["birth_year"])
                v["birthplace"] = _distinct(rng, lambda: rng.choice(cities).name, taken["birthplace"])
                v["profession"] = _distinct(rng, lambda: rng.choice(_PROFESSIONS), taken["profession"])
            elif etype == "city":
                v["population"] = _distinct(rng, lambda: rng.randrange(2_000, 900_000, 100), taken["population"])
                # before any birth year: nobody is born in a town not yet founded
                v["founded"] = _distinct(rng, lambda: rng.randint(900, 1750), taken["founded"])
                v["province"] = _distinct(rng, lambda: rng.choice(provinces), taken["province"])
            elif etype == "company":
                founder = _distinct(rng, lambda: rng.choice(people), taken["founder"])
                v["founder"] = founder.name
                # founded during the founder's working life
                v["founded"] = _distinct(rng, lambda: founder.values["birth_year"] + rng.randint(20, 55),  # noqa: B023
                                         taken["founded"])
                v["headquarters"] = _distinct(rng, lambda: rng.choice(cities).name, taken["headquarters"])
                v["product"] = _distinct(rng, lambda: rng.choice(_PRODUCTS), taken["product"])
            else:
                v["length"] = _distinct(rng, lambda: rng.randint(40, 980), taken["length"])
                v["mouth"] = _distinct(rng, lambda: rng.choice(lakes), taken["mouth"])
                v["source"] = _distinct(rng, lambda: rng.choice(ranges), taken["source"])

    # splits per family, stratified by type
    ratios = dict(DEFAULT_SPLIT_RATIOS if split_ratios is None else split_ratios)
    for etype in ENTITY_TYPES:
        fams = [f for f, members in families.items() if members[0].etype == etype]
        for f, split in zip(fams, assign_splits(len(fams), ratios, seed=rng.randrange(2**31))):
            for e in families[f]:
                e.split = split

    passages: list[WorldPassage] = []
    for e in entities:
        passages.extend(_entity_passages(e, rng))
    return DemoWorld(seed=seed, entities=entities, passages=passages)


def _render_value(etype: str, attribute: str, value: Any) -> str:
    if attribute == "population":
        return f"{value:,}"
    return str(value)


def _pick_template(e: Entity, attribute: str, rng: random.Random, avoid: str | None = None) -> str:
    """A fact template for ``attribute``; a fact stated twice is phrased differently the second time."""
    options = [t for t in _FACTS[(e.etype, attribute)] if t != avoid]
    return rng.choice(options or list(_FACTS[(e.etype, attribute)]))


def _entity_passages(e: Entity, rng: random.Random) -> list[WorldPassage]:
    attrs = list(ATTRIBUTES[e.etype])
    rng.shuffle(attrs)
    groups: list[list[str]] = []
    while attrs:
        take = 2 if len(attrs) >= 2 and rng.random() < 0.4 else 1
        groups.append(attrs[:take])
        attrs = attrs[take:]
    if rng.random() < 0.5:  # restate one fact elsewhere: some questions get two answer passages
        groups.append([rng.choice(ATTRIBUTES[e.etype])])
    out = []
    used_templates: dict[str, str] = {}
    fillers: list[str] = []
    for i, group in enumerate(groups):
        sentences = []
        for a in group:
            template = _pick_template(e, a, rng, avoid=used_templates.get(a))
            used_templates[a] = template
            v = _render_value(e.etype, a, e.values[a])
            sentences.append(template.format(n=e.name, v=v, a=_article(v)))
        target = rng.randint(20, 40)
        while len(" ".join(sentences).split()) < target:
            if not fillers:  # each entity cycles through its fillers before repeating one
                fillers = [f.format(n=e.name) for f in _FILLERS[e.etype]]
                rng.shuffle(fillers)
            filler = fillers.pop()
            if filler not in sentences:
                sentences.insert(rng.randint(0, len(sentences)), filler)
        text = " ".join(sentences)
        if not 20 <= len(text.split()) <= 60:
            raise AssertionError(f"demo passage of {len(text.split())} words: {text}")
        out.append(WorldPassage(pid=f"{e.eid}-{i}", eid=e.eid, title=e.name, text=text, attributes=tuple(group)))
    return out


# ---- questions and pools -------------------------------------------------------------------

def gold_answers(e: Entity, attribute: str) -> list[str]:
    """Accepted answer strings for ``attribute`` of ``e`` (the first is the canonical one)."""
    v = e.values[attribute]
    if attribute == "population":
        return [f"{v:,}", str(v)]
    if attribute == "length":
        return [f"{v} kilometres", f"{v} km", str(v)]
    if attribute == "mouth":
        return [f"Lake {v}", str(v)]
    if attribute == "source":
        return [f"{v} Mountains", str(v)]
    if attribute == "province":
        return [str(v), f"{v} Province"]
    if attribute == "product" and " " in v:  # "pocket watches": "watches" is a fair short answer
        return [v, v.split()[-1]]
    return [str(v)]


def _question_text(e: Entity, attribute: str, rng: random.Random) -> str:
    return rng.choice(_QUESTIONS[(e.etype, attribute)]).format(n=e.name)


def _lexical(question: str, text: str) -> float:
    q = set(tokenize(question))
    if not q:
        return 0.0
    p = set(tokenize(text))
    return len(q & p) / len(q)


def generate_demo_world(seed: int = 0, n_entities: int = 48, n_questions: int = 60, pool_size: int = 12, *,
                        family_size: int = 2, score_noise: float = 0.6,
                        split_ratios: Mapping[str, float] | None = None) -> list[QueryRecord]:
    """Questions with candidate pools over a seeded synthetic world (see the module doc).

    ``n_questions`` (entity, attribute) pairs are drawn round-robin over the entity types;
    ``pool_size`` caps each pool (smaller worlds may give smaller pools); ``score_noise`` is the
    standard deviation of the Gaussian noise added to the lexical-overlap retrieval score
    (``score = 3 * overlap + noise``). Deterministic in all arguments.
    """
    if pool_size < 2:
        raise ValueError(f"pool_size must be >= 2, got {pool_size}")
    world = build_world(seed, n_entities, family_size=family_size, split_ratios=split_ratios)
    rng = random.Random(f"questions-{seed}")
    by_entity: dict[str, list[WorldPassage]] = {}
    for p in world.passages:
        by_entity.setdefault(p.eid, []).append(p)
    eid_of = {e.eid: e for e in world.entities}

    queues = []
    for etype in ENTITY_TYPES:
        pairs = [(e, a) for e in world.entities if e.etype == etype for a in ATTRIBUTES[etype]]
        rng.shuffle(pairs)
        queues.append(pairs)
    chosen: list[tuple[Entity, str]] = []
    while len(chosen) < n_questions and any(queues):
        for q in queues:
            if q and len(chosen) < n_questions:
                chosen.append(q.pop())
    if len(chosen) < n_questions:
        raise ValueError(f"the world has only {len(chosen)} (entity, attribute) pairs; "
                         f"raise n_entities for {n_questions} questions")

    records = []
    for i, (e, attribute) in enumerate(chosen):
        question = _question_text(e, attribute, rng)
        answers = gold_answers(e, attribute)
        family = {m.eid for m in world.entities if m.family == e.family and m.eid != e.eid}
        own = by_entity[e.eid]
        answer_ps = [p for p in own if attribute in p.attributes]
        same_entity = [p for p in own if attribute not in p.attributes]
        similar = [p for m in sorted(family) for p in by_entity[m] if attribute in p.attributes]
        rng.shuffle(similar)
        mentions = [p for p in world.passages if p.eid != e.eid and p.eid not in family
                    and has_answer(p.text, [e.name])]
        rng.shuffle(mentions)
        mentions = mentions[:1]
        # one of each distractor kind first, so that small pools stay varied
        candidates: list[tuple[WorldPassage, str]] = [(p, "answer") for p in answer_ps]
        candidates += [(p, "similar_entity") for p in similar[:1]] + [(p, "same_entity") for p in same_entity[:1]]
        candidates += [(p, "mentions_entity") for p in mentions]
        candidates += [(p, "similar_entity") for p in similar[1:2]] + [(p, "same_entity") for p in same_entity[1:]]
        skip = {p.pid for p in mentions}
        others = [p for p in world.passages if eid_of[p.eid].split == e.split and p.eid != e.eid
                  and p.eid not in family and p.pid not in skip]
        rng.shuffle(others)
        pool: list[tuple[WorldPassage, str]] = []
        for p, kind in candidates + [(p, "unrelated") for p in others]:
            if len(pool) >= pool_size:
                break
            if kind != "answer" and has_answer(p.text, answers):
                continue  # keep the question answerable from its answer passages only
            pool.append((p, kind))
        passages = []
        for p, kind in pool:
            score = 3.0 * _lexical(question, f"{p.title} {p.text}") + rng.gauss(0.0, score_noise)
            passages.append(Passage(
                pid=p.pid, title=p.title, text=p.text, score=round(score, 4),
                relevance=int(kind == "answer"), is_distractor=kind not in ("answer", "unrelated"),
                extra={"kind": kind, "entity": p.eid, "attributes": list(p.attributes)}))
        passages.sort(key=lambda p: (-p.score, p.pid))
        for rank, p in enumerate(passages, start=1):
            p.rank = rank
        record = QueryRecord(qid=f"demo-{i:04d}", question=question, answers=answers, passages=passages,
                             split=e.split, extra={"entity": e.eid, "entity_name": e.name, "entity_type": e.etype,
                                                   "attribute": attribute, "family": e.family,
                                                   "world_seed": seed})
        records.append(validate_record(record))
    return records


def write_demo_world(path: str | os.PathLike, **kw: Any) -> Path:
    """Generate the demo world (``**kw`` as :func:`generate_demo_world`) and write it as JSONL, atomically.

    Same arguments, same bytes (``.gz`` output included: the gzip header carries no time stamp).
    """
    return write_records(path, generate_demo_world(**kw))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the seeded demo world as query-record JSONL.")
    parser.add_argument("path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-entities", type=int, default=48)
    parser.add_argument("--n-questions", type=int, default=60)
    parser.add_argument("--pool-size", type=int, default=12)
    args = parser.parse_args(argv)
    path = write_demo_world(args.path, seed=args.seed, n_entities=args.n_entities, n_questions=args.n_questions,
                            pool_size=args.pool_size)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
