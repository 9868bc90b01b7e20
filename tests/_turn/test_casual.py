"""``is_casual_message``: small talk in English and Russian, and what is never casual."""
# ruff: noqa: RUF001  (the Russian cases are Cyrillic on purpose)

from __future__ import annotations

import pytest

from navi_core import is_casual_message

CASUAL = [
    "hi",
    "Hello!",
    "hey there",
    "Good morning :)",
    "thanks",
    "Thank you!!",
    "thanks, bye",
    "ok 👍",
    "👍",
    "got it.",
    "hi, how are you?",
    "Привет!",
    "Здравствуйте",
    "Спасибо большое",
    "спс",
    "как дела?",
    "Ок, пока",
    "Добрый вечер!",
    "большое спасибо",
]

NOT_CASUAL = [
    "",
    "   ",
    "/help",
    "!ls -la",
    "@reviewer hi",
    "https://example.com",
    "hi www.example.com",
    "see ./run.sh",
    "open src/main.py",
    "fix the build",
    "hi, can you fix the build?",
    "what is 2+2",
    "Привет, помоги с кодом",
    "Спасибо, а теперь напиши тест",
    "thanks `x = 1`",
    "thank you so much for that explanation of the parser states",
    "hello " * 20,
    "hi\nplease refactor this module",
]


@pytest.mark.parametrize("text", CASUAL)
def test_casual(text: str) -> None:
    assert is_casual_message(text)


@pytest.mark.parametrize("text", NOT_CASUAL)
def test_not_casual(text: str) -> None:
    assert not is_casual_message(text)
