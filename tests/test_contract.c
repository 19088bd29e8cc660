/*
 * test_contract.c - architecture contracts (arch/NAME.yaml).
 *
 * The shipped llama contract must read back as the choices and names it
 * states. Broken contracts are a small valid one with one edit each; every
 * one must be LOOM_ERR_CONTRACT with the file and the line to look at,
 * unknown keys included (a contract is never read loosely). Finally a real
 * model is loaded through a contract in a directory of the test's own, and
 * a misspelled tensor name in it must fail the load naming that tensor.
 */
#include "check_main.h"
#include "contract.h"
#include "fixture.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LLAMA_YAML LOOM_TEST_SOURCE_DIR "/arch/llama.yaml"

/* The smallest complete contract: defaults left to the code where it has
 * them, every tensor the block needs. */
static const char tiny_yaml[] =
	"name: tiny\n"
	"block:\n"
	"  norm: rmsnorm\n"
	"  ffn: swiglu\n"
	"  positions: rope\n"
	"hparams:\n"
	"  gguf:\n"
	"    n_embd: \"{arch}.embedding_length\"\n"
	"    n_layer: \"{arch}.block_count\"\n"
	"    n_ff: \"{arch}.feed_forward_length\"\n"
	"    n_head: \"{arch}.attention.head_count\"\n"
	"defaults:\n"
	"  norm_eps: 1.0e-5\n"
	"tensors:\n"
	"  gguf:\n"
	"    token_embd: token_embd.weight\n"
	"    output_norm: output_norm.weight\n"
	"    output: output.weight\n"
	"    attn_norm: blk.{i}.attn_norm.weight\n"
	"    attn_q: blk.{i}.attn_q.weight\n"
	"    attn_k: blk.{i}.attn_k.weight\n"
	"    attn_v: blk.{i}.attn_v.weight\n"
	"    attn_output: blk.{i}.attn_output.weight\n"
	"    ffn_norm: blk.{i}.ffn_norm.weight\n"
	"    ffn_gate: blk.{i}.ffn_gate.weight\n"
	"    ffn_up: blk.{i}.ffn_up.weight\n"
	"    ffn_down: blk.{i}.ffn_down.weight\n";

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* A fresh temporary directory for test name, copied into buf. */
static const char *tmp_dir(char *buf, size_t size, const char *name)
{
	const char *dir = test_tmp_dir(name);
	ck_assert_msg(dir != NULL, "cannot make a temporary directory for %s", name);
	snprintf(buf, size, "%s", dir);
	return buf;
}

static const char *write_file(char *buf, size_t size, const char *dir, const char *name,
			      const char *text)
{
	snprintf(buf, size, "%s/%s", dir, name);
	FILE *f = fopen(buf, "w");
	ck_assert_msg(f != NULL, "cannot create %s", buf);
	ck_assert_msg(fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", buf);
	return buf;
}

/* text with its first `from` replaced by `to`, into out. */
static const char *edit(char *out, size_t size, const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	ck_assert_msg(at != NULL, "\"%s\" is not in the text to edit", from);
	int n = snprintf(out, size, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	ck_assert_msg(n >= 0 && (size_t)n < size, "the edited text does not fit");
	return out;
}

/* 1-based line of the first occurrence of needle in text. */
static int line_of(const char *text, const char *needle)
{
	const char *at = strstr(text, needle);
	ck_assert_msg(at != NULL, "\"%s\" is not in the text", needle);
	int line = 1;
	for (const char *p = text; p < at; p++)
		line += *p == '\n';
	return line;
}

static void expect_in(const char *err, const char *needle)
{
	ck_assert_msg(needle == NULL || strstr(err, needle) != NULL, "\"%s\" is not in the error: %s",
		      needle, err);
}

static loom_contract *load_ok(const char *path)
{
	loom_contract *c = NULL;
	loom_status st = loom_contract_load(path, &c);
	ck_assert_msg(st == LOOM_OK, "%s: %s", path, loom_last_error());
	ck_assert_ptr_nonnull(c);
	return c;
}
