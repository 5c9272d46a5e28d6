/*
 * What tgtadm --op show prints under a tptraid LU, in the manner of
 * mdadm --detail: the array's state, each member's, recovery progress,
 * and the counters of the paper's Tables I and II (docs/controller.md,
 * "Watching it").
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "list.h"
#include "tgtd.h"
#include "util.h"
#include "tpt.h"
#include "tpt_controller.h"

/* up, failed, rebuilding, resyncing, spare, replacing, refused or held. */
static const char *member_state(const struct tpt_array *a,
				const struct tpt_member *m)
{
	bool usable = m->link == MEMBER_ONLINE && m->ready && !m->refused;
	const struct tpt_position *pos;

	if (m->refused)
		return "refused";
	if (m->held && m->link == MEMBER_OFFLINE)
		return "held";
	if (m->position < 0 && usable && a->replace.active &&
	    m->id == a->replace.spare)
		return "replacing";
	if (m->position < 0)	/* a dead box whose units went elsewhere */
		return usable ? "spare" : "failed";
	pos = &a->pos[m->position];
	if (!usable || pos->state == TPT_POS_MISSING)
		return "failed";
	if (pos->state == TPT_POS_RECOVERING)
		return pos->catch_up ? "resyncing" : "rebuilding";
	return "up";
}

/* Units a recovery could not rebuild (lost_units.c): how many, and the
 * first few of each position as POSITION:STRIPE. */
static void show_lost(const struct tpt_array *a, struct concat_buf *b)
{
	unsigned int p, i;

	if (!a->nr_lost)
		return;
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID lost units: %u (a host "
		      "write of the whole stripe gives one back):", a->nr_lost);
	for (p = 0; p < a->nr_members; p++)
		for (i = 0; i < a->pos[p].lost.n && i < 16; i++)
			concat_printf(b, " %u:%" PRIu64, p,
				      a->pos[p].lost.v[i]);
	concat_printf(b, "\n");
}

/* The running check's figures so far, else the last check's as it
 * ended, and one stopped that waits to go on; mismatches count
 * stripes. */
static void show_check(const struct tpt_array *a, struct concat_buf *b)
{
	const struct tpt_recovery *rc = &a->recovery;
	const struct tpt_check *k = rc->check ? &rc->checking :
				    &rc->last_check;
	unsigned int p;

	if (!rc->check && rc->check_kept)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID check: waiting "
			      "from_stripe %" PRIu64 " of %" PRIu64
			      " mismatched_stripes %" PRIu64 ", stopped by %s\n",
			      rc->kept_from, a->nr_stripes,
			      rc->kept.mismatches, rc->kept_by);
	if (!rc->check && !k->end[0]) {
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID check: none\n");
		return;
	}
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID check: %s stripes %" PRIu64
		      " of %" PRIu64 " mismatched_stripes %" PRIu64 "%s%s\n",
		      rc->check ? "running" : "last", k->checked, k->total,
		      k->found.mismatches, rc->check ? "" : " ",
		      rc->check ? "" : k->end);
	if (k->found.unreadable)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID check: "
			      "unreadable_stripes %" PRIu64 "\n",
			      k->found.unreadable);
	for (p = 0; p < a->nr_members; p++)
		if (k->found.located[p])
			concat_printf(b, TPT_SHOW_INDENT "TPT-RAID check: "
				      "position %u wrong_units %" PRIu64 "\n",
				      p, k->found.located[p]);
}

void tptraid_show(struct scsi_lu *lu, struct concat_buf *b)
{
	struct tpt_array *a = tptraid_array_of(lu);
	const struct tpt_recovery *rc;
	struct tpt_array_counters st;
	char progress[96];
	unsigned int i;

	if (!a)
		return;
	rc = &a->recovery;
	tpt_array_get_counters(a, &st);
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID: %s mode %s unit %u members "
		      "%u array_id %016" PRIx64 " state %s event %" PRIu64
		      "\n", a->level->name, a->mode->name, a->spec.unit_bytes,
		      a->nr_members, a->array_id,
		      tpt_array_state_name(tpt_array_state(a)), a->event);
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID tuning: fail_timeout %u s%s "
		      "rebuild_rate %u MB/s%s\n", a->fail_timeout,
		      a->fail_timeout_tuned ? " (set)" : "", a->rebuild_rate,
		      a->rebuild_rate_tuned ? " (set)" : "");
	recovery_progress(a, progress, sizeof(progress));
	if (!rc->active && rc->paused && rc->stopped[0] &&
	    rc->position == RAID_PARITY_MEMBER)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: stopped, "
			      "parity resync at %s; trying again every 5 s\n",
			      rc->stopped);
	else if (!rc->active && rc->paused && rc->stopped[0])
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: stopped, "
			      "position %u at %s; trying again every 5 s\n",
			      rc->position, rc->stopped);
	else if (!rc->active)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: none\n");
	else if (rc->check)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: check "
			      "%s\n", progress);
	else if (rc->position == RAID_PARITY_MEMBER)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: resync "
			      "parity %s\n", progress);
	else if (rc->replace)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: replace "
			      "position %u member %d with member %u pass %u "
			      "%s\n", rc->position, a->pos[rc->position].member,
			      a->replace.spare, a->replace.pass, progress);
	else
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID recovery: %s "
			      "position %u member %d %s\n",
			      rc->catch_up ? "resync" : "rebuild",
			      rc->position, a->pos[rc->position].member,
			      progress);
	show_check(a, b);
	show_lost(a, b);
	for (i = 0; i < a->nr_boxes; i++) {
		const struct tpt_member *m = &a->member[i];

		if (m->removed)
			continue;
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID member %u: %s %s "
			      "position %d link %s commands %" PRIu64
			      " errors %" PRIu64 "\n", i, m->url,
			      member_state(a, m), m->position,
			      member_link_name(m->link), m->stats.cmds,
			      m->stats.errors);
	}
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID counters: reads %" PRIu64
		      " writes %" PRIu64 " host_in %" PRIu64 " host_out %" PRIu64
		      " target_in %" PRIu64 " target_out %" PRIu64 " xored %"
		      PRIu64 " pdus %" PRIu64 " rma_ops %" PRIu64 " failed %"
		      PRIu64 " replans %" PRIu64 " degraded_spans %" PRIu64
		      " member_failures %" PRIu64 " medium_errors %" PRIu64
		      " medium_repairs %" PRIu64 " direct_in %" PRIu64 " direct_out %" PRIu64
		      " peer_bytes %" PRIu64 " pdu_moves %" PRIu64 "\n",
		      st.reads, st.writes, st.host_bytes_in,
		      st.host_bytes_out, st.target_bytes_in, st.target_bytes_out,
		      st.bytes_xored, st.pdus, st.rma_ops, st.failed,
		      st.replans, st.degraded_spans, st.member_failures,
		      st.medium_errors, st.medium_repairs, st.direct_bytes_in,
		      st.direct_bytes_out, st.peer_bytes, st.pdu_moves);
	if (a->mode->hosts_changed)
		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID extended hosts: %u\n",
			      a->nr_hosts);
}
