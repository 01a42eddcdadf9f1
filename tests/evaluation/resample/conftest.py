"""Fixtures for the resampling tests: ner_like and the real published tables."""

from pathlib import Path

import pytest

import crossed as cx

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
REAL_FILES = {
    "xquad": REAL / "xquad_llm_f1.jsonl",
    "flores": REAL / "flores200_llm_mt.jsonl",
    "openner": REAL / "openner_seed_boot_sd.jsonl.gz",
    "ea_mt": REAL / "ea_mt_submissions.jsonl.gz",
}
NER = {"score": "f1", "system": "model", "task": "language"}


@pytest.fixture(scope="session")
def ner():
    """ner_like: 6 systems × 61 languages × 10 seeds (F1)."""
    return cx.load_dataset("ner_like")


@pytest.fixture(scope="session")
def ner_table(ner):
    return cx.resample.from_replicates(ner, "f1", "model", "language", seed_col="seed")


@pytest.fixture(scope="session")
def real_files():
    """Paths of the four published tables copied into tests/data/real."""
    return REAL_FILES
