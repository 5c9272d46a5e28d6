/*
 * Baseline plans and their builder (controller/bl_plan.h).
 */
#include "controller/bl_plan.h"
#include "controller/plan_steps.h"

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

	if (p->nr_temps >= INT_MAX ||
	    plan_grow((void **)&p->temp_bytes, p->nr_temps, &b->cap_temps,
		      sizeof(*p->temp_bytes)))
		return -ENOMEM;
	p->temp_bytes[p->nr_temps] = bytes;
	return (int)p->nr_temps++;
}

int bl_plan_add(struct bl_plan_builder *b, unsigned int step,
		const struct bl_cmd *cmd)
{
	struct bl_plan *p = b->p;

	/* Two arrays of one length: grow the second first, so that a
	 * failure leaves them the same size. */
	unsigned int cap = b->cap_cmds;

	if (plan_grow((void **)&b->cmd_step, p->nr_cmds, &cap,
		      sizeof(*b->cmd_step)) ||
	    plan_grow((void **)&p->cmds, p->nr_cmds, &b->cap_cmds,
		      sizeof(*p->cmds)))
		return -ENOMEM;
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

int bl_plan_end(struct bl_plan_builder *b, int err)
{
	if (!err)
		return bl_plan_finish(b);
	bl_plan_abandon(b);
	return err;
}

/* Stable: within a step, local operations keep the order they were added
 * in, which is the order they must run in. */
int bl_plan_finish(struct bl_plan_builder *b)
{
	struct bl_plan *p = b->p;
	int err;

	p->nr_steps = b->last_step + 1;
	err = plan_sort_steps((void **)&p->cmds, p->nr_cmds, sizeof(*p->cmds),
			      b->cmd_step, &p->nr_steps, &p->steps);
	if (err) {
		bl_plan_abandon(b);
		return err;
	}
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
			/* A weighted copy multiplies every byte (RAID-6). */
			if (cmd->gf_exp)
				out->xored += cmd->bytes;
			break;
		}
	}
}

int bl_plan_copy(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		 unsigned int from, uint32_t to, struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g ? g->unit_blocks : 0;
	struct bl_cmd rd = { .op = BL_READ }, wr = { .op = BL_WRITE };
	uint64_t per_stripe, blocks;
	struct bl_plan_builder b;
	unsigned int m;
	int err, t;

	memset(out, 0, sizeof(*out));
	if (!g || !c->level || !unit || !raid_stripes_in_range(g, first, nr) ||
	    (uint64_t)nr * unit * c->block_size > UINT32_MAX ||
	    from >= RAID_MAX_MEMBERS || !to || (to & (1u << from)))
		return -EINVAL;
	per_stripe = raid_stripe_data_blocks(c->level, g);
	blocks = (uint64_t)nr * per_stripe;
	err = bl_plan_begin(&b, c, first * per_stripe,
			    (uint32_t)(blocks < UINT32_MAX ? blocks : 0), out);
	if (err)
		return err;
	rd.member = from;
	rd.lba = wr.lba = first * unit;
	rd.bytes = wr.bytes = nr * unit * c->block_size;
	t = bl_plan_add_temp(&b, rd.bytes);
	err = t < 0 ? t : 0;
	if (!err) {
		rd.dst = wr.src = bl_temp((unsigned int)t, 0);
		err = bl_plan_add(&b, 0, &rd);
	}
	for (m = 0; m < RAID_MAX_MEMBERS && !err; m++) {
		if (!(to & (1u << m)))
			continue;
		wr.member = m;
		err = bl_plan_add(&b, 1, &wr);
	}
	return bl_plan_end(&b, err);
}
