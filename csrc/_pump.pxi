# The compiled twin of navi_core/_pump_py.py, which documents it: the hot paths of
# Stream.next() and of a response's reads. next_event, next_or_stop and produce are
# plain functions that Stream and DeltaStream take as methods, so both stay plain
# Python objects (an instance of a subclass of an extension type would make every
# attribute access of the phase machine slower); a Reader keeps what a read needs in
# C fields, since every attribute a C function reads from a Python object costs a
# type lookup and a dict lookup.

from navi_core.errors import ProviderError as _ProviderError
from navi_core.events import ModelInfo as _ModelInfo

cdef object _LATER = object()  # _quick: the phase machine has to run


def next_event(self, timeout=None):
    """Advance the turn until it has an event, and return it.

    Args:
        timeout: seconds to wait at most; None blocks until there is an event.
    Returns:
        The next event; ``PENDING`` when ``timeout`` passed first; None only
        after ``TurnComplete`` was returned.
    Raises:
        NaviError: the turn failed (after any events queued before the failure);
        StreamPoisoned on every later call, with the failure as ``__cause__``.
    """
    cdef object ev = _quick(self, timeout is None)
    return self._advance(timeout) if ev is _LATER else ev


def next_or_stop(self):
    """``next()`` for iteration: StopIteration after ``TurnComplete``."""
    cdef object ev = _quick(self, True)
    if ev is _LATER:
        ev = self._advance(None)
    if ev is None:
        raise StopIteration
    return ev


cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()


_BUSY = (
    "Stream.next() is running on another thread: drive a stream from one thread at "
    "a time (cancel() and close() may come from any thread)"
)


cdef inline object _quick(object self, bint read):
    cdef object queue = self._queue
    cdef Reader reader = <Reader>self._reader
    if reader.driver != 0 and reader.driver != PyThread_get_thread_ident():
        raise RuntimeError(_BUSY)
    if reader.response is not None:
        if queue:
            if reader.ready():
                return reader.take()
        elif read and reader.read(self):
            return reader.take()
    elif (
        queue
        and not self._observers.subscriptions
        and type(queue[0]) is not _ModelInfo
    ):
        return queue.popleft()
    return _LATER


cdef class Reader:
    """A turn's reader of its open response (``Stream._reader``), and the turn's
    close handshake, built from exactly what it reads (see the twin)."""

    cdef object _queue, _ctl, _observers, _on_ended, _push, _pop, _batches
    cdef Assembler _core
    cdef bint _direct
    cdef Py_ssize_t _stop, _op, _deadline, _subscriptions
    cdef public bint closing, close_pending
    cdef public unsigned long driver
    cdef readonly object response

    def __init__(self, queue, ctl, observers, on_ended):
        self._queue = queue
        self._ctl = ctl
        self._observers = observers
        self._on_ended = on_ended
        self._push = queue.append
        self._pop = queue.popleft
        self.closing = False
        self.close_pending = False
        self.driver = 0
        self.response = None
        self._direct = False
        self._stop = _slot_offset(type(ctl), "stop")
        self._op = _slot_offset(type(ctl), "op")
        self._deadline = _slot_offset(type(ctl), "deadline")
        self._subscriptions = _slot_offset(type(observers), "subscriptions")

    def arm(self, response):
        """Read ``response`` from now on (see the twin)."""
        self.response = response
        self._direct = (
            getattr(type(response), "produce", None) is produce
            and type(response.core) is Assembler
        )
        if self._direct:
            self._batches = response.batches
            self._core = response.core

    def disarm(self):
        """Nothing to read any more."""
        self.response = None
        self._batches = None
        self._core = None
        self._direct = False

    def release(self):
        """The turn ended: let go of ``on_ended`` (a cycle through the stream)."""
        self.disarm()
        self._on_ended = None

    def enter(self):
        """The calling thread drives the turn; False (and it does not) when a close
        from another thread runs."""
        return self._enter()

    def leave(self, stream):
        """The driving thread leaves: wake a waiting close, run one it asked for."""
        self._leave(stream)

    cdef inline bint _enter(self) except -1:
        cdef unsigned long me = PyThread_get_thread_ident()
        if self.driver != 0 and self.driver != me:
            raise RuntimeError(_BUSY)
        self.driver = me
        if self.closing:
            self.driver = 0
            return False
        return True

    cdef inline int _leave(self, object stream) except -1:
        self.driver = 0
        if self.closing:
            self._ctl.wake()
        if self.close_pending:
            self.close_pending = False
            stream.close()
        return 0

    cdef bint read(self, object stream) except -1:
        cdef object ctl = self._ctl
        if not (
            _is_none(ctl, self._stop, "stop")
            and _is_none(ctl, self._op, "op")
            and _is_none(ctl, self._deadline, "deadline")
        ):
            return False
        if not self._enter():
            return False
        cdef object response = self.response
        cdef object on_ended = self._on_ended
        try:
            if self.pump():
                on_ended(response, None)
        except BaseException as exc:
            on_ended(response, exc)
        self._leave(stream)
        return bool(self._queue) and self.ready()

    cdef inline object take(self):
        """The first queued event, taken off the queue."""
        return self._pop()

    cdef bint ready(self) except -1:
        """Whether the first queued event can be handed out as it is: not a
        ``ModelInfo`` (deduplicated) and no subscriber (published) to see it."""
        return type(self._queue[0]) is not _ModelInfo and not _get(
            self._observers, self._subscriptions, "subscriptions"
        )

    cpdef bint pump(self) except -1:
        """Read until the response pushes an event or a stop is asked for (False), or
        until it completes (True)."""
        cdef object response = self.response
        cdef object queue = self._queue
        cdef object ctl = self._ctl
        if not self._direct:
            while not response.produce(queue):
                if queue or not _is_none(ctl, self._stop, "stop"):
                    return False
            return True
        cdef object clean
        try:
            while not _read_batch(self._batches, self._core, self._push, response):
                if queue or not _is_none(ctl, self._stop, "stop"):
                    return False
        except _ProviderError as exc:
            clean = response.scrubbed(exc)
            if clean is exc:
                raise
        else:
            response.finish(queue)
            return True
        # raised outside the handler: the unredacted original is not its context
        raise clean


cdef inline object _get(object obj, Py_ssize_t offset, str name):
    cdef PyObject* value
    if offset >= 0:
        value = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
        if value is not NULL:
            return <object>value
    return getattr(obj, name)


cdef inline bint _is_none(object obj, Py_ssize_t offset, str name) except -1:
    cdef PyObject* value
    if offset >= 0:
        value = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
        if value is not NULL:
            return value == <PyObject*>None
    return getattr(obj, name) is None


def produce(self, queue):
    """Push the events of the next batch; True once the message is complete.

    Raises:
        MalformedStream: the batches ran out before the terminator.
        ProviderError: whatever the batches raised, as the response's ``scrubbed``
            returns it (redacted and clipped for an HTTP response).
    """
    if self._complete:
        return True
    cdef object clean
    try:
        if _read_batch(self.batches, self.core, queue.append, self):
            self.finish(queue)
        return self._complete
    except _ProviderError as exc:
        clean = self.scrubbed(exc)
        if clean is exc:
            raise
    # raised outside the handler: the unredacted original is not its context
    raise clean


cdef bint _read_batch(
    object batches, Assembler core, object push, object response
) except -1:
    cdef object batch
    try:
        batch = next(batches)
    except StopIteration:
        raise response.ended() from None
    if batch:
        try:
            core.feed(batch, push)
        except ValueError as exc:
            raise response.malformed(exc) from None
    return core.done
