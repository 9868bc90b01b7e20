# The compiled twin of navi_core/_gil_py.py (where the GIL goes around a call that
# may block), which says why. The socket calls are made with the GIL held
# (they cannot block: MSG_DONTWAIT, a zero poll), so a read that finds data waiting
# costs no thread switch; where they are not POSIX (Windows) they are the twin's.
# hand_off lets the GIL go before it gives the other thread its wake-up.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.exc cimport PyErr_CheckSignals, PyErr_SetFromErrno
from cpython.pythread cimport (
    PY_LOCK_ACQUIRED,
    PY_LOCK_INTR,
    PyLockStatus,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from libc.math cimport ceil

from threading import TIMEOUT_MAX as _TIMEOUT_MAX
from time import monotonic as _monotonic

from navi_core import _gil_py as _sio

cdef extern from *:
    """
    #if defined(_WIN32)
    #  define NAVI_SOCKIO 0
    static PyObject *navi_recv_now(int fd, Py_ssize_t n) { Py_RETURN_NONE; }
    static Py_ssize_t navi_send_now(int fd, const char *b, Py_ssize_t n) { return -2; }
    static int navi_poll_in(int fd) { return -2; }
    #else
    #  include <errno.h>
    #  include <poll.h>
    #  include <sys/socket.h>
    #  define NAVI_SOCKIO 1
    #  ifndef MSG_NOSIGNAL
    #    define MSG_NOSIGNAL 0
    #  endif
    /* the bytes waiting, None when there are none (EAGAIN, EINTR), NULL: failed */
    static PyObject *navi_recv_now(int fd, Py_ssize_t n) {
        PyObject *data = PyBytes_FromStringAndSize(NULL, n);
        if (data == NULL) return NULL;
        ssize_t r = recv(fd, PyBytes_AS_STRING(data), (size_t)n, MSG_DONTWAIT);
        if (r < 0) {
            int e = errno;
            Py_DECREF(data);
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) Py_RETURN_NONE;
            errno = e;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (r != n && _PyBytes_Resize(&data, (Py_ssize_t)r) < 0) return NULL;
        return data;
    }
    /* -1: nothing now (EAGAIN, EINTR), -2: failed (errno set), else the count */
    static Py_ssize_t navi_send_now(int fd, const char *buf, Py_ssize_t n) {
        ssize_t r = send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r >= 0) return (Py_ssize_t)r;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return -1;
        return -2;
    }
    /* 1: a read would not wait, 0: it would */
    static int navi_poll_in(int fd) {
        struct pollfd p;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        int r = poll(&p, 1, 0);
        return r != 0;  /* an error (EINTR, ENOMEM): readable, as the twin says */
    }
    #endif
    """
    int NAVI_SOCKIO
    object navi_recv_now(int fd, Py_ssize_t n)
    Py_ssize_t navi_send_now(int fd, const char *buf, Py_ssize_t n)
    int navi_poll_in(int fd)


cdef extern from "pythread.h":
    PyLockStatus PyThread_acquire_lock_timed(
        PyThread_type_lock lock, long long microseconds, int intr_flag
    ) nogil


def recv_ready(sock, Py_ssize_t size):
    """Up to ``size`` bytes already waiting on ``sock`` (``b""`` at end of stream),
    or None when none are: a read that would have to wait is not made.

    Raises:
        OSError: the connection failed (reset, or the socket is closed).
    """
    if not NAVI_SOCKIO:
        return _sio.recv_ready(sock, size)
    if size < 0:
        raise ValueError("negative buffersize in recv")
    if size == 0:  # as socket.recv: no system call
        return b""
    return navi_recv_now(sock.fileno(), size)


def send_ready(sock, data):
    """Send what of ``data`` the socket takes now; the count sent (0: none).

    Raises:
        OSError: the connection failed (reset, or the peer closed it).
    """
    if not NAVI_SOCKIO:
        return _sio.send_ready(sock, data)
    cdef int fd = sock.fileno()
    cdef Py_buffer view
    cdef Py_ssize_t n
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len == 0:
            return 0
        n = navi_send_now(fd, <const char*>view.buf, view.len)
        if n == -2:
            PyErr_SetFromErrno(OSError)
    finally:
        PyBuffer_Release(&view)
    return 0 if n == -1 else n


def readable(sock):
    """True when a read of ``sock`` would not wait: data, end of stream or an error is
    waiting (as ``select`` reports it)."""
    if not NAVI_SOCKIO:
        return _sio.readable(sock)
    cdef int fd = sock.fileno()
    if fd < 0:
        return True
    return navi_poll_in(fd) != 0


cdef class Signal:
    """A wake-up that one thread waits for and any thread gives: a binary semaphore.

    Gives that come before a wait are one (the wait returns at once, the next one
    waits); a give that comes while the waiter is waking is part of that wake. So a
    waiter looks again at what it waits for after every wake, and a giver makes what
    it gives visible (appends it to a queue) before it gives.
    """

    # C fields, not seen from Python: the lock is held while not given; given is read
    # and set with the GIL held, which guards it
    cdef PyThread_type_lock lock
    cdef bint given

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()
        PyThread_acquire_lock_timed(self.lock, 0, 0)
        self.given = False

    def __dealloc__(self):
        if self.lock != NULL:
            if not self.given:
                PyThread_release_lock(self.lock)
            PyThread_free_lock(self.lock)

    def give(self):
        """Wake the waiter, or the next wait when none is waiting (any thread)."""
        if not self.given:
            self.given = True
            PyThread_release_lock(self.lock)

    def wait(self, timeout=None):
        """Wait for a give, at most ``timeout`` seconds (None: for ever); False when
        the time ran out. Interruptible as a lock's ``acquire`` is (Ctrl-C).

        Raises:
            ValueError: ``timeout`` is negative or NaN.
            OverflowError: ``timeout`` is over ``threading.TIMEOUT_MAX``.
        """
        return _wait(None, self, timeout)


cdef long long _microseconds(double seconds):
    return <long long>ceil(seconds * 1e6)


cdef bint _wait(Signal give, Signal wait, object timeout) except -1:
    """Give ``give`` with the GIL let go, then wait for ``wait``: the thread the give
    wakes finds the GIL free. A wait already given returns at once, with the GIL."""
    cdef double seconds = -1.0, deadline = 0.0
    cdef long long us = -1
    cdef PyLockStatus status
    cdef PyThread_type_lock mine = wait.lock
    cdef PyThread_type_lock theirs = NULL
    if timeout is not None:
        seconds = timeout
        if not seconds >= 0:  # also NaN
            raise ValueError("timeout must be None or a number of seconds from 0")
        if seconds > _TIMEOUT_MAX:
            raise OverflowError("timeout value is too large")
        us = _microseconds(seconds)
        deadline = _monotonic() + seconds
    if give is not None and not give.given:
        give.given = True
        theirs = give.lock
    if PyThread_acquire_lock_timed(mine, 0, 0) == PY_LOCK_ACQUIRED:
        status = PY_LOCK_ACQUIRED
        if theirs != NULL:
            PyThread_release_lock(theirs)
    else:
        while True:
            with nogil:
                if theirs != NULL:
                    PyThread_release_lock(theirs)
                    theirs = NULL
                status = PyThread_acquire_lock_timed(mine, us, 1)
            if status != PY_LOCK_INTR:
                break
            PyErr_CheckSignals()  # raises what a handler raised (KeyboardInterrupt)
            if us > 0:
                seconds = deadline - _monotonic()
                if seconds <= 0:
                    status = PyThread_acquire_lock_timed(mine, 0, 0)
                    break
                us = _microseconds(seconds)
    if status == PY_LOCK_ACQUIRED:
        wait.given = False
        return True
    return False


def hand_off(Signal give, Signal wait not None, timeout=None):
    """Give ``give`` (unless None), then wait for ``wait`` as ``Signal.wait`` does
    (a bad ``timeout`` is refused before the give).

    Raises:
        ValueError: ``timeout`` is negative or NaN.
        OverflowError: ``timeout`` is over ``threading.TIMEOUT_MAX``.
    """
    return _wait(give, wait, timeout)
