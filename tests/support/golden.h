/* golden.h - llama.cpp reference data from ../shared/golden, in one shape
 * whichever of its two layouts a case comes from. */
#ifndef LOOM_TEST_GOLDEN_H
#define LOOM_TEST_GOLDEN_H

#include <loom.h>

#include <stdbool.h>

typedef struct golden_case {
	char id[128];          /* "stories260K-f32/once_upon_a_time" */
	char *prompt;
	loom_token *tokens;    /* prompt tokens, add_special = true */
	int n_tokens;
	int n_vocab;
	float *logits;         /* [n_tokens][n_vocab]: row p after tokens[0..p] */
	loom_token *greedy;    /* greedy continuation, one token per decode */
	int n_greedy;
	float *greedy_logit;   /* logit of greedy[i] when it was chosen */
	float *greedy_gap;     /* top-1 minus top-2 logit at step i */
	char *greedy_text;     /* concatenated pieces (NULL where not recorded) */
	int first_eog;         /* index of the first end-of-generation token, -1 */
} golden_case;

/* Loads golden/<dir>/<prompt>.json and its logits; false (with a message
 * on stderr) if any part is missing or malformed. */
bool golden_load(const char *dir, const char *prompt, golden_case *out);
void golden_free(golden_case *g);

/* Prompt ids of a golden directory: "once_upon_a_time", ... or "once", "fox". */
int golden_prompt_ids(const char *dir, const char ***ids);

#endif
