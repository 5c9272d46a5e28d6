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
		    const unsigned int *step_of, unsigned int nr_steps,
		    struct plan_step **steps)
{
	struct plan_step *st;
	unsigned int i;
	char *sorted;

	st = calloc(nr_steps ? nr_steps : 1, sizeof(*st));
	sorted = malloc(nr ? (size_t)nr * size : 1);
	if (!st || !sorted) {
		free(st);
		free(sorted);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++)
		st[step_of[i]].nr_cmds++;
	for (i = 1; i < nr_steps; i++)
		st[i].first_cmd = st[i - 1].first_cmd + st[i - 1].nr_cmds;
	/* nr_cmds doubles as the fill count while placing. */
	for (i = 0; i < nr_steps; i++)
		st[i].nr_cmds = 0;
	for (i = 0; i < nr; i++) {
		struct plan_step *s = &st[step_of[i]];

		memcpy(sorted + (size_t)(s->first_cmd + s->nr_cmds++) * size,
		       (char *)*array + (size_t)i * size, size);
	}
	free(*array);
	*array = sorted;
	*steps = st;
	return 0;
}
