"""Language features (family, script) for the languages of the bundled real tables.

Families follow Glottolog's top-level families (Nigerian Pidgin is listed as an English-based
creole, Basque as an isolate); scripts are those the evaluation data are written in (the
Maghrebi Arabic–French data is Arabizi, in Latin script). Codes are ISO 639-3, with the
ISO 639-1 aliases used by XQuAD, FLORES-200 and the EA-MT shared task.
"""

from __future__ import annotations

import re

import pandas as pd

__all__ = ["language_code", "language_features"]

# code: (name, family, script)
_LANGUAGES: dict[str, tuple[str, str, str]] = {
    "ara": ("Arabic", "Afro-Asiatic", "Arabic"),
    "bam": ("Bambara", "Mande", "Latin"),
    "bar": ("Bavarian", "Indo-European", "Latin"),
    "bbj": ("Ghomala", "Atlantic-Congo", "Latin"),
    "cat": ("Catalan", "Indo-European", "Latin"),
    "cmn": ("Mandarin Chinese", "Sino-Tibetan", "Han"),
    "dan": ("Danish", "Indo-European", "Latin"),
    "deu": ("German", "Indo-European", "Latin"),
    "ell": ("Greek", "Indo-European", "Greek"),
    "eng": ("English", "Indo-European", "Latin"),
    "eus": ("Basque", "Basque", "Latin"),
    "ewe": ("Ewe", "Atlantic-Congo", "Latin"),
    "fin": ("Finnish", "Uralic", "Latin"),
    "fon": ("Fon", "Atlantic-Congo", "Latin"),
    "fra": ("French", "Indo-European", "Latin"),
    "glg": ("Galician", "Indo-European", "Latin"),
    "hau": ("Hausa", "Afro-Asiatic", "Latin"),
    "heb": ("Hebrew", "Afro-Asiatic", "Hebrew"),
    "hin": ("Hindi", "Indo-European", "Devanagari"),
    "hrv": ("Croatian", "Indo-European", "Latin"),
    "ibo": ("Igbo", "Atlantic-Congo", "Latin"),
    "ita": ("Italian", "Indo-European", "Latin"),
    "jpn": ("Japanese", "Japonic", "Japanese"),
    "kaz": ("Kazakh", "Turkic", "Cyrillic"),
    "kin": ("Kinyarwanda", "Atlantic-Congo", "Latin"),
    "kor": ("Korean", "Koreanic", "Hangul"),
    "lug": ("Luganda", "Atlantic-Congo", "Latin"),
    "luo": ("Dholuo", "Nilotic", "Latin"),
    "mar": ("Marathi", "Indo-European", "Devanagari"),
    "mos": ("Mossi", "Atlantic-Congo", "Latin"),
    "nep": ("Nepali", "Indo-European", "Devanagari"),
    "nld": ("Dutch", "Indo-European", "Latin"),
    "nno": ("Norwegian Nynorsk", "Indo-European", "Latin"),
    "nob": ("Norwegian Bokmal", "Indo-European", "Latin"),
    "nya": ("Chichewa", "Atlantic-Congo", "Latin"),
    "pcm": ("Nigerian Pidgin", "Creole", "Latin"),
    "por": ("Portuguese", "Indo-European", "Latin"),
    "qaf": ("Maghrebi Arabic-French", "Afro-Asiatic", "Latin"),
    "ron": ("Romanian", "Indo-European", "Latin"),
    "rus": ("Russian", "Indo-European", "Cyrillic"),
    "slk": ("Slovak", "Indo-European", "Latin"),
    "slv": ("Slovenian", "Indo-European", "Latin"),
    "sna": ("Shona", "Atlantic-Congo", "Latin"),
    "spa": ("Spanish", "Indo-European", "Latin"),
    "swa": ("Swahili", "Atlantic-Congo", "Latin"),
    "swe": ("Swedish", "Indo-European", "Latin"),
    "tha": ("Thai", "Tai-Kadai", "Thai"),
    "tsn": ("Tswana", "Atlantic-Congo", "Latin"),
    "tur": ("Turkish", "Turkic", "Latin"),
    "twi": ("Twi", "Atlantic-Congo", "Latin"),
    "vie": ("Vietnamese", "Austroasiatic", "Latin"),
    "wol": ("Wolof", "Atlantic-Congo", "Latin"),
    "xho": ("Xhosa", "Atlantic-Congo", "Latin"),
    "yor": ("Yoruba", "Atlantic-Congo", "Latin"),
}

_ALIASES = {"ar": "ara", "de": "deu", "el": "ell", "en": "eng", "es": "spa", "fr": "fra",
            "hi": "hin", "it": "ita", "ja": "jpn", "ko": "kor", "nl": "nld", "pt": "por",
            "ro": "ron", "ru": "rus", "th": "tha", "tr": "tur", "vi": "vie", "zh": "cmn"}


def language_code(task: str) -> tuple[str, str | None]:
    """ISO 639-3 code of a task label, and the translation direction where there is one.

    ``"ar"`` → ("ara", None); ``"ar_AE"`` → ("ara", None); ``"hau_MasakhaNER"`` →
    ("hau", None); ``"en-de"`` → ("deu", "from_en"); ``"de-en"`` → ("deu", "to_en").
    """
    label = str(task)
    m = re.fullmatch(r"([a-z]{2,3})-([a-z]{2,3})", label)
    if m:
        src, tgt = (_ALIASES.get(x, x) for x in m.groups())
        if src == "eng":
            return tgt, "from_en"
        return src, "to_en" if tgt == "eng" else None
    head = re.split(r"[_\-]", label)[0].lower()
    return _ALIASES.get(head, head), None


def language_features(tasks) -> pd.DataFrame:
    """Features of the language behind each task label.

    Returns
    -------
    DataFrame
        One row per task: ``task``, ``language`` (ISO 639-3), ``name``, ``family``,
        ``script``, ``latin_script`` (1/0), ``direction`` (``from_en``/``to_en`` for
        translation directions, else ``none``). Unknown languages get ``unknown``.
    """
    rows = []
    for t in pd.unique(pd.Series(list(tasks), dtype=object)):
        code, direction = language_code(t)
        name, family, script = _LANGUAGES.get(code, ("unknown", "unknown", "unknown"))
        rows.append({"task": t, "language": code, "name": name, "family": family,
                     "script": script, "latin_script": int(script == "Latin"),
                     "direction": direction or "none"})
    return pd.DataFrame(rows)
