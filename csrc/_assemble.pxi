# Response assembly's hot half: the compiled twin of navi_core/_assemble_py.py, which
# documents it. C only: the events of the hot kinds (text, thinking, tool-call
# arguments) are built without a call to their __init__, slots set in place
# (_Maker), which is what a frozen dataclass's __init__ does at a tenth of the cost,
# and untracked by the garbage collector, since they hold only str and int: events
# waiting in a queue are then not walked by every collection.

import secrets as _secrets

from navi_core import _deltas as _kinds

from cpython.ref cimport PyObject

from cpython.list cimport PyList_GET_SIZE

cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    ctypedef struct PyTypeObject:
        pass
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t n)
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    void Py_INCREF(object o)
    void PyObject_GC_UnTrack(void* o)
    bint PyUnicode_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    int Py_T_OBJECT_EX "T_OBJECT_EX"

cdef enum:
    _D_TEXT = 0
    _D_THINKING = 1
    _D_SIGNATURE = 2
    _D_REDACTED = 3
    _D_TOOL_START = 4
    _D_TOOL_ARGS = 5
    _D_FINISH = 6
    _D_USAGE = 7
    _D_MODEL = 8
    _D_ERROR = 9
    _D_DONE = 10
    _D_REASONING_ITEM = 11

cdef enum:
    _B_TEXT = 0
    _B_THINKING = 1
    _B_SEALED_THINKING = 2
    _B_REDACTED = 3
    _B_TOOL = 4

# The kinds are C constants here; their one home is navi_core/_deltas.py, checked.
if (
    _D_TEXT, _D_THINKING, _D_SIGNATURE, _D_REDACTED, _D_TOOL_START, _D_TOOL_ARGS,
    _D_FINISH, _D_USAGE, _D_MODEL, _D_ERROR, _D_DONE, _D_REASONING_ITEM,
    _B_TEXT, _B_THINKING, _B_SEALED_THINKING, _B_REDACTED, _B_TOOL,
) != (
    _kinds.TEXT, _kinds.THINKING, _kinds.SIGNATURE, _kinds.REDACTED_THINKING,
    _kinds.TOOL_START, _kinds.TOOL_ARGS, _kinds.FINISH, _kinds.USAGE, _kinds.MODEL,
    _kinds.ERROR, _kinds.DONE, _kinds.REASONING_ITEM,
    _kinds.BLOCK_TEXT, _kinds.BLOCK_THINKING, _kinds.BLOCK_SEALED_THINKING,
    _kinds.BLOCK_REDACTED, _kinds.BLOCK_TOOL,
):
    raise ImportError("navi_core._deltas kinds differ from the compiled core")

cdef Py_ssize_t _A_RUN = 256


cdef Py_ssize_t _slot_offset(type cls, str name) except -2:
    """The offset of ``cls``'s slot ``name`` in its instances; -1 when ``name`` is not
    a plain object slot (then it is read or set as an attribute)."""
    cdef object member = getattr(cls, name, None)
    if type(member).__name__ == "member_descriptor" and (
        (<PyMemberDescrObject*>member).d_member.type == Py_T_OBJECT_EX
    ):
        return (<PyMemberDescrObject*>member).d_member.offset
    return -1


cdef class _Maker:
    """Builds instances of a slotted class from positional values, slots in place."""

    cdef object cls
    cdef tuple names
    cdef PyTypeObject* tp
    cdef Py_ssize_t offsets[2]

    def __init__(self, cls):
        self.cls = cls
        self.names = tuple(cls.__match_args__)
        self.tp = <PyTypeObject*>cls
        cdef Py_ssize_t i
        for i in range(2):
            self.offsets[i] = (
                _slot_offset(cls, self.names[i]) if i < len(self.names) else -1
            )

    cdef inline _set(self, object ev, Py_ssize_t i, object value):
        cdef Py_ssize_t offset = self.offsets[i]
        if offset < 0:
            PyObject_GenericSetAttr(ev, self.names[i], value)
        else:  # a fresh instance: the slot is empty
            Py_INCREF(value)
            (<PyObject**>((<char*><PyObject*>ev) + offset))[0] = <PyObject*>value

    cdef object one(self, object a):
        cdef object ev = PyType_GenericAlloc(self.tp, 0)
        self._set(ev, 0, a)
        if PyUnicode_CheckExact(a):  # holds no container: can be in no cycle
            PyObject_GC_UnTrack(<PyObject*>ev)
        return ev

    cdef object two(self, object a, object b):
        cdef object ev = PyType_GenericAlloc(self.tp, 0)
        self._set(ev, 0, a)
        self._set(ev, 1, b)
        if PyLong_CheckExact(a) and PyUnicode_CheckExact(b):
            PyObject_GC_UnTrack(<PyObject*>ev)
        return ev


