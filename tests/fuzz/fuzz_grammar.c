/* fuzz_grammar.c - grammars from request bodies: the first byte picks
 * GBNF text or a JSON Schema, the rest is that text; what compiles is then
 * followed through the same bytes (and a piece of them cut in two), as a
 * matcher would follow a model's output, a byte it refuses taken as the
 * token of that id (<[id]>) where the grammar has one next. */
#include "fuzz_support.h"
#include "grammar/grammar.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *text = (const char *)data + 1;
	const size_t len = size - 1;
	loom_grammar *g = NULL;
	loom_status st = data[0] & 1 ? loom_grammar_from_json_schema(text, len, &g) : loom_grammar_parse(text, len, NULL, &g);
	if (st != LOOM_OK)
		return 0;
	loom_gr_matcher m;
	if (loom_gr_matcher_init(&m, g) == LOOM_OK) {
		/* The bytes one at a time, then the start again in two steps. */
		for (size_t i = 0; i < len && (loom_gr_matcher_accept(&m, (const unsigned char *)text + i, 1) ||
					       loom_gr_matcher_accept_token(&m, (unsigned char)text[i]));
		     i++)
			(void)loom_gr_can_end(m.state);
		loom_gr_matcher_reset(&m);
		const size_t half = len / 2;
		if (loom_gr_matcher_allows(&m, (const unsigned char *)text, half))
			loom_gr_matcher_accept(&m, (const unsigned char *)text + half, len - half);
		loom_gr_matcher_free(&m);
	}
	loom_grammar_free(g);
	return 0;
}
