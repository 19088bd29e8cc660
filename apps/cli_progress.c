/* cli_progress.c - what quantize and convert show while they work: on a
 * terminal, one line redrawn after each tensor (tensor i of n, bytes,
 * elapsed time); with -v, a line per tensor; otherwise (a log, a pipe)
 * nothing until the summary. */
#include "cli.h"

#include <unistd.h>

void cli_progress_start(cli_progress *p, bool verbose)
{
	p->t0 = cli_now_ms();
	p->verbose = verbose;
	p->terminal = isatty(STDERR_FILENO) == 1;
	p->drawn = false;
}

void cli_progress_show(void *user, const loom_convert_progress *pr)
{
	cli_progress *p = user;
	const double mib = 1 << 20;
	if (p->verbose) {
		fprintf(stderr, "[%4zu/%4zu] %-40s -> %s\n", pr->index + 1, pr->count, pr->name,
			loom_dtype_name(pr->type));
		return;
	}
	if (!p->terminal)
		return;
	/* \033[K clears what a longer name left on the line. */
	fprintf(stderr, "\rloom: tensor %zu of %zu, %.1f of %.1f MiB, %.1f s: %s -> %s\033[K", pr->index + 1,
		pr->count, pr->bytes_done / mib, pr->bytes_total / mib, (cli_now_ms() - p->t0) / 1e3, pr->name,
		loom_dtype_name(pr->type));
	fflush(stderr);
	p->drawn = true;
}

void cli_progress_end(cli_progress *p)
{
	if (p->drawn)
		fputc('\n', stderr);
	p->drawn = false;
}
