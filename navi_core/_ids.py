"""Identities: random ids for sessions and turns, and the public path of public names.

Every turn makes one and a ``NullStore`` session another, so an id costs no system
call: ``os.urandom`` gives the GIL away, and while many streams share a process each
give-away is a thread switch. An id is instead BLAKE2b, keyed with 32 bytes of
``os.urandom`` per process, of a counter: unpredictable to anyone without the key (a
keyed hash of distinct inputs is a pseudorandom function) and never repeated within a
process. A forked child takes a new key, so it repeats none of its parent's ids.

``publish`` gives the public classes and functions of a module the module
``navi_core``, so reprs, docs, tracebacks and pickles show ``navi_core.X``; each module
that defines public names calls it at its end, and so does ``navi_core``'s lazy
``__getattr__`` for what it loads.
"""

from __future__ import annotations

import builtins
import itertools
import os
import sys
from collections import ChainMap
from collections.abc import Mapping
from types import CodeType, FunctionType
from typing import Any

__all__ = ["new_id", "publish"]

_key = os.urandom(32)
_count = itertools.count()  # next() on it is atomic under the GIL
_blake2b: Any = None  # hashlib.blake2b, imported on first use


def _rekey() -> None:
    global _key, _count
    _key = os.urandom(32)
    _count = itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rekey)


def new_id() -> str:
    """32 hex digits, shaped as ``uuid.uuid4().hex`` gives (version 4, RFC 4122
    variant), made without a ``UUID`` object or a system call."""
    global _blake2b
    blake2b = _blake2b
    if blake2b is None:  # on first use: a module that only publishes needs no hashlib
        from hashlib import blake2b

        _blake2b = blake2b
    b = bytearray(
        blake2b(next(_count).to_bytes(16, "little"), key=_key, digest_size=16).digest()
    )
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return b.hex()


#: classes whose annotations name a public class not defined yet (its module is being
#: imported further up the stack): resolved again at each later ``publish``
_waiting: list[tuple[type, str]] = []  # (class, the module that defines it)
_codes: dict[str, CodeType] = {}  # the same annotation strings recur: compile once
_UNRESOLVED = object()


def publish(namespace: Mapping[str, Any]) -> None:
    """Give each public class and function in ``namespace`` the module ``navi_core``.

    ``typing.get_type_hints`` evaluates a class's string annotations (``from
    __future__ import annotations``) in the namespace of ``sys.modules[cls.__module__]``,
    and pydantic a dataclass's ``Field.type`` there; once that is ``navi_core``, whose
    names load on first use, the names a module imports for its annotations would be
    missing. So each class's annotations are evaluated first, where it is defined (the
    class, its module, the builtins, then the public names, loaded through
    ``navi_core``'s ``__getattr__`` for those its module imports under
    ``TYPE_CHECKING`` only); one naming a public class whose module is still being
    imported is evaluated again when that module publishes. A name that is not public
    and not in its module stays the string it was. A dataclass's own fields get the
    same objects as their ``type``. A public name that ``namespace`` imports from a
    module that does not call ``publish`` is published too; one from a module that
    does is left to it (it may still be running).
    """
    here = namespace.get("__name__")
    for name in sys.modules["navi_core"].__all__:
        obj = namespace.get(name)
        if not isinstance(obj, (type, FunctionType)) or obj.__module__ == "navi_core":
            continue
        home = sys.modules[obj.__module__]
        if obj.__module__ != here and vars(home).get("publish") is publish:
            continue  # its own module publishes it when that module is done
        if isinstance(obj, type) and not _resolve(obj, obj.__module__):
            _waiting.append((obj, obj.__module__))
        obj.__module__ = "navi_core"
    for entry in list(_waiting):
        if entry in _waiting:
            _waiting.remove(entry)  # out while resolving: a nested publish skips it
            if not _resolve(*entry):
                _waiting.append(entry)


def _resolve(cls: type, module: str) -> bool:
    """Evaluate the string annotations of ``cls`` (defined in ``module``) in place;
    False when one names a public class that cannot be loaded yet."""
    annotations = vars(cls).get("__annotations__")
    if not annotations or not any(isinstance(v, str) for v in annotations.values()):
        return True
    scope = vars(sys.modules[module])
    here = vars(cls)
    done = True
    resolved = {}
    for name, value in annotations.items():
        if isinstance(value, str):
            value = _evaluate(value, scope, here)
            if value is _UNRESOLVED:
                done = False
                value = annotations[name]
        resolved[name] = value
    cls.__annotations__ = resolved
    fields = here.get("__dataclass_fields__", {})
    for name, value in resolved.items():
        if name in fields and not isinstance(value, str):
            fields[name].type = value  # this class's own field
    return done


def _evaluate(text: str, scope: dict[str, Any], here: Mapping[str, Any]) -> Any:
    """The object ``text`` names, ``text`` itself when it cannot, ``_UNRESOLVED`` when
    it names a public class that cannot be loaded yet."""
    for names in (here, scope, vars(builtins)):  # most are one name: no eval
        if text in names:
            return names[text]
    code = _codes.get(text)
    if code is None:
        try:
            code = _codes[text] = compile(text, "<annotation>", "eval")
        except SyntaxError:
            return text
    loaded: dict[str, Any] = {}
    while True:
        try:
            return eval(code, scope, ChainMap(here, loaded))  # type: ignore[arg-type]
        except NameError as exc:
            missing = exc.name
            if missing is None or missing in loaded:
                return text
            package = sys.modules["navi_core"]
            if missing not in package.__all__:
                return text  # a private name its module imports for type checkers
            try:
                loaded[missing] = getattr(package, missing)
            except (AttributeError, ImportError):
                return _UNRESOLVED  # its module is being imported further up
        except Exception:
            return text
