// grammar_llamacpp.cpp - llama.cpp's grammar sampler on loom-bench-grammar's
// workload, timed the same way (bench/grammar_table.sh builds and runs it):
//
//   grammar-llamacpp WORKLOAD.jsonl MODEL...
//
// Each line of the workload is a schema and an instance loom takes. The
// schema goes through llama.cpp's json_schema_to_grammar and
// llama_sampler_init_grammar; the instance is cut by the model's tokenizer
// (after an "x", dropped, as loom's bench does), and at every token the
// grammar is applied to that token alone (what common_sampler's
// sample-then-check costs a drawn token) and to the whole vocabulary (the
// mask a refused draw needs), timed apart; then the token is accepted.
// Instances whose tokens llama.cpp's grammar refuses (its object rules put
// required properties first) stop there. Prints the same lines as
// loom-bench-grammar.
#include "json-schema-to-grammar.h"
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

static double now_us()
{
	return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void summary(const char *what, std::vector<double> &v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	if (n == 0) {
		printf("  %-6s      0 tokens\n", what);
		return;
	}
	printf("  %-6s %6zu tokens: p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", what, n, v[n / 2], v[n * 99 / 100],
	       v[n - 1]);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s WORKLOAD.jsonl MODEL...\n", argv[0]);
		return 2;
	}
	std::vector<std::pair<nlohmann::ordered_json, std::string>> work;
	std::ifstream in(argv[1]);
	for (std::string line; std::getline(in, line);) {
		auto j = nlohmann::ordered_json::parse(line);
		work.emplace_back(j["schema"], j["instance"].get<std::string>());
	}
	llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
	llama_backend_init();
	std::vector<double> compile_us;
	std::vector<std::string> grammars(work.size());
	for (size_t i = 0; i < work.size(); i++) {
		double t0 = now_us();
		try {
			grammars[i] = json_schema_to_grammar(work[i].first);
		} catch (const std::exception &) {
			grammars[i].clear();
		}
		compile_us.push_back(now_us() - t0);
	}
	std::sort(compile_us.begin(), compile_us.end());
	printf("%zu schemas to grammars: p50 %.1f us, max %.1f us (llama_sampler_init_grammar's own parse apart)\n",
	       compile_us.size(), compile_us[compile_us.size() / 2], compile_us.back());
	for (int mi = 2; mi < argc; mi++) {
		llama_model_params mp = llama_model_default_params();
		mp.vocab_only = true;
		llama_model *model = llama_model_load_from_file(argv[mi], mp);
		if (model == nullptr) {
			fprintf(stderr, "cannot load %s\n", argv[mi]);
			return 1;
		}
		const llama_vocab *vocab = llama_model_get_vocab(model);
		const int n_vocab = llama_vocab_n_tokens(vocab);
		printf("%s: vocabulary %d\n", argv[mi], n_vocab);
		std::vector<double> check, mask;
		std::vector<llama_token_data> all(n_vocab);
		int refused = 0;
		for (size_t i = 0; i < work.size(); i++) {
			if (grammars[i].empty())
				continue;
			llama_sampler *g = llama_sampler_init_grammar(vocab, grammars[i].c_str(), "root");
			if (g == nullptr)
				continue;
			std::string text = "x" + work[i].second;
			std::vector<llama_token> toks(text.size() + 8);
			int n = llama_tokenize(vocab, text.c_str(), (int32_t)text.size(), toks.data(), (int32_t)toks.size(), false,
					       false);
			toks.resize(n > 0 ? n : 0);
			/* The tokens that make " x" or "x" are the prefix. */
			size_t first = 0;
			std::string prefix;
			while (first < toks.size() && prefix.size() < 2 && prefix != "x") {
				char buf[64];
				int k = llama_token_to_piece(vocab, toks[first++], buf, sizeof(buf), 0, false);
				prefix.append(buf, k > 0 ? k : 0);
			}
			if (prefix != "x" && prefix != " x") {
				llama_sampler_free(g);
				continue;
			}
			for (size_t k = first; k < toks.size(); k++) {
				llama_token_data one = {toks[k], 1.0f, 0.0f};
				llama_token_data_array one_p = {&one, 1, -1, false};
				double a = now_us();
				llama_sampler_apply(g, &one_p);
				double b = now_us();
				for (int t = 0; t < n_vocab; t++)
					all[t] = {t, 0.0f, 0.0f};
				llama_token_data_array all_p = {all.data(), (size_t)n_vocab, -1, false};
				llama_sampler_apply(g, &all_p);
				double e = now_us();
				if (std::isinf(one.logit)) {
					refused++;
					break;
				}
				check.push_back(b - a);
				mask.push_back(e - b);
				llama_sampler_accept(g, toks[k]);
			}
			llama_sampler_free(g);
		}
		summary("check", check);
		summary("mask", mask);
		printf("  (%d instances stopped where llama.cpp's grammar refused a token)\n", refused);
		llama_model_free(model);
	}
	llama_backend_free();
	return 0;
}
