"""``is_casual_message``: does a user message need a plan, or is it small talk?

Greetings, thanks, farewells and short acknowledgements (English and Russian) are
casual; so is a message of at most three short words made only of those phrases and
emoji. Commands (``/x``, ``!x``, ``@x``), URLs, paths, code, questions that ask for
something, and anything longer than ``MAX_CASUAL_CHARS`` are not. ``Config.planning``
skips its planning request for a casual turn.
"""

# ruff: noqa: RUF001  (the Russian phrases are Cyrillic on purpose)
from __future__ import annotations

import re
import unicodedata
from typing import Final

from .._ids import publish

__all__ = ["CASUAL_PHRASES", "MAX_CASUAL_CHARS", "is_casual_message"]

#: longer messages are never casual
MAX_CASUAL_CHARS: Final = 60

#: whole messages (after normalising) that are small talk
CASUAL_PHRASES: Final = frozenset(
    {
        # English: greetings
        "hi", "hello", "hey", "hey there", "hi there", "hello there", "yo", "hiya",
        "howdy", "greetings", "good morning", "good afternoon", "good evening",
        "morning", "evening", "sup", "whats up", "what's up",
        "how are you", "how are you doing", "how's it going", "hows it going",
        # English: thanks, acknowledgements, farewells
        "thanks", "thank you", "thanks a lot", "thank you very much", "thx", "ty",
        "many thanks", "cheers", "much appreciated", "appreciate it",
        "ok", "okay", "k", "kk", "cool", "nice", "great", "awesome", "perfect",
        "got it", "sounds good", "sure", "alright", "all right", "np", "no problem",
        "yes", "no", "yep", "nope", "yeah",
        "bye", "goodbye", "good bye", "bye bye", "see you", "see ya", "later",
        "good night", "gn", "take care", "lol", "haha",
        # Russian: greetings
        "привет", "приветик", "здравствуй", "здравствуйте", "здрасте", "хай",
        "добрый день", "доброе утро", "добрый вечер", "доброй ночи", "салют",
        "как дела", "как ты", "как поживаешь", "что нового",
        # Russian: thanks, acknowledgements, farewells
        "спасибо", "спс", "благодарю", "спасибо большое", "большое спасибо",
        "ок", "окей", "хорошо", "ладно", "понятно", "понял", "поняла", "ясно",
        "отлично", "супер", "класс", "круто", "договорились", "да", "нет", "ага",
        "пока", "до свидания", "до встречи", "увидимся", "всего доброго",
        "спокойной ночи", "хаха",
    }
)  # fmt: skip

_COMMAND: Final = re.compile(r"^\s*[/!@]\S")
_URL_OR_PATH: Final = re.compile(
    r"(https?://|www\.|\w\.\w{2,}/|(^|\s)[~.]?/\w|\\\w|\w\.(py|js|ts|md|txt|json|rs)\b)",
    re.IGNORECASE,
)
_CODE: Final = re.compile(r"[`{}<>=;\[\]]")
_TRAILING: Final = re.compile(r"[\s!?.,;:)(*~…]+$")
_LEADING: Final = re.compile(r"^[\s(*~]+")
_SPACES: Final = re.compile(r"\s+")


def _is_emoji(token: str) -> bool:
    return all(unicodedata.category(c) in ("So", "Sk", "Mn", "Cf") for c in token)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text).casefold().replace("ё", "е")
    text = _TRAILING.sub("", _LEADING.sub("", text))
    return _SPACES.sub(" ", text)


def is_casual_message(text: str) -> bool:
    """True for greetings, thanks and very short social messages (English, Russian).

    Commands, URLs, paths, code, task requests and long messages are not casual.
    """
    if not text or len(text) > MAX_CASUAL_CHARS or "\n" in text.strip():
        return False
    if _COMMAND.match(text) or _URL_OR_PATH.search(text) or _CODE.search(text):
        return False
    norm = _normalise(text)
    if not norm:
        return False
    if norm in CASUAL_PHRASES:
        return True
    tokens = [t for t in re.split(r"[\s,!.?;:]+", norm) if t]
    if not tokens or len(tokens) > 4:
        return False
    # "hi there!", "thanks, bye", "ok 👍": every piece is small talk or an emoji
    rest = [t for t in tokens if not _is_emoji(t)]
    if not rest:
        return True
    return _covered(rest)


def _covered(tokens: list[str]) -> bool:
    """True when ``tokens`` split into a sequence of casual phrases."""
    n = len(tokens)
    ok = [True] + [False] * n
    for end in range(1, n + 1):
        for start in range(end):
            if ok[start] and " ".join(tokens[start:end]) in CASUAL_PHRASES:
                ok[end] = True
                break
    return ok[n]


publish(globals())
