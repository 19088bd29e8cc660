/* open.c - opening a model as far as a stage: the file, through the format
 * plugin that recognises it; its architecture and that architecture's
 * contract; the vocabulary; then the hyperparameters, in the contract
 * section that names the format's keys and tensors. */
#include "model/model.h"

#include "model/hparams.h"
#include "model/meta.h"
#include "runtime/error.h"
#include "runtime/format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static loom_status open_file(loom_model *m, const char *path)
{
	if (access(path, R_OK) != 0)
		return loom_error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
	m->format = loom_format_choose(&m->rt->registry, path);
	if (m->format == NULL)
		return LOOM_ERR_BAD_FORMAT;
	loom_status st = loom_format_open(m->format, path, &m->opened);
	m->file = m->opened;
	return st;
}

/* general.architecture; a file without one can still be inspected. */
static loom_status read_architecture(loom_model *m, const char *path, loom_model_stage stage)
{
	loom_string arch;
	if (loom_meta_get_string(m->file, "general.architecture", &arch) == LOOM_OK)
		m->arch = loom_string_dup(arch);
	else if (stage == LOOM_STAGE_CONTRACT)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s: general.architecture is missing", path);
	else
		m->arch = strdup("");
	return m->arch != NULL ? LOOM_OK : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
}

/* The architecture's contract: needed to go past the vocabulary; for the
 * vocabulary alone it is used where there is one. */
static loom_status find_contract(loom_model *m, const char *path, loom_model_stage stage)
{
	if (stage < LOOM_STAGE_CONTRACT && m->arch[0] == '\0')
		return LOOM_OK;
	loom_status st = loom_contract_find(m->arch, m->rt->arch_dirs, m->rt->n_arch_dirs, &m->contract);
	if (st == LOOM_ERR_NOT_FOUND && stage < LOOM_STAGE_CONTRACT) {
		loom_error_clear();
		return LOOM_OK;
	}
	return st == LOOM_OK ? LOOM_OK : loom_error_wrap(st, "%s", path);
}

static loom_status read_vocab(loom_model *m, const char *path)
{
	/* A missing tokenizer key is a defect of the file, like any other. */
	loom_status st = loom_vocab_load(m->file, m->contract != NULL ? &m->contract->tokenizer : NULL, &m->vocab);
	if (st != LOOM_OK)
		return loom_error_wrap(st == LOOM_ERR_NOT_FOUND ? LOOM_ERR_BAD_FORMAT : st, "%s: vocabulary", path);
	m->chat_template = loom_chat_template_resolve(m, &m->chat_template_source);
	return LOOM_OK;
}

/* The contract section that names the format's keys and tensors, as the
 * format plugin declares it; the contract must describe the block. */
static loom_status choose_section(loom_model *m)
{
	if (!m->contract->has_block)
		return loom_error(LOOM_ERR_UNSUPPORTED, "%s describes only %s's tokenizer: its models can be tokenized, not run",
				  m->contract->path, m->contract->name);
	const char *section = loom_format_contract_section(m->format);
	if (section == NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "format %s names no contract section: its files can be inspected, not run",
				  m->format->name);
	int fmt = loom_contract_format_index(section);
	if (fmt < 0 || m->contract->tensor_names[fmt][LOOM_ROLE_TOKEN_EMBD] == NULL)
		return loom_error(LOOM_ERR_CONTRACT, "%s does not describe %s files", m->contract->path, section);
	m->fmt = fmt;
	m->rope_style = m->contract->rope_style[fmt];
	return LOOM_OK;
}

static loom_status open_to(loom_model *m, const char *path, loom_model_stage stage)
{
	loom_status st = open_file(m, path);
	if (st == LOOM_OK)
		st = read_architecture(m, path, stage);
	if (st != LOOM_OK || stage == LOOM_STAGE_METADATA)
		return st;
	if ((st = find_contract(m, path, stage)) != LOOM_OK)
		return st;
	if (stage == LOOM_STAGE_CONTRACT && (st = choose_section(m)) != LOOM_OK)
		return loom_error_wrap(st, "%s (contract %s)", path, m->contract->path);
	if ((st = read_vocab(m, path)) != LOOM_OK || stage == LOOM_STAGE_VOCAB)
		return st;
	if ((st = loom_model_read_hparams(m)) != LOOM_OK)
		return loom_error_wrap(st, "%s (contract %s)", path, m->contract->path);
	return LOOM_OK;
}

loom_status loom_model_open(loom_runtime *rt, const char *path, loom_model_stage stage, loom_model **out)
{
	*out = NULL;
	loom_model *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	m->rt = rt;
	pthread_mutex_init(&m->trie_lock, NULL);
	m->path = strdup(path);
	loom_status st = m->path != NULL ? open_to(m, path, stage) : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st != LOOM_OK) {
		loom_model_free(m);
		return st;
	}
	*out = m;
	return LOOM_OK;
}
