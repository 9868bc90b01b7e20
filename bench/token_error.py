"""How far ``estimate_tokens`` is from o200k_base on real text found on this machine.

    python bench/token_error.py [--limit 1000000] [--repeat 3]

Categories and sources (every file is read where it is; nothing is downloaded):

- prose: README/.md/.rst/.txt files under /usr/share/doc (gzipped ones too) that are
  mostly letters, the long descriptions of installed packages (METADATA), and the
  Language Reference topics in the stdlib's pydoc_data;
- code: the Python standard library's own sources;
- json: .json files of iso-codes, site-packages and npm, each as found, re-dumped
  compact and re-dumped indented;
- natural languages: translated messages of the gettext catalogs in /usr/share/locale
  (latin-ext: de fr es pl cs tr vi; cyrillic: ru uk bg sr; chinese: zh_CN zh_TW;
  japanese; korean; greek; arabic/hebrew: ar he fa; indic: hi bn ta te ml gu pa kn si;
  other-scripts: th ka hy am km my);
- emoji: pip's vendored rich emoji table, eight to a line.

Every source goes to one of two halves by a hash of its name (for catalogs, the domain,
so one message never sits in both): the tables in navi_core/_text_py.py were tuned on
the "tune" half only; "held-out" is the honest error. Each half is capped at --limit
characters per category, taken in sorted order.

Prints, per category and half: characters, o200k tokens, the estimate, its error, and
the error of ``len(text.split()) * 1.3``; then the speed of the estimate against
tiktoken's ``encode`` and against the split heuristic, on all the text. Exits 1 when a
goal is missed: |error| <= 10% on prose, code and JSON, <= 25% elsewhere, on both
halves; and, with the compiled core, >= 10x the speed of tiktoken.
"""

from __future__ import annotations

import argparse
import gettext
import gzip
import json
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

# Run from a plain checkout without installing.
sys.path.insert(0, str(Path(__file__).absolute().parent.parent))

from navi_core import core

__all__ = ["SOURCES", "corpus", "o200k", "split_heuristic"]

ROOT = Path(__file__).absolute().parent.parent
STDLIB = (
    Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
)
SITE = STDLIB / "site-packages"
DOC = Path("/usr/share/doc")
LOCALE = Path("/usr/share/locale")
CHUNK = 16_384
PER_SOURCE = 4 * CHUNK
LANGUAGES = {
    "latin-ext": ("de", "fr", "es", "pl", "cs", "tr", "vi"),
    "cyrillic": ("ru", "uk", "bg", "sr"),
    "chinese": ("zh_CN", "zh_TW"),
    "japanese": ("ja",),
    "korean": ("ko",),
    "greek": ("el",),
    "arabic/hebrew": ("ar", "he", "fa"),
    "indic": ("hi", "bn", "ta", "te", "ml", "gu", "pa", "kn", "si"),
    "other-scripts": ("th", "ka", "hy", "am", "km", "my"),
}
TIGHT = {"prose", "code", "json"}
TIGHT_GOAL, LOOSE_GOAL, SPEED_GOAL = 10.0, 25.0, 10.0

Source = Iterator[tuple[str, str]]  # (name deciding the half, text)


def _read(path: Path) -> str | None:
    try:
        raw = path.read_bytes()
        return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
        return None


def _is_prose(text: str) -> bool:
    sample = text[:8000]
    return sample.isascii() and sum(
        c.isalpha() or c == " " for c in sample
    ) > 0.75 * len(sample)


def _names(path: Path) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # stdlib/pip data
    return namespace


def prose() -> Source:
    for path in sorted(DOC.rglob("*")):
        name = path.name.removesuffix(".gz")
        wanted = name.startswith("README") or name.endswith((".md", ".rst", ".txt"))
        if wanted and path.is_file() and (text := _read(path)) and _is_prose(text):
            yield str(path), text
    for meta in sorted(SITE.glob("*.dist-info/METADATA")):
        body = (_read(meta) or "").partition("\n\n")[2]
        if body and _is_prose(body):
            yield str(meta), body
    topics = STDLIB / "pydoc_data" / "topics.py"
    if topics.exists():
        table = _names(topics)["topics"]
        assert isinstance(table, dict)
        for _, text in sorted(table.items()):
            yield str(topics), text


def code() -> Source:
    for path in sorted(STDLIB.rglob("*.py")):
        if "site-packages" not in path.parts and (text := _read(path)):
            yield str(path), text


def json_texts() -> Source:
    roots = (Path("/usr/share/iso-codes/json"), SITE, Path("/usr/lib/node_modules"))
    for root in roots:
        for path in sorted(root.rglob("*.json")):
            text = _read(path)
            try:
                value = json.loads(text) if text else None
            except ValueError:
                continue
            if text:
                yield str(path), text
                yield str(path), json.dumps(value)
                yield str(path), json.dumps(value, indent=2, ensure_ascii=False)


def catalogs(languages: tuple[str, ...]) -> Callable[[], Source]:
    def messages() -> Source:
        for lang in languages:
            for path in sorted((LOCALE / lang / "LC_MESSAGES").glob("*.mo")):
                try:
                    with path.open("rb") as fp:
                        catalog = gettext.GNUTranslations(fp)._catalog  # type: ignore[attr-defined]
                except (OSError, UnicodeDecodeError):
                    continue
                texts = [
                    v
                    for k, v in catalog.items()
                    if k and isinstance(v, str) and not v.isascii()
                ]
                if texts:
                    yield path.stem, "\n\n".join(texts)

    return messages


