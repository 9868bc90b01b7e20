# C-only fast path, no Python twin: the table loop behind b64encode (csrc/_text.pxi;
# the Python twin calls binascii).
#
# Each 3-byte group becomes two loads from a 4096-entry table of character pairs; on
# little-endian hosts a C loop takes 12 bytes at a time with two 8-byte big-endian loads
# and two 8-byte stores. b64encode writes straight into a new ASCII str, with the GIL
# released for large inputs.

from libc.stdint cimport uint16_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__GNUC__) || defined(__clang__)
    #  define NAVI_BSWAP64 __builtin_bswap64
    #  if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #    define NAVI_LITTLE_ENDIAN 1
    #  endif
    #elif defined(_MSC_VER)
    #  include <stdlib.h>
    #  define NAVI_BSWAP64 _byteswap_uint64
    #  define NAVI_LITTLE_ENDIAN 1
    #endif
    #ifndef NAVI_LITTLE_ENDIAN
    #  define NAVI_LITTLE_ENDIAN 0
    #endif

    /* Encodes 12-byte blocks of src while 16 bytes remain (two 8-byte big-endian
       loads, each giving two 3-byte groups, four pair lookups and one 8-byte store);
       returns the bytes consumed. On other hosts it consumes nothing: the caller's
       loop does. */
    static Py_ssize_t navi_b64_blocks(const unsigned char *src, Py_ssize_t n,
                                      char *dst, const uint16_t *pairs) {
        Py_ssize_t i = 0;
    #if NAVI_LITTLE_ENDIAN
        uint64_t w, x, o, p;
        for (; i + 16 <= n; i += 12, dst += 16) {
            memcpy(&w, src + i, 8);
            memcpy(&x, src + i + 6, 8);
            w = NAVI_BSWAP64(w);
            x = NAVI_BSWAP64(x);
            o = (uint64_t)pairs[(w >> 52) & 0xFFF]
                | (uint64_t)pairs[(w >> 40) & 0xFFF] << 16
                | (uint64_t)pairs[(w >> 28) & 0xFFF] << 32
                | (uint64_t)pairs[(w >> 16) & 0xFFF] << 48;
            p = (uint64_t)pairs[(x >> 52) & 0xFFF]
                | (uint64_t)pairs[(x >> 40) & 0xFFF] << 16
                | (uint64_t)pairs[(x >> 28) & 0xFFF] << 32
                | (uint64_t)pairs[(x >> 16) & 0xFFF] << 48;
            memcpy(dst, &o, 8);
            memcpy(dst + 8, &p, 8);
        }
    #endif
        return i;
    }
    """
    Py_ssize_t navi_b64_blocks(
        const unsigned char* src, Py_ssize_t n, char* dst, const uint16_t* pairs
    ) noexcept nogil

cdef char* _b64_alphabet = (
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)
# _b64_pairs[v] holds the two characters of the 12-bit value v, in memory order
cdef uint16_t _b64_pairs[4096]


cdef int _b64_load() except -1:
    cdef char* chars = <char*>_b64_pairs
    for i in range(4096):
        chars[2 * i] = _b64_alphabet[i >> 6]
        chars[2 * i + 1] = _b64_alphabet[i & 63]
    return 0


_b64_load()


cdef void _b64_encode(const unsigned char* src, Py_ssize_t n, char* dst) noexcept nogil:
    cdef Py_ssize_t i = navi_b64_blocks(src, n, dst, _b64_pairs)
    cdef unsigned int v
    dst += i // 3 * 4
    while i + 3 <= n:
        v = (<unsigned int>src[i] << 16) | (<unsigned int>src[i + 1] << 8) | src[i + 2]
        memcpy(dst, &_b64_pairs[v >> 12], 2)
        memcpy(dst + 2, &_b64_pairs[v & 0xFFF], 2)
        i += 3
        dst += 4
    if n - i == 1:
        v = <unsigned int>src[i] << 16
        memcpy(dst, &_b64_pairs[v >> 12], 2)
        dst[2] = c"="
        dst[3] = c"="
    elif n - i == 2:
        v = (<unsigned int>src[i] << 16) | (<unsigned int>src[i + 1] << 8)
        memcpy(dst, &_b64_pairs[v >> 12], 2)
        dst[2] = _b64_alphabet[(v >> 6) & 63]
        dst[3] = c"="
