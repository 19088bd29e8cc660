/*
 * cuda_on_host.h - what the cuda backend's arithmetic headers use of CUDA,
 * given its documented meanings on the host, so that a test can run their
 * device functions without a GPU (test_cuda_vecdot.cpp,
 * test_cuda_dequant.cpp, test_cuda_mma_tile.cpp): the qualifiers, fp16
 * through the test suites' reference conversion, the bit casts, and the
 * integer intrinsics __dp4a, __vsub4 and __byte_perm. Include it before the header under test; it keeps
 * cuda_backend.cuh (the CUDA runtime's headers) out.
 */
#ifndef LOOM_TEST_CUDA_ON_HOST_H
#define LOOM_TEST_CUDA_ON_HOST_H

#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" {
#include "cpu_ref.h"
}

#define __device__
#define __host__
#define __forceinline__ inline
#define LOOM_CUDA_BACKEND_CUH

struct __half {
	uint16_t bits;
};

static inline __half __ushort_as_half(uint16_t bits)
{
	return __half{bits};
}

static inline float __half2float(__half h)
{
	return ref_fp16_to_f32(h.bits);
}

static inline __half __float2half_rn(float f)
{
	return __half{ref_f32_to_fp16(f)};
}

static inline uint16_t __half_as_ushort(__half h)
{
	return h.bits;
}

static inline float __uint_as_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float __int_as_float(int i)
{
	float f;
	memcpy(&f, &i, sizeof(f));
	return f;
}

static inline uint32_t __float_as_uint(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* The four signed byte products of a and b, summed, plus c. */
static inline int __dp4a(int a, int b, int c)
{
	for (int i = 0; i < 4; i++)
		c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
	return c;
}

/* Byte-wise a - b, each byte wrapping on its own. */
static inline unsigned __vsub4(unsigned a, unsigned b)
{
	unsigned r = 0;
	for (int i = 0; i < 4; i++)
		r |= (((a >> (8 * i)) - (b >> (8 * i))) & 0xffu) << (8 * i);
	return r;
}

/* Byte n of the result: byte (s >> 4n) & 7 of y:x (x the low four). */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
	uint64_t v = (uint64_t)y << 32 | x;
	unsigned r = 0;
	for (int n = 0; n < 4; n++)
		r |= (unsigned)(v >> (8 * ((s >> (4 * n)) & 7)) & 0xff) << (8 * n);
	return r;
}

#endif
