/*
 * Writing back what a member could not read.
 *
 * A disk that cannot read a sector answers MEDIUM ERROR, UNRECOVERED
 * READ ERROR, and has lost that sector's data until it is written again
 * (it then remaps it).  A host READ over such a sector is served from the
 * other members (array.c, array_unreadable()); left at that, the unit
 * stays unreadable, and the next box lost turns it into data loss.  So,
 * as Linux md does, the units of the read's stripes on that position are
 * rebuilt from the others and written back to it: a REBUILD span of the
 * position per stripe, queued ahead of every waiting span, so that no
 * write can come between the read that found the error and the repair.
 * A write that fails there fails the member (as any failed WRITE does).
 * The same goes for a write's read-modify-write and a check, before they
 * are planned again.
 *
 * Why a span per stripe: which stripe of a span the error was in is not
 * known, and a repair of a stripe whose position was fine reads the
 * others, where another unreadable unit may lie.  That one is written
 * back first (a repair's repair), and the repair goes on.  A stripe with
 * more units unreadable or missing than the level gives back cannot be
 * repaired: those blocks are lost until written, what needs them fails
 * with MEDIUM ERROR, and no member is failed for them.
 *
 * A disk that keeps losing sectors is failing: past READ_ERRORS_MAX read
 * errors to repair, halved for each hour without one (md's
 * max_read_errors and its decay), it is replaced by a ready spare while
 * it serves (replace.c, as md replaces a device that wants replacement),
 * or without one failed and the array rebuilds it.  Errors that cannot be
 * repaired (the stripe lacks another unit: array.c, array_unreadable())
 * do not count: hosts read a lost block again and again, and failing the
 * member for it would lose what it still holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"

#define READ_ERRORS_MAX 20
#define READ_ERRORS_REPLACING_MAX (4 * READ_ERRORS_MAX)

/* Counts a read error of @m that is to be repaired; false once it has had
 * too many, which fails it - unless a spare can be copied into its
 * position meanwhile (replace_failing()): it then serves on, its errors
 * repaired, until the spare takes over, and the array keeps its
 * redundancy throughout instead of running degraded for a rebuild. */
static bool read_repair_count(struct tpt_array *a, struct tpt_member *m)
{
	time_t now = tpt_now_s();
	time_t hours = m->read_errors ? (now - m->read_error_at) / 3600 : 0;
	char why[64];

	m->read_errors = hours >= 32 ? 0 : m->read_errors >> hours;
	m->read_error_at = now;
	if (++m->read_errors <= READ_ERRORS_MAX)
		return true;
	snprintf(why, sizeof(why), "had %u read errors within the hour",
		 m->read_errors);
	/* One that errs on nearly everything is failed all the same: the
	 * spare then takes its position over (replace.c). */
	if (m->read_errors <= READ_ERRORS_REPLACING_MAX &&
	    replace_failing(a, m, why))
		return true;
	eprintf("tptraid: member %u (%s): %u read errors within the hour: "
		"failing it\n", m->id, m->url, m->read_errors);
	array_member_error(a, m, "too many read errors");
	return false;
}

static void repair_done(struct tpt_span *s, int result)
{
	struct tpt_array *a = s->array;

	if (!result) {
		pthread_mutex_lock(&a->counters_lock);
		a->counters.medium_repairs++;
		pthread_mutex_unlock(&a->counters_lock);
	} else if (result != -ECANCELED) {
		/* Its box lost meanwhile: the recovery writes the unit. */
		eprintf("tptraid: position %u: stripe %" PRIu64 " not "
			"written back after a read error: %s\n", s->member,
			s->first_stripe, strerror(-result));
	}
	free(s);
}

void read_repair_queue(struct tpt_array *a, const struct tpt_span *from,
		       uint32_t positions)
{
	struct tpt_member *m;
	unsigned int p;

	for (p = 0; p < a->nr_members; p++) {
		uint64_t st;

		if (!(positions & (1u << p)))
			continue;
		m = array_position_member(a, p);
		if (!m || !read_repair_count(a, m))
			continue;
		eprintf("tptraid: position %u could not read for stripes %"
			PRIu64 "-%" PRIu64 ": writing its units there back from "
			"the other members\n", p, from->first_stripe,
			from->last_stripe);
		/* Last first: each goes ahead of the waiting spans. */
		for (st = from->last_stripe + 1; st-- > from->first_stripe;) {
			struct tpt_span *s;

			s = array_background_span(a, TPT_SPAN_REBUILD, p, st, 1,
						  repair_done);
			if (!s) {
				eprintf("tptraid: position %u: no memory to "
					"write back stripe %" PRIu64 " after a "
					"read error\n", p, st);
				break;
			}
			s->repair = from->repair + 1;
			array_queue_span_first(a, s);
		}
	}
}
