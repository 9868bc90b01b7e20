"""``ToolSearch``: past ``max_visible`` tools, the model sees a search tool and the
tools its searches loaded, not every declaration.

A big toolset costs thousands of tokens of declarations in every request. Beside the
other tools of an ``Agent``, a ``ToolSearch`` declares ``search_tools(query)``; the
agent's request then carries that tool, the ``pinned`` ones and the ones loaded so
far. A search ranks every tool's name, description and parameter names with BM25,
here in the process, and loads the best hits: they are in the next request. Only
the declarations of a request change, so it works with every provider.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from .._ids import publish
from ._tool import ToolCall, ToolSpec

__all__ = ["ToolSearch"]

_WORD: Final = re.compile(r"[a-z0-9]+")
_HUMP: Final = re.compile(r"([a-z0-9])([A-Z])")
#: BM25's term-frequency saturation and length normalisation (the usual values)
_K1: Final = 1.2
_B: Final = 0.75
#: a name's words count this many times over the words of a description
_NAME_WEIGHT: Final = 3


def _words(text: str) -> list[str]:
    """Lower-case words of ``text``; ``readFile``, ``read_file`` and ``read-file``
    give the same words, and a plural ``s`` is dropped."""
    out = []
    for w in _WORD.findall(_HUMP.sub(r"\1 \2", text).lower()):
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and w[-2] != "s" else w)
    return out


def _document(spec: ToolSpec) -> list[str]:
    """The words a tool is found by: its name (weighted), description, parameters."""
    words = _words(spec.name) * _NAME_WEIGHT + _words(spec.description)
    properties = spec.parameters.get("properties")
    if isinstance(properties, dict):
        for name, schema in properties.items():
            words += _words(str(name))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                words += _words(schema["description"])
    return words


class _Index:
    """BM25 over a fixed list of tool declarations."""

    __slots__ = ("_avg", "_docs", "_idf", "specs")

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self.specs = tuple(specs)
        self._docs = [(Counter(d), len(d)) for d in map(_document, self.specs)]
        self._avg = sum(n for _, n in self._docs) / max(1, len(self._docs))
        df: Counter[str] = Counter()
        for counts, _ in self._docs:
            df.update(counts.keys())
        n = len(self._docs)
        self._idf = {w: math.log(1 + (n - k + 0.5) / (k + 0.5)) for w, k in df.items()}

    def rank(self, query: str, limit: int) -> list[ToolSpec]:
        """The best ``limit`` matches of ``query``, best first (none match: empty)."""
        terms = [w for w in dict.fromkeys(_words(query)) if w in self._idf]
        scored = []
        for i, (counts, length) in enumerate(self._docs):
            score = 0.0
            for w in terms:
                tf = counts.get(w, 0)
                if tf:
                    norm = _K1 * (1 - _B + _B * length / (self._avg or 1))
                    score += self._idf[w] * tf * (_K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [self.specs[i] for _, i in scored[:limit]]


class ToolSearch:
    """A search tool that stands in for a big toolset (a ``ToolSource``).

    Pass it in ``Agent(tools=[...])`` beside the tools and sources. While the agent
    has at most ``max_visible`` other tools, every tool is sent and the search tool
    is not. Past that, a request carries ``search_tools(query)``, the ``pinned``
    tools and the tools loaded so far: each search loads its ``max_results`` best
    matches, which are in the next request. A tool the model names without loading
    it still runs.

    Loaded tools stay loaded for as long as this object lives, over the turns of its
    agent (the oldest go past ``max_visible``); they are not stored with the session,
    so a resumed session searches again. Give each agent its own ``ToolSearch``.
    """

    #: a search ranks in memory and returns at once: it runs on the thread that
    #: drives the turn, with no thread hand-off (see ``Tool.inline``)
    inline = True

    def __init__(
        self,
        max_visible: int = 20,
        *,
        max_results: int = 5,
        pinned: Iterable[str] = (),
        name: str = "search_tools",
    ) -> None:
        if max_visible < 1 or max_results < 1:
            raise ValueError("ToolSearch needs max_visible >= 1 and max_results >= 1")
        self.max_visible = max_visible
        self.max_results = max_results
        self.pinned = tuple(
            dict.fromkeys(pinned)
        )  # in the order given: stable requests
        self._spec = ToolSpec(
            name,
            "Find tools for a task among the many available that are not declared "
            "yet. Describe what you need in a few words; the best matches become "
            "callable from your next step.",
            {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What the tool should do, in a few words.",
                    }
                },
                "required": ["query"],
            },
        )
        self._lock = threading.Lock()
        self._all: Callable[[], tuple[ToolSpec, ...]] = tuple
        self._index = _Index(())
        self._loaded: dict[str, None] = {}  # names, oldest first

    @property
    def loaded(self) -> tuple[str, ...]:
        """The names of the tools searches loaded, oldest first."""
        with self._lock:
            return tuple(self._loaded)

    def tools(self) -> Sequence[ToolSpec]:
        """The search tool."""
        return (self._spec,)

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        """Run each search: load its best matches and say what they are."""
        out: list[Any] = []
        for call in calls:
            query = call.arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                out.append(ValueError("query must be a non-empty string"))
                continue
            out.append(self._load(query))
        return out

    def search(self, query: str, limit: int | None = None) -> list[ToolSpec]:
        """The tools that best match ``query``, best first, loading none."""
        specs = self._all()
        with self._lock:
            index = self._indexed(specs)
        return index.rank(query, limit or self.max_results)

    def bind(self, specs: Callable[[], tuple[ToolSpec, ...]]) -> None:
        """Search the tools ``specs()`` returns (the agent's registry calls this)."""
        self._all = specs

    def _indexed(self, specs: tuple[ToolSpec, ...]) -> _Index:
        """The index of ``specs`` but the search tool, built again when the tools
        changed since the last one (registered, or a source's list changed)."""
        others = [s for s in specs if s.name != self._spec.name]
        indexed = self._index.specs
        if len(others) != len(indexed) or any(
            a is not b for a, b in zip(others, indexed, strict=True)
        ):
            self._index = _Index(others)
        return self._index

    def select_specs(self, specs: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        """The declarations a request carries, out of all the agent's ``specs``."""
        with self._lock:
            self._indexed(specs)
            if len(specs) - 1 <= self.max_visible:
                return tuple(s for s in specs if s.name != self._spec.name)
            by_name = {s.name: s for s in specs}
            names = [self._spec.name, *self.pinned, *self._loaded]
        return tuple(by_name[n] for n in dict.fromkeys(names) if n in by_name)

    def _load(self, query: str) -> str:
        hits = self.search(query)
        if not hits:
            return f"No tool matches {query!r}; try other words."
        with self._lock:
            for spec in hits:
                self._loaded.pop(spec.name, None)
                self._loaded[spec.name] = None
            while len(self._loaded) > self.max_visible:
                del self._loaded[next(iter(self._loaded))]
        lines = [f"- {s.name}: {s.description}".rstrip(": ") for s in hits]
        return "Loaded these tools; call them from your next step:\n" + "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"ToolSearch(max_visible={self.max_visible}, "
            f"max_results={self.max_results}, loaded={len(self._loaded)})"
        )


publish(globals())
