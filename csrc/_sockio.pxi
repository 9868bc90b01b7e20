# Socket calls that never wait: the compiled twin of navi_core/_sockio_py.py, which
# says why. These make the system call with the GIL held (it cannot block: MSG_DONTWAIT,
# a zero poll), so a read that finds data waiting costs no thread switch. Where the
# calls are not POSIX (Windows) they are the twin's.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.exc cimport PyErr_SetFromErrno

from navi_core import _sockio_py as _sio

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
