# cython: language_level=3, embedsignature=True
"""Compiled core of navi_core: SSE framing, delta parsing, token estimate, base64,
tool calls written as text.

The pure twin ``navi_core/_core_py.py`` gives identical results and is the reference.
Each twin include mirrors one of its modules file for file and name for name:
``_framing.pxi`` ↔ ``_framing_py.py``, ``_sse.pxi`` ↔ ``_sse_py.py``,
``_responses.pxi`` ↔ ``_responses_py.py``, ``_text.pxi`` ↔ ``_text_py.py``,
``_assemble.pxi`` ↔ ``_assemble_py.py``, ``_pump.pxi`` ↔ ``_pump_py.py``,
``_gil.pxi`` ↔ ``_gil_py.py``. The ``_fast_*.pxi`` includes are C-only fast
paths with no twin.

The core's public names have one list, the twin's ``__all__``: ``navi_core.core`` takes
them from this module by it, and tests/core/test_selection.py checks they are here.
"""

include "_fast_scan.pxi"
include "_fast_shapes.pxi"
include "_fast_b64.pxi"
include "_framing.pxi"
include "_sse.pxi"
include "_responses.pxi"
include "_text.pxi"
include "_assemble.pxi"
include "_pump.pxi"
include "_gil.pxi"