def emoji() -> Source:
    path = SITE / "pip" / "_vendor" / "rich" / "_emoji_codes.py"
    if path.exists():
        table = _names(path)["EMOJI"]
        assert isinstance(table, dict)
        values = sorted(set(table.values()))
        for i in range(0, len(values), 64):
            group = values[i : i + 64]
            lines = (" ".join(group[j : j + 8]) for j in range(0, len(group), 8))
            yield f"emoji:{i}", "\n".join(lines)


SOURCES: dict[str, Callable[[], Source]] = {
    "prose": prose,
    "code": code,
    "json": json_texts,
    **{name: catalogs(langs) for name, langs in LANGUAGES.items()},
    "emoji": emoji,
}


def held_out(name: str) -> bool:
    """Which half a source belongs to: a stable hash of its name."""
    return zlib.crc32(name.encode()) % 2 == 1


def corpus(limit: int) -> dict[str, tuple[list[str], list[str]]]:
    """category -> (tuning chunks, held-out chunks), each up to ``limit`` characters."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for category, source in SOURCES.items():
        halves: tuple[list[str], list[str]] = ([], [])
        sizes = [0, 0]
        for name, text in source():
            side = held_out(name)
            if sizes[side] >= limit:
                if min(sizes) >= limit:
                    break
                continue
            for i in range(0, min(len(text), PER_SOURCE), CHUNK):
                halves[side].append(text[i : i + CHUNK])
                sizes[side] += len(halves[side][-1])
        out[category] = halves
    return out


def o200k() -> Callable[[str], int]:
    """Token counter of tiktoken's o200k_base, from the offline cache."""
    import tiktoken

    for cache in (
        ROOT / "tests" / "data" / "tiktoken-cache",
        ROOT.parent / "shared" / "tiktoken-cache",
    ):
        if cache.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
            break
    encoding = tiktoken.get_encoding("o200k_base")
    return encoding.encode_ordinary


def split_heuristic(text: str) -> int:
    """The common rule of thumb the estimate is compared with."""
    return int(len(text.split()) * 1.3)


def best(fn: Callable[[str], object], texts: list[str], repeat: int) -> float:
    """Best-of-``repeat`` seconds for ``fn`` over all ``texts``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for text in texts:
            fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def error_table(data: dict[str, tuple[list[str], list[str]]]) -> bool:
    encode = o200k()
    print(f"estimate_tokens ({core.IMPLEMENTATION} core) against tiktoken o200k_base\n")
    head = f"{'category':14} {'half':8} {'chars':>9} {'o200k':>8} {'estimate':>8} {'error':>7}  {'split*1.3':>9}  goal"
    print(head)
    print("-" * len(head))
    ok = True
    for category, halves in data.items():
        goal = TIGHT_GOAL if category in TIGHT else LOOSE_GOAL
        for half, texts in zip(("tune", "held-out"), halves, strict=True):
            if not texts:
                print(f"{category:14} {half:8} {'(no text on this machine)':>36}")
                continue
            real = sum(len(encode(t)) for t in texts)
            est = sum(core.estimate_tokens(t) for t in texts)
            words = sum(split_heuristic(t) for t in texts)
            err = (est - real) / real * 100
            miss = abs(err) > goal
            ok &= not miss
            print(
                f"{category:14} {half:8} {sum(map(len, texts)):9,} {real:8,} {est:8,} "
                f"{err:+6.1f}%  {(words - real) / real * 100:+8.1f}%  ±{goal:.0f}%"
                + ("  MISSED" if miss else "")
            )
    return ok


def speed(data: dict[str, tuple[list[str], list[str]]], repeat: int) -> bool:
    texts = [t for halves in data.values() for half in halves for t in half]
    chars = sum(map(len, texts))
    encode = o200k()
    seconds = {
        "estimate_tokens": best(core.estimate_tokens, texts, repeat),
        "tiktoken o200k encode": best(encode, texts, repeat),
        "len(text.split()) * 1.3": best(split_heuristic, texts, repeat),
    }
    print(f"\nspeed on all {chars:,} characters (best of {repeat})")
    for name, s in seconds.items():
        print(f"  {name:24} {s * 1e3:9.1f} ms  {chars / s / 1e6:8.1f} M chars/s")
    ratio = seconds["tiktoken o200k encode"] / seconds["estimate_tokens"]
    print(
        f"  estimate_tokens vs tiktoken: {ratio:.1f}x faster (goal {SPEED_GOAL:.0f}x)"
    )
    split = seconds["len(text.split()) * 1.3"] / seconds["estimate_tokens"]
    print(f"  estimate_tokens vs split heuristic: {split:.2f}x the speed")
    if core.IMPLEMENTATION != "cython":
        print("  (pure-Python core: the speed goal applies to the compiled core)")
        return True
    return ratio >= SPEED_GOAL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--limit", type=int, default=1_000_000, help="characters per half"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = corpus(args.limit)
    ok = error_table(data)
    ok &= speed(data, args.repeat)
    print("\nall goals met" if ok else "\nGOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
