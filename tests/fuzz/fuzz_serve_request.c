/* fuzz_serve_request.c - `loom serve`'s request bodies (apps/serve's
 * parser, linked in) on arbitrary bytes, for a small real model. The first
 * byte picks the endpoint; the rest is the body. A refused body gets the
 * error reply the server would send. */
#include "fuzz_support.h"
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>

static serve_server server;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	loom_runtime *rt = fuzz_runtime();
	const char *path = fuzz_data_path("models/stories260K-f32.gguf");
	if (loom_model_load(rt, path, NULL, &server.model) != LOOM_OK) {
		fprintf(stderr, "fuzz: %s: %s\n", path, loom_last_error());
		abort();
	}
	server.n_vocab = loom_model_n_vocab(server.model);
	server.n_embd = loom_model_n_embd(server.model);
	server.n_ctx = 256;
	server.n_batch = 64;
	/* response_format's grammars, compiled and kept as the server does. */
	if ((server.grammars = serve_grammars_new()) == NULL)
		abort();
	return 0;
}

static void reply_error(char *err, const char *param)
{
	free(serve_reply_error(err != NULL ? err : "", "invalid_request_error", param, NULL));
	free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	char *err = NULL, *reply = NULL;
	const char *param = NULL;
	int endpoint = data[0] % 5;

	if (endpoint <= SERVE_EMBEDDING) {
		serve_request *r = serve_request_new((serve_kind)endpoint);
		if (r == NULL)
			abort();
		int st = endpoint == SERVE_EMBEDDING ? serve_parse_embedding(&server, body, len, r, &err, &param)
						      : serve_parse_completion(&server, body, len, (serve_kind)endpoint,
									       r, &err, &param);
		if (st != 0)
			reply_error(err, param);
		serve_request_unref(r);
		return 0;
	}
	int st = endpoint == 3 ? serve_parse_tokenize(&server, body, len, &reply, &err)
			       : serve_parse_detokenize(&server, body, len, &reply, &err);
	if (st != 0)
		reply_error(err, NULL);
	free(reply);
	return 0;
}
