/*
 * op_runner.h - running an op_case on a backend plugin and checking what
 * comes back.
 *
 * A case runs twice, each time as a one-node graph: on the backend's first
 * instance (1 thread) with packed rows, and on its second (2 threads) with
 * rows OP_ROW_PAD bytes apart, as views into a fused QKV are. Every tensor
 * sits in its buffer between OP_GUARD sentinel bytes, which, like the
 * padding, must come back untouched. A deterministic backend must give
 * both runs the same bytes.
 */
#ifndef LOOM_TEST_OP_RUNNER_H
#define LOOM_TEST_OP_RUNNER_H

#include "op_case.h"

/* 256 keeps a tensor as aligned as its buffer; 12 keeps f32 alignment and
 * breaks vector alignment. */
#define OP_GUARD 256
#define OP_ROW_PAD 12
#define OP_SENTINEL 0xa5

typedef struct op_backend {
	char name[64];
	const loom_backend_vtable *vt;
	void *be[2];        /* run 0's instance (1 thread) and run 1's (2 threads) */
	bool deterministic; /* the two runs must agree bit for bit */
} op_backend;

/* A host tensor placed in a backend buffer. */
typedef struct dtensor {
	loom_buffer buf;
	loom_tensor t;
	size_t stride;
} dtensor;

/* The layout weight_repack gave the last case that asked for it (0: kept). */
extern uint32_t op_last_repack_layout;

/* h in a new buffer of instance be, rows pad bytes apart, guarded. */
void op_place(const op_backend *b, void *be, const htensor *h, size_t pad, dtensor *d);
/* Reads d's rows back packed into out (if not NULL) and checks every byte
 * around them. */
void op_fetch(const op_backend *b, void *be, const dtensor *d, const htensor *h, void *out, const char *what);

/* Whether the backend's supports() takes the case (packed rows). */
bool op_supported(const op_backend *b, const op_case *c);
/* Run k (0 or 1) of the case, rows pad bytes apart; dst lands in out. */
void op_run(const op_backend *b, int k, const op_case *c, size_t pad, void *out);
/* Both runs; out[k] gets run k's dst, packed (malloc'd). For a
 * deterministic backend out[1] is NULL (its bytes were out[0]'s). */
void op_outputs(const op_backend *b, const op_case *c, void *out[2]);
/* Run 0 alone, packed (malloc'd): for checks that compare two cases. */
void *op_exercise(const op_backend *b, const op_case *c);

/* got (an F32 dst) is finite and sum (got - ref)^2 / sum norm2 <= tol,
 * norm2 being each output's squared size (NULL: ref^2). */
void op_check_close(const op_backend *b, const op_case *c, const float *got, const double *ref, const double *norm2,
		    double tol);
/* got's bytes are want's; with any_nan16, an fp16 NaN matches any NaN. */
void op_check_bytes(const op_backend *b, const op_case *c, const void *got, const void *want, bool any_nan16);

/* Both runs, each checked as above. */
void op_expect_close(const op_backend *b, const op_case *c, const double *ref, const double *norm2, double tol);
void op_expect_bytes(const op_backend *b, const op_case *c, const void *want, bool any_nan16);

#endif
