/*
 * write_family_model.c - writes one of the tests' family models
 * (support/family_models.h) and prints its prompt, for
 * make_references.sh to hand both to another implementation.
 *
 *     write_family_model NAME OUT.gguf     prints the prompt's ids
 *     write_family_model --list            prints every model's name and
 *                                          what computes its reference
 */
#include "family_models.h"
#include "fixture.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		int n;
		const family_model *all = family_models(&n);
		for (int i = 0; i < n; i++)
			printf("%s %s\n", all[i].name, all[i].reference);
		return 0;
	}
	const family_model *f = argc == 3 ? family_model_named(argv[1]) : NULL;
	if (f == NULL) {
		fprintf(stderr, "usage: %s NAME OUT.gguf | --list\n", argv[0]);
		return 2;
	}
	/* Only a model with a quantization scheme needs loom itself. */
	loom_runtime *rt = NULL;
	if (f->scheme != NULL) {
		loom_runtime_params p = loom_runtime_default_params();
		p.plugins_file = test_plugins_file();
		p.backend = "cpu-generic";
		p.log_level = LOOM_LOG_ERROR;
		if (loom_runtime_create(&p, &rt) != LOOM_OK) {
			fprintf(stderr, "runtime: %s\n", loom_last_error());
			return 1;
		}
	}
	bool ok = family_model_write(rt, f, argv[2]);
	if (!ok)
		fprintf(stderr, "cannot write %s: %s\n", argv[2], f->scheme != NULL ? loom_last_error() : "");
	loom_runtime_free(rt);
	if (!ok)
		return 1;
	for (int i = 0; i < FAMILY_PROMPT_LEN; i++)
		printf("%s%d", i ? " " : "", family_prompt[i]);
	printf("\n");
	return 0;
}
