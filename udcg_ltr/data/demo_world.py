"""The embedded demo world: a seeded, made-up knowledge base with questions and candidate pools.

Why synthetic: the UDCG signal is only meaningful when the LLM must rely on the passages, and every
name here is built from syllables (``Varno Keltis``, ``Kelmora``), so no LLM knows the facts.
Entities of four types (:data:`ATTRIBUTES`) come in *families* of look-alikes (siblings, towns or
rivers sharing a stem ...) whose values all differ: the hard distractors. Each entity gets a few
20-60 word passages titled with its name, each stating one or two of its facts among filler.

One question per sampled (entity, attribute) pair; its pool holds the 1-2 passages stating the fact
(``relevance=1``, ``extra["kind"]="answer"``), hard distractors (``is_distractor``: ``"same_entity"``,
``"similar_entity"`` (a family member's same attribute), ``"mentions_entity"``) and ``"unrelated"``
passages of the split; no other passage contains a gold answer. Splits are per family. Same
arguments, same records: :func:`write_demo_world` writes the same bytes.
"""

from __future__ import annotations

import argparse
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, zip_longest
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.readers.dpr import tokenize
from udcg_ltr.data.readers.squad import assign_splits
from udcg_ltr.data.schema import Passage, QueryRecord, validate_record
from udcg_ltr.text import has_answer

ENTITY_TYPES = ("person", "city", "company", "river")

ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "person": ("birth_year", "birthplace", "profession"),
    "city": ("population", "founded", "province"),
    "company": ("founder", "founded", "headquarters", "product"),
    "river": ("length", "mouth", "source"),
}

DEFAULT_SPLIT_RATIOS = {"train": 0.6, "val": 0.2, "test": 0.2}

_ONSETS = (*"b d f g h k l m n p r s t v z br dr kr th st".split(), "")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "k", "nd", "rn", "st")
#: Hard-to-say joins are rejected: three consonants or two vowels in a row.
_UNPRONOUNCEABLE = re.compile(r"[^aeiouy\s&.]{3,}|[aeiouy]{2,}")
_SURNAME_ENDS = ("is", "en", "ar", "ov", "ell", "ane", "ith", "ur", "ander", "ow", "ek")
_CITY_ENDS = ("mora", "dal", "vik", "holm", "ford", "stad", "ene", "ith", "wick", "ora")
_RIVER_ENDS = ("a", "en", "is", "ura", "ette", "on")
_COMPANY_ENDS = ("Works", "Brothers", "& Co.", "Holdings", "Company", "Group", "Partners")

_PROFESSIONS = tuple("""botanist cartographer violinist engineer poet astronomer glassblower architect
geologist painter clockmaker surgeon sculptor shipwright mathematician beekeeper""".split())
_PRODUCTS = ("ceramic tiles", "bicycles", "woollen blankets", "pocket watches", "paper lanterns",
             "glass bottles", "pipe organs", "copper kettles", "fishing nets", "leather saddles",
             "typewriters", "hot-air balloons", "wooden toys", "oil lamps")

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


def _stem(rng: random.Random, n_syllables: int) -> str:
    s = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n_syllables))
    return s[:1].upper() + s[1:]


def _retry(draw: Callable[[], Any], accept: Callable[[Any], bool], message: str) -> Any:
    """The first of up to 1000 ``draw()`` s that ``accept`` takes."""
    for _ in range(1000):
        if accept(value := draw()):
            return value
    raise RuntimeError(message)


def _words(name: str) -> list[str]:
    """The capitalised words of a name that must not be reused (``"Dunmere Works"``: dunmere, works)."""
    return [w.lower() for w in name.replace("&", " ").split() if len(w) > 3 and w[0].isupper()]


