"""How long parsing (or refusing) a formula takes, by its size: the bound issue 30 set is
"a 1 MB formula is parsed or refused within a second" (R refuses or parses such input at
once; crossed's parse grew quadratically, 77 s for 200 kB, before).

Usage::

    .venv/bin/python benchmarks/formula_parse.py

Prints, for each formula, its length, what happened (parsed / refused) and the median of
five parses in milliseconds. Run it on a quiet machine; tests only guard against hangs.
"""

from __future__ import annotations

import statistics
import time

from crossed.formula import FormulaError, evaluate, parse, safety, spec
from crossed.formula.grammar import MAX_FORMULA_LENGTH


def _clear_caches() -> None:
    """Parsing is cached per text; every timing here is of a first parse."""
    spec._parse_cached.cache_clear()
    safety._parsed_factors.cache_clear()
    evaluate.expression_tree.cache_clear()


def _sum_of_terms(length: int) -> str:
    terms: list[str] = []
    text = "y ~ 1"
    while len(text) < length:
        terms.append(f"x{len(terms)}")
        text = "y ~ " + " + ".join(terms)
    return text + " + (1 | g)"


CASES = {
    "sleepstudy": "Reaction ~ Days + (Days | Subject)",
    "12-way interaction (4,095 terms)": "y ~ " + " * ".join(f"x{i}" for i in range(12))
                                        + " + (1 | g)",
    "20-way interaction (refused)": "y ~ " + " * ".join(f"x{i}" for i in range(20))
                                    + " + (1 | g)",
    "longest accepted (8,000 characters)": _sum_of_terms(MAX_FORMULA_LENGTH - 40),
    "200 kB": _sum_of_terms(200_000),
    "1 MB": _sum_of_terms(1_000_000),
}


def main() -> None:
    print(f"{'formula':40} {'characters':>11} {'result':>8} {'median ms':>10}")
    for name, formula in CASES.items():
        times, result = [], "parsed"
        for _ in range(5):
            _clear_caches()
            t = time.perf_counter()
            try:
                parse(formula)
            except FormulaError:
                result = "refused"
            times.append(time.perf_counter() - t)
        print(f"{name:40} {len(formula):>11,} {result:>8} "
              f"{1000 * statistics.median(times):>10.2f}")


if __name__ == "__main__":
    main()
