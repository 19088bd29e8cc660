/*
 * family_fixture.h - a family model (family_models.h) written into a test's
 * folder and loaded, and its steps' graphs handed to a test, failing the
 * test where loom does.
 */
#ifndef LOOM_TEST_FAMILY_FIXTURE_H
#define LOOM_TEST_FAMILY_FIXTURE_H

#include "family_models.h"

/* The family model called name, written into the suite's folder dir
 * (family_model_write_tmp) and loaded on rt; the test fails if any of
 * that does. */
loom_model *family_model_load(loom_runtime *rt, const char *name, const char *dir);

/* The family model's one-token step, then (in a fresh cache) its 4-token
 * one, built on cpu-generic (the model written into the test folder dir),
 * each step's graph handed to visit with its token count; the test fails
 * if a step does. */
typedef void (*family_step_visit)(const loom_graph *graph, int n_tokens, void *arg);
void family_model_steps(const char *name, const char *dir, family_step_visit visit, void *arg);

#endif