class _Names:
    """Fresh made-up names: a name, or a capitalised word of one, is never drawn twice, so answers never
    collide by accident; look-alikes are made on purpose from one stem (:meth:`family`)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def take(self, make) -> str:
        name = _retry(make, self.ok, "could not find a fresh name; use fewer entities")
        self.used.update([name.lower(), *_words(name)])
        return name

    def ok(self, name: str) -> bool:
        key = name.lower()
        return not (key in self.used or len(name.replace(" ", "")) < 4 or any(w in self.used for w in _words(name))
                    or _UNPRONOUNCEABLE.search(key.replace(" river", "")))

    def family(self, endings: Sequence[str], size: int, lo: int = 1, hi: int = 2) -> list[str]:
        """``size`` look-alike names: one fresh stem with different endings (``Kelmora``, ``Keldal``)."""
        def fits() -> list[str]:
            stem = self.stem(lo, hi)
            return [stem + end for end in endings if self.ok(stem + end)]

        chosen = self.rng.sample(_retry(fits, lambda names: len(names) >= size,
                                        "could not find fresh names; use fewer entities"), size)
        self.used.update(name.lower() for name in chosen)
        return chosen

    def stem(self, lo: int = 2, hi: int = 2) -> str:
        return self.take(lambda: _stem(self.rng, self.rng.randint(lo, hi)))


def _distinct(draw: Callable[[dict[str, Any]], Any], values: dict[str, Any], taken: list) -> Any:
    """A value ``draw(values)`` not in ``taken`` (which it joins): family members' values all differ."""
    v = _retry(lambda: draw(values), lambda v: v not in taken, "could not draw distinct attribute values")
    taken.append(v)
    return v


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
    provinces, lakes, ranges = ([names.stem() for _ in range(k)] for k in (6, 8, 6))

    entities: list[Entity] = []
    families: dict[str, list[Entity]] = {}
    for t, etype in enumerate(ENTITY_TYPES):  # names first (values of people and companies refer to cities and people)
        for f, start in enumerate(range(0, per_type[t], family_size)):
            size = min(family_size, per_type[t] - start)
            if etype == "person":
                surname = names.take(lambda: _stem(rng, 1) + rng.choice(_SURNAME_ENDS))
                members = [f"{names.stem()} {surname}" for _ in range(size)]
            elif etype == "city":
                members = names.family(_CITY_ENDS, size)
            elif etype == "company":
                stem = names.stem()
                members = [f"{stem} {end}" for end in rng.sample(_COMPANY_ENDS, size)]
            else:
                members = [f"{name} River" for name in names.family(_RIVER_ENDS, size)]
            for name in members:
                e = Entity(eid=f"{etype[0]}{len(entities):03d}", etype=etype, name=name, family=f"{etype}-{f}")
                entities.append(e)
                families.setdefault(e.family, []).append(e)

    cities = [e.name for e in entities if e.etype == "city"]
    people = [e for e in entities if e.etype == "person"]
    birth_year = {}  # person name -> birth year, for the founding years of companies
    # attribute -> drawer of a value from the entity's values so far, in ATTRIBUTES order
    drawers: dict[str, dict[str, Callable[[dict[str, Any]], Any]]] = {
        "person": {"birth_year": lambda v: rng.randint(1780, 1975), "birthplace": lambda v: rng.choice(cities),
                   "profession": lambda v: rng.choice(_PROFESSIONS)},
        # founded before any birth year: nobody is born in a town not yet founded
        "city": {"population": lambda v: rng.randrange(2_000, 900_000, 100),
                 "founded": lambda v: rng.randint(900, 1750), "province": lambda v: rng.choice(provinces)},
        # founded during the founder's working life
        "company": {"founder": lambda v: rng.choice(people).name,
                    "founded": lambda v: birth_year[v["founder"]] + rng.randint(20, 55),
                    "headquarters": lambda v: rng.choice(cities), "product": lambda v: rng.choice(_PRODUCTS)},
        "river": {"length": lambda v: rng.randint(40, 980), "mouth": lambda v: rng.choice(lakes),
                  "source": lambda v: rng.choice(ranges)},
    }
    for members in families.values():
        taken: dict[str, list] = {a: [] for a in ATTRIBUTES[members[0].etype]}
        for e in members:
            for attribute, draw in drawers[e.etype].items():
                e.values[attribute] = _distinct(draw, e.values, taken[attribute])
            if e.etype == "person":
                birth_year[e.name] = e.values["birth_year"]

    ratios = dict(DEFAULT_SPLIT_RATIOS if split_ratios is None else split_ratios)
    for etype in ENTITY_TYPES:  # splits per family, stratified by type
        fams = [f for f, members in families.items() if members[0].etype == etype]
        for f, split in zip(fams, assign_splits(len(fams), ratios, seed=rng.randrange(2**31))):
            for e in families[f]:
                e.split = split

    return DemoWorld(seed=seed, entities=entities, passages=[p for e in entities for p in _entity_passages(e, rng)])


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
        for a in group:  # a fact stated twice is phrased differently the second time
            options = [t for t in _FACTS[(e.etype, a)] if t != used_templates.get(a)]
            template = used_templates[a] = rng.choice(options)
            v = f"{e.values[a]:,}" if a == "population" else str(e.values[a])
            sentences.append(template.format(n=e.name, v=v, a="an" if v[:1].lower() in "aeiou" else "a"))
        target = rng.randint(20, 40)
        while len(" ".join(sentences).split()) < target:
            if not fillers:  # each entity cycles through its fillers before repeating one
                fillers = [f.format(n=e.name) for f in _FILLERS[e.etype]]
                rng.shuffle(fillers)
            if (filler := fillers.pop()) not in sentences:
                sentences.insert(rng.randint(0, len(sentences)), filler)
        text = " ".join(sentences)
        if not 20 <= len(text.split()) <= 60:
            raise AssertionError(f"demo passage of {len(text.split())} words: {text}")
        out.append(WorldPassage(pid=f"{e.eid}-{i}", eid=e.eid, title=e.name, text=text, attributes=tuple(group)))
    return out


