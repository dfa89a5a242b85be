"""Seeded logical-deduction puzzles in the style of BIG-Bench Hard's "logical_deduction".

A puzzle has n objects (3, 5 or 7) in a hidden fixed order (left to right on a shelf or
branch; finishing order of golfers; vehicles from oldest to newest; fruits from cheapest
to most expensive), a paragraph of clue statements, and n options "object k is at
position q" for one target position q, exactly one of which is true.

Wording follows BIG-Bench Hard: the lead "The following paragraphs each describe a set of
five objects arranged in a fixed order. The statements are logically consistent within
each paragraph."; positions are named from the nearer end, the middle one from the start
(``position_phrase``): for five books "the leftmost", "the second from the left", "the
third from the left", "the second from the right", "the rightmost"; for seven golfers
"first", "second", "third", "fourth", "third-to-last", "second-to-last", "last"; for
seven fruits "cheapest", "second-cheapest", "third-cheapest", "fourth-most expensive",
..., "most expensive" (antiques and fruit name the middle from the newest / most
expensive end, as BIG-Bench Hard does). The same phrase is used in clues and options
(never "the fifth from the left" for the rightmost of five).

Generation (``make_puzzle``):
1. draw the order (a permutation) and the target position q;
2. two clue pools: one relative clue per pair of objects (phrased as before or after,
   whichever is true) and one absolute clue per object ("X is the second from the left"),
   for *every* object, including the one at q (as in BIG-Bench Hard, where a clue may
   state the answer outright);
3. interleave the pools, the next clue absolute with probability ``ABSOLUTE_DRAW`` (0.3;
   the minimal sets then hold about 30/50/60% absolute clues for 3/5/7 objects, near
   BIG-Bench Hard's even mix), add informative clues until exactly one of
   the n! orderings satisfies them all (brute force over every permutation,
   ``solutions``), then drop clues in random order whenever the rest still leave a single
   ordering (a minimal clue set).

``solutions`` is the brute-force check; tests re-derive every answer with their own
parser of the rendered text and their own enumeration of permutations.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import numpy as np

NUMBER_WORDS = {3: "three", 5: "five", 7: "seven"}
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh"]
# Probability that the next pool clue is absolute. Minimal clue sets keep absolute clues more
# often than they are drawn (each removes more orderings): 0.3 gives about 30%, 50% and 60% absolute
# clues in the final sets for 3, 5 and 7 objects (BIG-Bench Hard items mix both about evenly).
ABSOLUTE_DRAW = 0.3


@dataclass(frozen=True)
class Domain:
    """Wording of one puzzle family. Position 0 is the 'start' end of the order."""

    name: str
    objects: tuple[str, ...]          # noun phrases without article ("red book", "Ana")
    intro: str                        # "{n}" number word, "{items}" listed objects
    article: bool                     # objects take a/an in the intro and "the" in clues
    verb: str                         # "is" / "are" / "finished"
    before: str                       # "{A} ... {B}." means pos(A) < pos(B)
    after: str                        # pos(A) > pos(B)
    start0: str                       # "{A}" at position 0
    start_k: str                      # "{A}" at position k from the start ("{ord}" = second...)
    end0: str                         # at position n-1
    end_k: str                        # at position n-1-k ("{ord}" = second...)
    middle_from_end: bool = False     # the middle of an odd n is named from the end


DOMAINS = (
    Domain("shelf", ("red book", "orange book", "yellow book", "green book", "blue book",
                     "purple book", "white book", "black book", "gray book", "brown book"),
           "On a shelf, there are {n} books: {items}.", True, "is",
           "{A} is to the left of {B}.", "{A} is to the right of {B}.",
           "{A} is the leftmost.", "{A} is the {ord} from the left.",
           "{A} is the rightmost.", "{A} is the {ord} from the right."),
    Domain("branch", ("robin", "crow", "owl", "hawk", "raven", "falcon", "quail", "cardinal",
                      "hummingbird", "blue jay"),
           "On a branch, there are {n} birds: {items}.", True, "is",
           "{A} is to the left of {B}.", "{A} is to the right of {B}.",
           "{A} is the leftmost.", "{A} is the {ord} from the left.",
           "{A} is the rightmost.", "{A} is the {ord} from the right."),
    Domain("golf", ("Ana", "Eli", "Rob", "Mya", "Dan", "Joe", "Eve", "Amy", "Mel", "Ada"),
           "In a golf tournament, there were {n} golfers: {items}.", False, "finished",
           "{A} finished above {B}.", "{A} finished below {B}.",
           "{A} finished first.", "{A} finished {ord}.",
           "{A} finished last.", "{A} finished {ord}-to-last."),
    Domain("antiques", ("sedan", "truck", "bus", "convertible", "minivan", "motorcycle",
                        "tractor", "limousine", "hatchback", "station wagon"),
           "In an antique car show, there are {n} vehicles: {items}.", True, "is",
           "{A} is older than {B}.", "{A} is newer than {B}.",
           "{A} is the oldest.", "{A} is the {ord}-oldest.",
           "{A} is the newest.", "{A} is the {ord}-newest.", True),
    Domain("fruit", ("apples", "pears", "kiwis", "mangoes", "plums", "peaches", "oranges",
                     "loquats", "watermelons", "cantaloupes"),
           "A fruit stand sells {n} fruits: {items}.", False, "are",
           "{A} are less expensive than {B}.", "{A} are more expensive than {B}.",
           "{A} are the cheapest.", "{A} are the {ord}-cheapest.",
           "{A} are the most expensive.", "{A} are the {ord}-most expensive.", True),
)
DOMAIN_BY_NAME = {d.name: d for d in DOMAINS}


def _ref(d: Domain, obj: str) -> str:
    """Definite reference used in clues and options ("the red book", "Ana", "the apples")."""
    if d.name == "golf":
        return obj
    return f"the {obj}"


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _list_items(d: Domain, objs: list[str]) -> str:
    if d.article:
        objs = [("an " if o[0] in "aeiou" else "a ") + o for o in objs]
    return ", ".join(objs[:-1]) + ", and " + objs[-1]


def position_phrase(d: Domain, n: int, p: int, A: str) -> str:
    """The sentence placing ``A`` at 0-based position ``p`` of ``n``, named as BIG-Bench Hard
    does: the ends by their own word, positions before the middle from the start, after it
    from the end, the middle from the start (shelf, branch, golf: "the third from the left",
    "finished fourth") or from the end (antiques, fruit: "the second-newest" of three, "the
    fourth-most expensive" of seven)."""
    if p == 0:
        return d.start0.format(A=A)
    if p == n - 1:
        return d.end0.format(A=A)
    middle = (n - 1) / 2
    if p < middle or (p == middle and not d.middle_from_end):
        return d.start_k.format(A=A, ord=ORDINALS[p])
    return d.end_k.format(A=A, ord=ORDINALS[n - 1 - p])


# A clue is a tuple: ("before", a, b) | ("after", a, b) | ("at", a, p) with object indices
# a, b (into the puzzle's object list) and a 0-based position p.
def render_clue(d: Domain, objs: list[str], clue: tuple) -> str:
    kind, a, x = clue
    A = _cap(_ref(d, objs[a]))
    if kind in ("before", "after"):
        return getattr(d, kind).format(A=A, B=_ref(d, objs[x]))
    if kind == "at":
        return position_phrase(d, len(objs), x, A)
    raise ValueError(f"unknown clue kind {kind!r}")


def holds(clue: tuple, pos) -> bool:
    """Truth of a clue under ``pos`` (pos[obj] = 0-based position)."""
    kind, a, x = clue
    return {"before": lambda: pos[a] < pos[x], "after": lambda: pos[a] > pos[x],
            "at": lambda: pos[a] == x}[kind]()


def _truth_table(clue: tuple, P: np.ndarray) -> np.ndarray:
    """Vectorised ``holds`` over all permutations: P (n!, n) positions -> (n!,) bool."""
    kind, a, x = clue
    if kind == "before":
        return P[:, a] < P[:, x]
    if kind == "after":
        return P[:, a] > P[:, x]
    return P[:, a] == x


def make_puzzle(n: int, rng: random.Random, domain: Domain) -> dict:
    """One puzzle (see module doc) as a dict with text, options, answer and its structure."""
    if n not in NUMBER_WORDS:
        raise ValueError(f"n must be one of {sorted(NUMBER_WORDS)}, got {n}")
    objs = rng.sample(list(domain.objects), n)
    order = list(range(n))
    rng.shuffle(order)                                   # order[position] = object
    pos = [0] * n
    for p_, o in enumerate(order):
        pos[o] = p_
    q = rng.randrange(n)                                 # asked-about position
    relative = []
    for a, b in itertools.combinations(range(n), 2):
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        relative.append(("before" if pos[a] < pos[b] else "after", a, b))
    absolute = [("at", o, pos[o]) for o in range(n)]     # every object, the answer's included
    rng.shuffle(relative)
    rng.shuffle(absolute)
    pool = []
    while relative or absolute:                          # absolute with probability ABSOLUTE_DRAW
        src = absolute if (absolute and (not relative or rng.random() < ABSOLUTE_DRAW)) else relative
        pool.append(src.pop())
    P = np.array(list(itertools.permutations(range(n))), dtype=np.int8)   # (n!, n)
    tables = [_truth_table(c, P) for c in pool]
    alive = np.ones(len(P), dtype=bool)
    chosen = []
    for c, t in zip(pool, tables):
        if (alive & t).sum() < alive.sum():              # informative clue
            chosen.append((c, t))
            alive &= t
        if alive.sum() == 1:
            break
    keep = [True] * len(chosen)
    for i in rng.sample(range(len(chosen)), len(chosen)):   # prune redundant clues
        rest = np.ones(len(P), dtype=bool)
        for j, (_, t) in enumerate(chosen):
            if keep[j] and j != i:
                rest &= t
        if rest.sum() == 1:
            keep[i] = False
    clues = [c for (c, _), k in zip(chosen, keep) if k]
    rng.shuffle(clues)
    opt_clues = [("at", o, q) for o in range(n)]
    paragraph = " ".join([domain.intro.format(n=NUMBER_WORDS[n], items=_list_items(domain, objs))]
                         + [render_clue(domain, objs, c) for c in clues])
    prompt = (f"The following paragraphs each describe a set of {NUMBER_WORDS[n]} objects arranged in a fixed "
              f"order. The statements are logically consistent within each paragraph. {paragraph}\n"
              f"Question: Which of the following is true?\nAnswer:")
    return {"prompt": prompt, "options": [" " + render_clue(domain, objs, c) for c in opt_clues],
            "answer": order[q], "domain": domain.name, "objects": objs, "order": order,
            "clues": clues, "question_position": q}


def generate(n: int, n_items: int, seed: int) -> list[dict]:
    """``n_items`` puzzles with n objects; same (n, n_items, seed) -> same puzzles.
    Domains rotate item by item; each item has its own RNG stream (seed, n, index)."""
    out = []
    for i in range(n_items):
        rng = random.Random((seed * 1_000_003 + n) * 1_000_003 + i)
        d = DOMAINS[i % len(DOMAINS)]
        item = make_puzzle(n, rng, d)
        item["id"] = f"deduction{n}-{seed}-{i:04d}"
        out.append(item)
    return out