cdef class Assembler:
    """Applies delta tuples in order, pushing one event per visible delta."""

    cdef _Maker _text, _thinking, _args
    cdef object _start, _model, _on_error
    cdef bint _coalesce
    cdef list _blocks
    cdef object _cur
    cdef dict _tools
    cdef public bint done
    cdef public object finish_reason, model, usage

    def __init__(self, events, on_error, coalesce=False):
        if len(events) != 5:
            raise ValueError(
                "events must be 5 classes: text, thinking, start, args, model"
            )
        text, thinking, start, args, model = events
        self._text = _Maker(text)
        self._thinking = _Maker(thinking)
        self._args = _Maker(args)
        self._start = start
        self._model = model
        self._on_error = on_error
        self._coalesce = bool(coalesce)
        self._blocks = []
        self._cur = None
        self._tools = {}
        self.done = False
        self.finish_reason = None
        self.model = None
        self.usage = None

    cpdef feed(self, deltas, push):
        """Apply ``deltas`` in order, calling ``push`` with each event."""
        cdef list run = []
        cdef long run_kind = -1
        cdef object run_index = 0
        cdef long kind
        cdef long block_kind
        cdef tuple d
        cdef object text, cur, index, tool
        for d in deltas:
            kind = d[0]
            if kind == _D_TEXT or kind == _D_THINKING:
                text = d[1]
                if not text:
                    if kind == _D_THINKING:  # a thinking block with no text: its own
                        self._open(_B_THINKING, None)
                    continue
                block_kind = _B_TEXT if kind == _D_TEXT else _B_THINKING
                cur = self._cur
                if cur is None or (<list>cur)[0] != block_kind:
                    cur = self._open(block_kind, None)
                self._add(<list>cur, text)
                if not self._coalesce:
                    if kind == _D_TEXT:
                        push(self._text.one(text))
                    else:
                        push(self._thinking.one(text))
                    continue
                if run_kind != kind:
                    self._flush(run, run_kind, run_index, push)
                    run_kind = kind
                run.append(text)
            elif kind == _D_TOOL_ARGS:
                index = d[1]
                text = d[2]
                tool = self._tools.get(index)
                if tool is None:
                    self._flush(run, run_kind, run_index, push)
                    raise ValueError(
                        f"arguments for tool call {index} before it started"
                    )
                if not text:
                    continue
                self._add(<list>tool, text)
                if not self._coalesce:
                    push(self._args.two(index, text))
                    continue
                if run_kind != kind or run_index != index:
                    self._flush(run, run_kind, run_index, push)
                    run_kind = kind
                    run_index = index
                run.append(text)
            else:
                self._flush(run, run_kind, run_index, push)
                run_kind = -1
                self._other(d, push)
        self._flush(run, run_kind, run_index, push)

    cdef _flush(self, list run, long kind, object index, object push):
        if not run:
            return
        cdef object text = run[0] if len(run) == 1 else "".join(run)
        del run[:]
        if kind == _D_TEXT:
            push(self._text.one(text))
        elif kind == _D_THINKING:
            push(self._thinking.one(text))
        else:
            push(self._args.two(index, text))

    cdef _other(self, tuple d, object push):
        cdef long kind = d[0]
        cdef object cur, index, call_id, name
        if kind == _D_SIGNATURE:
            cur = self._cur
            if cur is None or (
                (<list>cur)[0] != _B_THINKING and (<list>cur)[0] != _B_SEALED_THINKING
            ):
                cur = self._open(_B_THINKING, None)
            (<list>cur)[0] = _B_SEALED_THINKING
            (<list>cur)[2] = ((<list>cur)[2] or "") + d[1]
        elif kind == _D_REASONING_ITEM:
            cur = self._cur
            if cur is None or (<list>cur)[0] != _B_THINKING:
                cur = self._open(_B_THINKING, None)
            (<list>cur)[0] = _B_SEALED_THINKING
            (<list>cur)[2] = d[1]
            self._cur = None
        elif kind == _D_TOOL_START:
            index, call_id, name = d[1], d[2], d[3]
            if index in self._tools:
                return
            call_id = call_id or f"call_{_secrets.token_hex(6)}_{index}"
            self._tools[index] = self._open(_B_TOOL, (call_id, name))
            self._cur = None
            push(self._start(index, call_id, name))
        elif kind == _D_REDACTED:
            self._open(_B_REDACTED, d[1])
            self._cur = None
        elif kind == _D_USAGE:
            self.usage = d[1:]  # the counts, and a flag when they are estimated
        elif kind == _D_FINISH:
            self.finish_reason = d[1]
        elif kind == _D_MODEL:
            if d[1] != self.model:
                self.model = d[1]
                push(self._model(d[1]))
        elif kind == _D_ERROR:
            raise self._on_error(d[1], d[2])
        elif kind == _D_DONE:
            self.done = True

    cdef list _open(self, long kind, object extra):
        cdef list block = [kind, [], extra, 0]
        self._blocks.append(block)
        self._cur = block
        return block

    cdef _add(self, list block, object text):
        cdef list pieces = <list>block[1]
        pieces.append(text)
        cdef Py_ssize_t joined = <Py_ssize_t>block[3]
        if PyList_GET_SIZE(pieces) - joined >= _A_RUN:
            pieces[joined:] = ["".join(pieces[joined:])]
            block[3] = joined + 1

    def shown(self):
        """What was pushed so far: characters of text and of thinking, tool calls."""
        cdef Py_ssize_t text = 0, thinking = 0
        cdef long kind
        cdef list block
        for block in self._blocks:
            kind = block[0]
            if kind == _B_TEXT:
                text += sum(map(len, block[1]))
            elif kind == _B_THINKING or kind == _B_SEALED_THINKING:
                thinking += sum(map(len, block[1]))
        return text, thinking, len(self._tools)

    def blocks(self):
        """Every block so far as ``(kind, text, extra)``."""
        cdef list block
        return [(block[0], "".join(block[1]), block[2]) for block in self._blocks]