#: Accepted answer forms per attribute (``{v}``: the value), the canonical one first; others: ``("{v}",)``.
_ANSWER_FORMS = {"population": ("{v:,}", "{v}"), "length": ("{v} kilometres", "{v} km", "{v}"),
                 "mouth": ("Lake {v}", "{v}"), "source": ("{v} Mountains", "{v}"), "province": ("{v}", "{v} Province")}


def gold_answers(e: Entity, attribute: str) -> list[str]:
    """Accepted answer strings for ``attribute`` of ``e`` (the first is the canonical one)."""
    v = e.values[attribute]
    if attribute == "product" and " " in v:  # "pocket watches": "watches" is a fair short answer
        return [v, v.split()[-1]]
    return [form.format(v=v) for form in _ANSWER_FORMS.get(attribute, ("{v}",))]


def _lexical(question: str, text: str) -> float:
    """The share of the question's BM25 tokens that occur in ``text`` (the pseudo-retrieval signal)."""
    q = set(tokenize(question))
    return len(q & set(tokenize(text))) / len(q) if q else 0.0


def generate_demo_world(seed: int = 0, n_entities: int = 48, n_questions: int = 60, pool_size: int = 12, *,
                        family_size: int = 2, score_noise: float = 0.6,
                        split_ratios: Mapping[str, float] | None = None) -> list[QueryRecord]:
    """Questions with candidate pools over a seeded synthetic world (module doc), (entity, attribute) pairs
    drawn round-robin over the entity types; ``score = 3 * overlap + noise`` with noise of standard
    deviation ``score_noise``."""
    if pool_size < 2:
        raise ValueError(f"pool_size must be >= 2, got {pool_size}")
    world = build_world(seed, n_entities, family_size=family_size, split_ratios=split_ratios)
    rng = random.Random(f"questions-{seed}")
    by_entity: dict[str, list[WorldPassage]] = {}
    for p in world.passages:
        by_entity.setdefault(p.eid, []).append(p)
    eid_of = {e.eid: e for e in world.entities}

    queues = [[(e, a) for e in world.entities if e.etype == etype for a in ATTRIBUTES[etype]] for etype in ENTITY_TYPES]
    for q in queues:
        rng.shuffle(q)
    # round-robin over the types, each queue popped from its end
    chosen = [pair for pair in chain(*zip_longest(*(q[::-1] for q in queues))) if pair][:n_questions]
    if len(chosen) < n_questions:
        raise ValueError(f"the world has only {len(chosen)} (entity, attribute) pairs; "
                         f"raise n_entities for {n_questions} questions")

    records = []
    for i, (e, attribute) in enumerate(chosen):
        question = rng.choice(_QUESTIONS[(e.etype, attribute)]).format(n=e.name)
        answers = gold_answers(e, attribute)
        family = {m.eid for m in world.entities if m.family == e.family and m.eid != e.eid}
        own = by_entity[e.eid]
        same_entity = [p for p in own if attribute not in p.attributes]
        similar = [p for m in sorted(family) for p in by_entity[m] if attribute in p.attributes]
        rng.shuffle(similar)
        mentions = [p for p in world.passages if p.eid != e.eid and p.eid not in family
                    and has_answer(p.text, [e.name])]
        rng.shuffle(mentions)
        mentions = mentions[:1]
        # one of each distractor kind first, so that small pools stay varied
        candidates: list[tuple[WorldPassage, str]] = [(p, "answer") for p in own if attribute in p.attributes]
        candidates += [(p, "similar_entity") for p in similar[:1]] + [(p, "same_entity") for p in same_entity[:1]]
        candidates += [(p, "mentions_entity") for p in mentions]
        candidates += [(p, "similar_entity") for p in similar[1:2]] + [(p, "same_entity") for p in same_entity[1:]]
        others = [p for p in world.passages if eid_of[p.eid].split == e.split and p.eid != e.eid
                  and p.eid not in family and p not in mentions]
        rng.shuffle(others)
        pool: list[tuple[WorldPassage, str]] = []
        for p, kind in candidates + [(p, "unrelated") for p in others]:
            if len(pool) >= pool_size:
                break  # has_answer is the costly test: stop as soon as the pool is full
            if kind == "answer" or not has_answer(p.text, answers):  # answerable from its answer passages only
                pool.append((p, kind))
        scores = [round(3.0 * _lexical(question, f"{p.title} {p.text}") + rng.gauss(0.0, score_noise), 4)
                  for p, _ in pool]
        ranked = sorted(zip(scores, pool), key=lambda x: (-x[0], x[1][0].pid))
        passages = [Passage(pid=p.pid, title=p.title, text=p.text, rank=rank, score=score,
                            relevance=int(kind == "answer"), is_distractor=kind.endswith("_entity"),
                            extra={"kind": kind, "entity": p.eid, "attributes": list(p.attributes)})
                    for rank, (score, (p, kind)) in enumerate(ranked, start=1)]
        record = QueryRecord(qid=f"demo-{i:04d}", question=question, answers=answers, passages=passages,
                             split=e.split, extra={"entity": e.eid, "entity_name": e.name, "entity_type": e.etype,
                                                   "attribute": attribute, "family": e.family, "world_seed": seed})
        records.append(validate_record(record))
    return records


def write_demo_world(path: str | os.PathLike, **kw: Any) -> Path:
    """Write :func:`generate_demo_world` (``**kw``) as JSONL atomically: same arguments, same bytes."""
    return write_records(path, generate_demo_world(**kw))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the seeded demo world as query-record JSONL.")
    parser.add_argument("path")
    for name, default in (("seed", 0), ("n-entities", 48), ("n-questions", 60), ("pool-size", 12)):
        parser.add_argument(f"--{name}", type=int, default=default)
    args = vars(parser.parse_args(argv))
    print(write_demo_world(args.pop("path"), **args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
