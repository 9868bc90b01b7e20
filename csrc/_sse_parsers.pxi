# OpenAIChatParser and AnthropicParser: a fast path over _sse_fast.pxi for the common
# chunks, then the generic orjson path, written line for line like navi_core/_sse_py.py.


cdef inline bint _nonempty(_Str* s) noexcept nogil:
    return s.end > s.start


cdef class OpenAIChatParser(_Framer):
    """Chat-completions stream (``data: {chunk}`` ... ``data: [DONE]``) to deltas."""

    cdef str _model
    cdef bytes _model_raw  # the JSON text _model was last read from by the fast path
    cdef set _tools

    def __cinit__(self, *args, **kwargs):
        self._model = ""
        self._model_raw = b""
        self._tools = set()

    cdef int _dispatch(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        if n == 6 and memcmp(p, b"[DONE]", 6) == 0:
            out.append(_DONE_DELTA)
            self._stopped = True
            return 0
        if self._fast(p, n, out):
            return 0
        data = PyBytes_FromStringAndSize(<const char*>p, n)
        obj = _loads(data, self._data_offset)
        try:
            self._chunk_obj(obj, out)
        except (AttributeError, KeyError, TypeError) as exc:
            raise _shape_error(data, self._data_offset) from exc
        return 0

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Emit the deltas of a plain content chunk; False when orjson must decide."""
        cdef _OpenAIChunk c
        cdef Py_ssize_t size
        memset(&c, 0, sizeof(c))
        if _openai_chunk(p, n, &c) < 0:
            return False
        if c.model_st == 2 and _nonempty(&c.model):
            size = c.model.end - c.model.start
            if size != PyBytes_GET_SIZE(self._model_raw) or memcmp(
                p + c.model.start, PyBytes_AS_STRING(self._model_raw), size
            ):  # not the text seen last: decode it (an escaped twin may still be equal)
                model = _text(p, &c.model)
                self._model_raw = PyBytes_FromStringAndSize(
                    <const char*>p + c.model.start, size
                )
                if model != self._model:
                    self._model = model
                    out.append((_MODEL, model))
        if c.reasoning_content_st == 2 and _nonempty(&c.reasoning_content):
            out.append((_THINKING, _text(p, &c.reasoning_content)))
        elif c.reasoning_st == 2 and _nonempty(&c.reasoning):
            out.append((_THINKING, _text(p, &c.reasoning)))
        if c.content_st == 2 and _nonempty(&c.content):
            out.append((_TEXT, _text(p, &c.content)))
        if c.refusal_st == 2 and _nonempty(&c.refusal):
            out.append((_TEXT, _text(p, &c.refusal)))
        if c.call_st:
            index = c.call_index if c.call_index_st == 2 else 0
            if index not in self._tools:
                self._tools.add(index)
                call_id = _text(p, &c.call_id) if c.call_id_st == 2 else ""
                name = _text(p, &c.call_name) if c.call_name_st == 2 else ""
                out.append((_TOOL_START, index, call_id, name))
            if c.call_args_st == 2 and _nonempty(&c.call_args):
                out.append((_TOOL_ARGS, index, _text(p, &c.call_args)))
        if c.finish_st == 2:
            out.append((_FINISH, _text(p, &c.finish)))
        return True

    cdef int _chunk_obj(self, dict obj, list out) except -1:
        error = obj.get("error")
        if error is not None:
            if type(error) is str:
                out.append((_ERROR, "error", error))
                return 0
            kind = error.get("type") or error.get("code") or "error"
            out.append((_ERROR, str(kind), str(error.get("message") or "")))
            return 0
        model = obj.get("model")
        if model and model != self._model:
            self._model = _str(model)
            self._model_raw = b""
            out.append((_MODEL, model))
        choices = obj.get("choices")
        if choices:
            for choice in choices:
                index = choice.get("index")
                if index is None or index == 0:
                    self._choice(choice, out)
                    break
        usage = obj.get("usage")
        if usage is not None:
            prompt = _int(usage.get("prompt_tokens"))
            details = usage.get("prompt_tokens_details")
            cached = _int(details.get("cached_tokens")) if details else 0
            details = usage.get("completion_tokens_details")
            reasoning = _int(details.get("reasoning_tokens")) if details else 0
            output = _int(usage.get("completion_tokens"))
            out.append((_USAGE, max(prompt - cached, 0), output, cached, 0, reasoning))
        return 0

    cdef int _choice(self, choice, list out) except -1:
        delta = choice.get("delta")
        if delta:
            text = delta.get("reasoning_content") or delta.get("reasoning")
            if text:
                out.append((_THINKING, _str(text)))
            text = delta.get("content")
            if text:
                out.append((_TEXT, _str(text)))
            text = delta.get("refusal")
            if text:
                out.append((_TEXT, _str(text)))
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            out.append((_FINISH, _str(reason)))
        return 0

    cdef int _tool_calls(self, calls, list out) except -1:
        cdef set tools = self._tools
        for position, call in enumerate(calls):
            index = call.get("index")
            index = position if index is None else _int(index)
            function = call.get("function") or {}
            if index not in tools:
                tools.add(index)
                call_id = _str(call.get("id") or "")
                name = _str(function.get("name") or "")
                out.append((_TOOL_START, index, call_id, name))
            args = function.get("arguments")
            if args:
                if type(args) is dict:
                    args = orjson.dumps(args).decode()
                out.append((_TOOL_ARGS, index, _str(args)))
        return 0


cdef class AnthropicParser(_Framer):
    """Anthropic Messages stream to deltas, dispatching on each payload's ``type``."""

    cdef dict _blocks  # content block index -> tool ordinal
    cdef Py_ssize_t _tools
    cdef list _usage  # input, output, cache_read, cache_write

    def __cinit__(self, *args, **kwargs):
        self._blocks = {}
        self._usage = [0, 0, 0, 0]

    cdef int _dispatch(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        if self._fast(p, n, out):
            return 0
        data = PyBytes_FromStringAndSize(<const char*>p, n)
        obj = _loads(data, self._data_offset)
        try:
            self._message(obj, out)
        except (AttributeError, KeyError, TypeError) as exc:
            raise _shape_error(data, self._data_offset) from exc
        return 0

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Emit a content_block_delta (or skip a ping); False when orjson must decide."""
        cdef _AnthropicEvent e
        cdef str text
        memset(&e, 0, sizeof(e))
        if _anthropic_event(p, n, &e) < 0 or e.type_st != 2:
            return False
        # The types are compared as raw bytes: an escaped one ("text\u005fdelta") may
        # still mean one of them, so orjson decides.
        if e.type.flags & _ESCAPED:
            return False
        if e.delta_type_st == 2 and e.delta_type.flags & _ESCAPED:
            return False
        if _is(p, &e.type, b"ping", 4) or _is(p, &e.type, b"content_block_stop", 18):
            return True
        if not _is(p, &e.type, b"content_block_delta", 19) or not e.delta_st:
            return False
        if e.delta_type_st != 2:  # no delta type: nothing to emit
            return True
        if _is(p, &e.delta_type, b"text_delta", 10):
            if e.text_st != 2:
                return False
            if _nonempty(&e.text):
                out.append((_TEXT, _text(p, &e.text)))
        elif _is(p, &e.delta_type, b"input_json_delta", 16):
            if e.partial_json_st != 2 or not e.index_st:
                return False
            ordinal = self._blocks.get(e.index)
            if ordinal is not None and _nonempty(&e.partial_json):
                out.append((_TOOL_ARGS, ordinal, _text(p, &e.partial_json)))
        elif _is(p, &e.delta_type, b"thinking_delta", 14):
            if e.thinking_st != 2:
                return False
            if _nonempty(&e.thinking):
                out.append((_THINKING, _text(p, &e.thinking)))
        elif _is(p, &e.delta_type, b"signature_delta", 15):
            if e.signature_st != 2:
                return False
            out.append((_SIGNATURE, _text(p, &e.signature)))
        return True

    cdef int _message(self, dict obj, list out) except -1:
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj["delta"]
            kind = delta.get("type")
            if kind == "text_delta":
                text = _str(delta.get("text"))
                if text:
                    out.append((_TEXT, text))
            elif kind == "input_json_delta":
                ordinal = self._blocks.get(obj.get("index"))
                text = _str(delta.get("partial_json"))
                if ordinal is not None and text:
                    out.append((_TOOL_ARGS, ordinal, text))
            elif kind == "thinking_delta":
                text = _str(delta.get("thinking"))
                if text:
                    out.append((_THINKING, text))
            elif kind == "signature_delta":
                out.append((_SIGNATURE, _str(delta.get("signature"))))
        elif kind == "content_block_start":
            self._block_start(obj.get("index"), obj["content_block"], out)
        elif kind == "message_start":
            message = obj["message"]
            model = message.get("model")
            if model:
                out.append((_MODEL, _str(model)))
            self._add_usage(message.get("usage") or {}, out)
        elif kind == "message_delta":
            reason = (obj.get("delta") or {}).get("stop_reason")
            if reason is not None:
                out.append((_FINISH, _str(reason)))
            usage = obj.get("usage")
            if usage is not None:
                self._add_usage(usage, out)
        elif kind == "message_stop":
            out.append(_DONE_DELTA)
        elif kind == "error":
            error = obj.get("error") or {}
            kind = error.get("type") or "error"
            out.append((_ERROR, str(kind), str(error.get("message") or "")))
        return 0

    cdef int _block_start(self, index, block, list out) except -1:
        kind = block.get("type")
        if kind == "text":
            text = _str(block.get("text") or "")
            if text:
                out.append((_TEXT, text))
        elif kind == "tool_use":
            ordinal = self._tools
            self._tools += 1
            self._blocks[index] = ordinal
            out.append((_TOOL_START, ordinal, _str(block["id"]), _str(block["name"])))
            args = block.get("input")
            if args:
                if type(args) is not dict:
                    raise TypeError("tool_use input is not an object")
                out.append((_TOOL_ARGS, ordinal, orjson.dumps(args).decode()))
        elif kind == "thinking":
            text = _str(block.get("thinking") or "")
            if text:
                out.append((_THINKING, text))
            signature = _str(block.get("signature") or "")
            if signature:
                out.append((_SIGNATURE, signature))
        elif kind == "redacted_thinking":
            out.append((_REDACTED_THINKING, _str(block.get("data"))))
        return 0

    cdef int _add_usage(self, usage, list out) except -1:
        cdef list totals = self._usage
        for slot, key in enumerate(_ANTHROPIC_USAGE):
            value = usage.get(key)
            if value is not None:
                totals[slot] = _int(value)
        out.append((_USAGE, totals[0], totals[1], totals[2], totals[3], 0))
        return 0
