# cython: language_level=3, embedsignature=True
"""Compiled core of navi_core: SSE framing, provider delta parsing, token estimate, base64.

The twin ``navi_core/_core_py.py`` gives identical results; see it for the reference.
"""

include "_sse.pxi"
include "_text.pxi"
