/* golden_check.h - checking a loaded model against a golden directory:
 * prompt token ids exactly, logits at every prompt position and along the
 * greedy continuation within a tolerance, the continuation's text. */
#ifndef LOOM_TEST_GOLDEN_CHECK_H
#define LOOM_TEST_GOLDEN_CHECK_H

#include <loom.h>

/* Every prompt of golden/<golden_dir> on m (Check assertions); prints one
 * line per prompt with the largest differences, tagged with label. */
void golden_check_model(loom_model *m, const char *golden_dir, float tol, const char *label);

#endif
