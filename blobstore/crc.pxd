# Types of blobstore/crc.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs. Compiled because every durable
# put and get checksums its record (engine/durable/checked.pxd cimports crc32) and its
# side-log records (blobstore/sidelog.pxd).
cimport cython

cdef unsigned int[::1] _CRC

# The crc32's 16-byte blocks folded with carry-less multiplies (PCLMULQDQ) where the CPU has
# them (x86-64 with PCLMULQDQ and SSE4.1, asked once), as in Intel's "Fast CRC Computation for
# Generic Polynomials Using PCLMULQDQ Instruction" (Gopal et al., 2009) and zlib-ng's, Linux's
# and Chromium zlib's crc32 (its steps are those of Chromium's crc32_sse42_simd_, crc32_simd.c,
# Copyright 2017 The Chromium Authors, under a BSD-style licence:
# https://chromium.googlesource.com/chromium/src/+/main/LICENSE): the running 512 bits are
# four 128-bit lanes; each 64 bytes more multiplies every lane by x^(512+-32) mod P (k1, k2),
# which moves it 512 bits on, and adds the next 64 bytes; then the lanes fold into one (k3,
# k4: 128 bits on), one 16 bytes at a time after, to 64 bits (k5) and a Barrett reduction to
# the 32-bit crc (mu, P). The constants are the paper's for the reflected 0x04C11DB7 (zlib's
# 0xEDB88320), each x^e mod P bit-reflected and times x; tests/test_recovery_check.py holds
# the crc to zlib's. sweepq_crc_fold takes and gives the crc's running state (not inverted):
# n >= 64 and a multiple of 16; crc32 in crc.py runs the table loop over what is left.
# Elsewhere (another CPU, another machine, another compiler) the table loop does it all.
cdef extern from *:
    """
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <immintrin.h>
    static int sweepq_crc_fold_on = -1;  /* -1: not asked yet (a race writes the same answer) */
    static int sweepq_crc_fold_cpu(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    __attribute__((target("pclmul,sse4.1")))
    static unsigned int sweepq_crc_fold(const unsigned char *buf, Py_ssize_t len, unsigned int crc) {
        /* x^e mod P, reflected, times x: k1 e=4*128+32, k2 4*128-32, k3 128+32, k4 128-32,
           k5 64; mu = x^64 / P (33 bits) and P itself, reflected. */
        const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
        const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
        const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
        const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
        const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
        __m128i x1, x2, x3, x4, x5, x6, x7, x8;
        x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
        buf += 64;
        len -= 64;
        while (len >= 64) {  /* four lanes, each 512 bits on */
            x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
            x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
            x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
            x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
            x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
            x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
            x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
            x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
            x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
            x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
            x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
            buf += 64;
            len -= 64;
        }
        /* the four lanes into one: each 128 bits on, plus the next */
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
        while (len >= 16) {  /* the 16-byte blocks left */
            x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
            x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)buf)), x5);
            buf += 16;
            len -= 16;
        }
        /* 128 bits to 64 */
        x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
        x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
        x2 = _mm_srli_si128(x1, 4);
        x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5k0, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        /* Barrett reduction to 32 bits */
        x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
        x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, low32), poly, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        return (unsigned int)_mm_extract_epi32(x1, 1);
    }
    #else
    static int sweepq_crc_fold_on = 0;
    static int sweepq_crc_fold_cpu(void) { return 0; }
    static unsigned int sweepq_crc_fold(const unsigned char *buf, Py_ssize_t len, unsigned int crc) {
        (void)buf; (void)len; return crc;
    }
    #endif
    /* Whether the crc of n bytes folds: 64 bytes or more, on a CPU that can. */
    static inline int sweepq_crc_folds(Py_ssize_t n) {
        if (n < 64) return 0;
        if (__builtin_expect(sweepq_crc_fold_on < 0, 0)) sweepq_crc_fold_on = sweepq_crc_fold_cpu();
        return sweepq_crc_fold_on;
    }
    /* crc_folds(): on < 0 asks, 0 turns the folding off (the tests' table loop), 1 back on
       where the CPU can. Whether it folds now. */
    static int sweepq_crc_fold_set(int on) {
        if (on >= 0 || sweepq_crc_fold_on < 0) sweepq_crc_fold_on = on == 0 ? 0 : sweepq_crc_fold_cpu();
        return sweepq_crc_fold_on;
    }
    """
    bint sweepq_crc_folds(Py_ssize_t n) noexcept nogil
    unsigned int sweepq_crc_fold(const unsigned char *buf, Py_ssize_t len, unsigned int crc) noexcept nogil
    bint sweepq_crc_fold_set(int on) noexcept nogil

@cython.locals(t=cython.p_uint, c=cython.uint, one=cython.uint, two=cython.uint, k=Py_ssize_t)
cdef unsigned int crc32(const unsigned char *p, Py_ssize_t n) noexcept

cpdef unsigned int crc32_at(bytes data, Py_ssize_t start) except? 0
