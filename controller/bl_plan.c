/*
 * Baseline plans and their builder (controller/bl_plan.h).
 */
#include "controller/bl_plan.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int bl_plan_begin(struct bl_plan_builder *b, const struct bl_plan_ctx *c,
		  uint64_t lba, uint32_t blocks, struct bl_plan *out)
{
	uint64_t array_blocks;

	memset(out, 0, sizeof(*out));
	memset(b, 0, sizeof(*b));
	if (!c->geo || !c->level || !c->block_size ||
	    raid_geometry_check(c->level, c->geo))
		return -EINVAL;
	/* A unit must fit a command's byte count. */
	if ((uint64_t)c->geo->unit_blocks * c->block_size > UINT32_MAX)
		return -EINVAL;
	array_blocks = c->level->array_blocks(c->geo);
	if (!blocks || lba > array_blocks || blocks > array_blocks - lba)
		return -EINVAL;
	b->c = c;
	b->p = out;
	return 0;
}

int bl_plan_add_temp(struct bl_plan_builder *b, uint32_t bytes)
{
	struct bl_plan *p = b->p;

	if (p->nr_temps == b->cap_temps) {
		unsigned int cap = b->cap_temps ? 2 * b->cap_temps : 8;
		uint32_t *t;

		if (b->cap_temps > INT_MAX / 2)
			return -ENOMEM;
		t = realloc(p->temp_bytes, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		p->temp_bytes = t;
		b->cap_temps = cap;
	}
	p->temp_bytes[p->nr_temps] = bytes;
	return (int)p->nr_temps++;
}

int bl_plan_add(struct bl_plan_builder *b, unsigned int step,
		const struct bl_cmd *cmd)
{
	struct bl_plan *p = b->p;

	if (p->nr_cmds == b->cap_cmds) {
		unsigned int cap = b->cap_cmds ? 2 * b->cap_cmds : 16;
		struct bl_cmd *cmds;
		unsigned int *steps;

		if (b->cap_cmds > UINT_MAX / 2)
			return -ENOMEM;
		cmds = realloc(p->cmds, cap * sizeof(*cmds));
		if (!cmds)
			return -ENOMEM;
		p->cmds = cmds;
		steps = realloc(b->cmd_step, cap * sizeof(*steps));
		if (!steps)
			return -ENOMEM;
		b->cmd_step = steps;
		b->cap_cmds = cap;
	}
	if (step > b->last_step)
		b->last_step = step;
	b->cmd_step[p->nr_cmds] = step;
	p->cmds[p->nr_cmds++] = *cmd;
	return 0;
}

void bl_plan_abandon(struct bl_plan_builder *b)
{
	free(b->cmd_step);
	b->cmd_step = NULL;
	bl_plan_free(b->p);
}

/* Stable: within a step, local operations keep the order they were added
 * in, which is the order they must run in. */
int bl_plan_finish(struct bl_plan_builder *b)
{
	struct bl_plan *p = b->p;
	unsigned int nr_steps = b->last_step + 1, i;
	struct bl_cmd *sorted;

	p->steps = calloc(nr_steps, sizeof(*p->steps));
	sorted = malloc((p->nr_cmds ? p->nr_cmds : 1) * sizeof(*sorted));
	if (!p->steps || !sorted) {
		free(sorted);
		bl_plan_abandon(b);
		return -ENOMEM;
	}
	p->nr_steps = nr_steps;
	for (i = 0; i < p->nr_cmds; i++)
		p->steps[b->cmd_step[i]].nr_cmds++;
	for (i = 1; i < nr_steps; i++)
		p->steps[i].first_cmd = p->steps[i - 1].first_cmd +
					p->steps[i - 1].nr_cmds;
	for (i = 0; i < nr_steps; i++)
		p->steps[i].nr_cmds = 0;
	for (i = 0; i < p->nr_cmds; i++) {
		struct bl_step *st = &p->steps[b->cmd_step[i]];

		sorted[st->first_cmd + st->nr_cmds++] = p->cmds[i];
	}
	free(p->cmds);
	p->cmds = sorted;
	free(b->cmd_step);
	b->cmd_step = NULL;
	return 0;
}

void bl_plan_free(struct bl_plan *p)
{
	free(p->cmds);
	free(p->steps);
	free(p->temp_bytes);
	memset(p, 0, sizeof(*p));
}

void bl_plan_count(const struct bl_plan *p, struct bl_plan_counts *out)
{
	unsigned int i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < p->nr_cmds; i++) {
		const struct bl_cmd *cmd = &p->cmds[i];

		switch (cmd->op) {
		case BL_READ:
			out->commands++;
			out->member_in += cmd->bytes;
			break;
		case BL_WRITE:
			out->commands++;
			out->member_out += cmd->bytes;
			break;
		case BL_XOR:
			out->xored += cmd->bytes;
			break;
		case BL_COPY:
			break;
		}
	}
}
