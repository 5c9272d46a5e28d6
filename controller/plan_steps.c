/*
 * Plan building blocks shared by the TPT and Baseline plans
 * (controller/plan_steps.h).
 */
#include "controller/plan_steps.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int plan_grow(void **array, unsigned int nr, unsigned int *cap, size_t size)
{
	unsigned int n;
	void *p;

	if (nr < *cap)
		return 0;
	if (*cap > UINT_MAX / 2)
		return -ENOMEM;
	n = *cap ? 2 * *cap : 16;
	if (n > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*array, n * size);
	if (!p)
		return -ENOMEM;
	*array = p;
	*cap = n;
	return 0;
}

int plan_sort_steps(void **array, unsigned int nr, size_t size,
		    const unsigned int *step_of, unsigned int *nr_steps,
		    struct plan_step **steps)
{
	unsigned int n = *nr_steps, i, kept = 0;
	unsigned int *renum;
	struct plan_step *st;
	char *sorted;

	st = calloc(n ? n : 1, sizeof(*st));
	renum = calloc(n ? n : 1, sizeof(*renum));
	sorted = malloc(nr ? (size_t)nr * size : 1);
	if (!st || !renum || !sorted) {
		free(st);
		free(renum);
		free(sorted);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++)
		st[step_of[i]].nr_cmds++;
	/* A step nothing landed in orders nothing: drop it. */
	for (i = 0; i < n; i++) {
		renum[i] = kept;
		if (st[i].nr_cmds)
			st[kept++].nr_cmds = st[i].nr_cmds;
	}
	for (i = 1; i < kept; i++)
		st[i].first_cmd = st[i - 1].first_cmd + st[i - 1].nr_cmds;
	/* nr_cmds doubles as the fill count while placing. */
	for (i = 0; i < kept; i++)
		st[i].nr_cmds = 0;
	for (i = 0; i < nr; i++) {
		struct plan_step *s = &st[renum[step_of[i]]];

		memcpy(sorted + (size_t)(s->first_cmd + s->nr_cmds++) * size,
		       (char *)*array + (size_t)i * size, size);
	}
	free(renum);
	free(*array);
	*array = sorted;
	*steps = st;
	*nr_steps = kept;
	return 0;
}
