/*
 * TPT mode (paper III-C): the controller plans each span with the RAID
 * level's TPT planner and sends the commands step by step; the targets
 * move the data and compute parity among themselves.  The controller
 * computes on no data byte but an unmodified host's, degraded or not: a
 * missing member's blocks are rebuilt by the surviving targets (III-D 5).
 *
 * An extended host's data moves between its memory and the targets.  An
 * unmodified host's data is in our memory either way (we are its iSCSI
 * target), and how it travels to and from the members is ours to choose:
 * in the iSCSI PDUs of the commands themselves is cheaper for us than
 * serving the targets' RMA (no registration per span, no datamover round
 * trip per piece), so the host pieces of XDWRITE, PREP WRITE and READ NEW
 * BLOCK go inline (protocol.md 5.2), and a read that needs no parity (a
 * plan of PREP READs only) goes as plain READ(16)s of the same ranges,
 * each landing straight in its pieces of our buffer.  Its full stripes
 * the planner gives us as WRITE(16)s of each member's run of units, the
 * parity computed here from the data we hold (raid5.c explains why).
 * Only what needs a passive side of ours - a degraded read's PREP READ or
 * SEND RESULT - registers the host data with the datamover; so does a
 * check, whose sums the targets SEND RESULT into its buffer.
 *
 * Set-up (III-B), per box as it comes online.  First the claim, before
 * the array reads anything from the box: its endpoint (TPT REPORT
 * ENDPOINT), then a new generation of the peer list to every box we know
 * an endpoint of, whose ARRAY KEY binds the LU to the array (a bound LU
 * serves nobody else, plain reads included, protocol.md 5.5).  After the
 * superblock and the reservation, its slot table (TPT REPORT SLOTS, the
 * Send_Control STag qualifier).  Peer ids are the boxes' ids, stable
 * across generations.  At teardown every member drops what it holds for
 * us and is unbound (TPT RELEASE ALL UNBIND, III-B step 4); so is a box
 * we claimed and then found to belong elsewhere.
 *
 * A failed step ends the attempt: TPT RELEASE of the span's groups to
 * every box that got a command (nothing reached a disk before WRITE NEW
 * DATA, III-D 4); then the engine plans the span again or fails it, by
 * what the targets said (protocol.md 9.1's fault classes): a target that
 * failed itself is failed, a peer it could not reach is probed, a
 * medium error on a read is served without that member.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "controller/slot_alloc.h"
#include "controller/tpt_plan.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_parity.h"
#include "scsi/tpt_sense.h"
#include "tpt_datamover.h"
#include "work.h"
#include "tpt_controller.h"

/* Slots the controller asks each member for (TPT REPORT SLOTS): enough
 * for a span of 32 stripes (array.c) with a result of each kind. */
#define TPT_CTL_SLOTS 128
/* A member short of room for them (protocol.md 8.4) is asked again once a
 * second, this many times, before it is failed. */
#define TPT_CTL_SLOTS_TRIES 30

/* What TPT mode keeps per box. */
struct tp_member {
	bool has_endpoint;
	struct tpt_endpoint_report endpoint;
	uint8_t token[TPT_AUTH_TOKEN_LEN];	/* what peers present to it */
	struct tpt_slot_table slot_table;
	struct slot_alloc slots;
	bool slots_ready;
	struct tgt_work slots_again;	/* TPT REPORT SLOTS after a refusal */
	bool slots_again_armed;
	unsigned int slots_tries;
	/* Claim, set-up or unclaim in progress (one at a time). */
	void (*step_done)(struct tpt_member *m, int err);
};

struct tp_array {
	struct tp_member member[TPT_MAX_BOXES];
	uint8_t token[TPT_AUTH_TOKEN_LEN];	/* targets present it to us */
	struct slot_alloc *slot_of[TPT_SPEC_MAX_MEMBERS];
	struct tpt_plan_ctx plan_ctx;
	uint32_t next_group;
	uint32_t generation;			/* of the peer list */
	uint64_t scope;				/* tp_scope(), 0 until known */
};

static struct tp_array *tp_of(const struct tpt_array *a)
{
	return a->mode_priv;
}

static struct tp_member *tpm_of(const struct tpt_member *m)
{
	return &tp_of(m->array)->member[m->id];
}

/* ---- admission of the targets' datamover connections ---- */

static LIST_HEAD(tp_arrays);

struct tp_array_entry {
	struct list_head link;
	struct tpt_array *array;
};

/* The datamover scope of @a's host data and of the connections of its
 * targets: its own, apart from every other array this tgtd serves.  A
 * hash, taken once: the id and key never change once the id is known,
 * and every span registers its host data in the scope. */
static uint64_t tp_scope(const struct tpt_array *a)
{
	struct tp_array *tp = tp_of(a);

	if (!a->array_id)
		return tpt_datamover_scope(a->array_id, a->array_key);
	if (!tp->scope)
		tp->scope = tpt_datamover_scope(a->array_id, a->array_key);
	return tp->scope;
}

/* Targets of one of our arrays reading or writing the host data we
 * proxy, or the data a degraded read sends us, in that array's scope. */
static int tp_accept_peer(const struct tpt_dm_hello *hello,
			  const struct sockaddr *src, socklen_t srclen,
			  uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	struct tp_array_entry *e;

	(void)src;
	(void)srclen;
	list_for_each_entry(e, &tp_arrays, link) {
		struct tpt_array *a = e->array;

		if (a->array_id == hello->array_id &&
		    hello->role == TPT_DM_ROLE_TARGET &&
		    hello->peer_id < a->nr_boxes &&
		    tpt_dm_hello_proves(hello, tp_of(a)->token)) {
			memcpy(token, tp_of(a)->token, TPT_DM_TOKEN_LEN);
			*scope = tp_scope(a);
			return 0;
		}
	}
	return -EPERM;
}

static struct tpt_datamover_user tp_dm_user = {
	.name = "controller",
	.accept = tp_accept_peer,
};

/* ---- per-box set-up (asynchronous) ---- */

static void tp_step_end(struct tpt_member *m, int err)
{
	struct tp_member *tm = tpm_of(m);
	void (*done)(struct tpt_member *, int) = tm->step_done;

	tm->step_done = NULL;
	if (done)
		done(m, err);
}

/* Whether a CHECK CONDITION says "retry the same command later". */
static bool tp_sense_busy(struct scsi_task *task, int status)
{
	const struct tpt_sense_code *code;
	struct tpt_sense sense;

	if (status != SCSI_STATUS_CHECK_CONDITION || !task ||
	    task->datain.size < 2 ||
	    tpt_sense_parse(task->datain.data + 2, task->datain.size - 2,
			    &sense))
		return false;
	code = tpt_sense_code(sense.reason);
	return code && code->fault == TPT_FAULT_BUSY;
}

static void tp_report_slots(struct tpt_member *m);

static void tp_slots_again(void *data)
{
	struct tpt_member *m = data;

	tpm_of(m)->slots_again_armed = false;
	tp_report_slots(m);
}

static void tp_slots_again_cancel(struct tp_member *tm)
{
	if (tm->slots_again_armed)
		del_work(&tm->slots_again);
	tm->slots_again_armed = false;
}

static void tp_slots_done(struct tpt_member *m, struct scsi_task *task,
			  int status, void *arg)
{
	struct tp_member *tm = tpm_of(m);
	struct tpt_field_ptr where;
	struct tpt_slot_table *t = &tm->slot_table;

	(void)arg;
	if (tp_sense_busy(task, status) &&
	    ++tm->slots_tries < TPT_CTL_SLOTS_TRIES) {
		if (tm->slots_tries == 1)
			eprintf("tptraid: member %u (%s) has no room for our "
				"slot table yet: asking again every second\n",
				m->id, m->url);
		tm->slots_again.func = tp_slots_again;
		tm->slots_again.data = m;
		add_work(&tm->slots_again, 1);
		tm->slots_again_armed = true;
		return;
	}
	if (status != SCSI_STATUS_GOOD ||
	    tpt_slot_table_decode(task->datain.data, task->datain.size, t,
				  &where) ||
	    t->count != TPT_CTL_SLOTS ||
	    t->payload_size != m->array->spec.unit_bytes ||
	    slot_alloc_init(&tm->slots, t->count)) {
		eprintf("tptraid: member %u (%s): unusable slot table\n",
			m->id, m->url);
		tp_step_end(m, -EPROTO);
		return;
	}
	tm->slots_ready = true;
	tp_step_end(m, 0);
}

static void tp_report_slots(struct tpt_member *m)
{
	uint32_t alloc = TPT_SLOT_TABLE_LEN(TPT_CTL_SLOTS);
	uint8_t cdb[16] = { TPT_OP_REPORT_SLOTS };

	tpt_put_be(&cdb[2], m->array->spec.unit_bytes, 4);
	tpt_put_be(&cdb[6], TPT_CTL_SLOTS, 2);
	tpt_put_be(&cdb[10], alloc, 4);
	if (member_send_cdb(m, cdb, SCSI_XFER_READ, NULL, alloc, tp_slots_done,
			    NULL))
		tp_step_end(m, -EIO);
}

/* One generation of the peer list on its way to the members. */
struct tp_lists {
	/* A box being claimed: its refusal is its claim's failure; any
	 * other member that refuses the list is failed. */
	struct tpt_member *joiner;
	unsigned int pending;
	int err;
	void (*done)(void *arg, int err);
	void *arg;
};

struct tp_list_send {
	struct tp_lists *lists;
	uint8_t *buf;
};

static void tp_lists_put(struct tp_lists *ls)
{
	if (--ls->pending)
		return;
	ls->done(ls->arg, ls->err);
	free(ls);
}

static void tp_list_done(struct tpt_member *m, struct scsi_task *task,
			 int status, void *arg)
{
	struct tp_list_send *send = arg;
	struct tp_lists *ls = send->lists;

	/* A newer generation that arrived first makes this one moot. */
	if (status != SCSI_STATUS_GOOD && status != SCSI_STATUS_CANCELLED &&
	    !(task && task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
	      task->sense.ascq == 0x8001)) {
		eprintf("tptraid: member %u: TPT SET PEER LIST failed: %s\n",
			m->id, member_error(m));
		if (m == ls->joiner)
			ls->err = -EPROTO;
		else
			member_fail(m, "it refused the peer list");
	}
	free(send->buf);
	free(send);
	tp_lists_put(ls);
}

/* The peer-list entries of @a's extended hosts, after the boxes and the
 * controller: their ids are the highest (protocol.md 5.5 wants them in
 * ascending order, and a->hosts is). */
static void tp_list_hosts(struct tpt_array *a, struct tpt_peer_list *pl)
{
	struct tpt_host *h;

	list_for_each_entry(h, &a->hosts, link) {
		struct tpt_peer *p = &pl->peer[pl->count++];

		p->id = h->peer_id;
		p->role = TPT_ROLE_HOST;
		p->ep = h->ep;
		memcpy(p->token, h->key, sizeof(p->token));
	}
}

/*
 * A new generation of the peer list, to every box whose endpoint we know
 * and that is online: peers keep their ids, so commands in flight keep
 * naming the right ones (protocol.md 6.3).  @done runs when all have
 * answered: with 0, or an error when @joiner refused it or a list could
 * not be made.
 */
static void tp_deliver_peer_lists(struct tpt_array *a, struct tpt_member *joiner,
				  void (*done)(void *arg, int err), void *arg)
{
	struct tp_array *tp = tp_of(a);
	struct tpt_peer_list *pl = calloc(1, sizeof(*pl));
	struct tp_lists *ls = calloc(1, sizeof(*ls));
	struct tpt_peer *p;
	unsigned int i;
	int len;

	if (!pl || !ls) {
		free(pl);
		free(ls);
		done(arg, -ENOMEM);
		return;
	}
	ls->joiner = joiner;
	ls->done = done;
	ls->arg = arg;
	pl->array_id = a->array_id;
	memcpy(pl->array_key, a->array_key, sizeof(pl->array_key));
	pl->generation = ++tp->generation;
	for (i = 0; i < a->nr_boxes; i++) {
		if (!tp->member[i].has_endpoint)
			continue;
		p = &pl->peer[pl->count++];
		p->id = (uint16_t)i;
		p->role = TPT_ROLE_TARGET;
		p->ep = tp->member[i].endpoint.ep;
		memcpy(p->token, tp->member[i].token, sizeof(p->token));
	}
	p = &pl->peer[pl->count++];
	p->id = TPT_CTL_PEER_ID;
	p->role = TPT_ROLE_CONTROLLER;
	memcpy(p->token, tp->token, sizeof(p->token));
	if (tpt_datamover_endpoint(&p->ep)) {
		free(pl);
		free(ls);
		done(arg, -EINVAL);
		return;
	}
	tp_list_hosts(a, pl);
	/* Held while the lists go out. */
	ls->pending = 1;
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];
		uint8_t cdb[16] = { TPT_OP_SET_PEER_LIST };
		struct tp_list_send *send;

		if (!tp->member[i].has_endpoint || m->link != MEMBER_ONLINE)
			continue;
		send = calloc(1, sizeof(*send));
		if (send)
			send->buf = malloc(TPT_PEER_LIST_LEN(pl->count));
		pl->self_id = (uint16_t)i;
		len = send && send->buf ? tpt_peer_list_encode(pl, send->buf,
				TPT_PEER_LIST_LEN(pl->count)) : -ENOMEM;
		if (len < 0) {
			if (send)
				free(send->buf);
			free(send);
			ls->err = -ENOMEM;
			continue;
		}
		send->lists = ls;
		tpt_put_be(&cdb[10], len, 4);
		ls->pending++;
		if (member_send_cdb(m, cdb, SCSI_XFER_WRITE, send->buf, len,
				    tp_list_done, send)) {
			ls->pending--;
			free(send->buf);
			free(send);
		}
	}
	free(pl);
	tp_lists_put(ls);
}

static void tp_joiner_lists_done(void *arg, int err)
{
	struct tpt_member *m = arg;

	/* Its LU took the key with the list (protocol.md 5.5). */
	m->keyed = !err;
	tp_step_end(m, err);
}

/* Extended hosts came or went (hosts.c): the next generation names
 * them, so targets connect to the new ones and drop the old. */
static void tp_hosts_changed(struct tpt_array *a,
			     void (*done)(void *arg, int err), void *arg)
{
	tp_deliver_peer_lists(a, NULL, done, arg);
}

static void tp_endpoint_done(struct tpt_member *m, struct scsi_task *task,
			     int status, void *arg)
{
	struct tp_member *tm = tpm_of(m);
	struct tpt_field_ptr where;

	(void)arg;
	if (status != SCSI_STATUS_GOOD) {
		if (status == SCSI_STATUS_CHECK_CONDITION)
			eprintf("tptraid: member %u (%s) is not a TPT target: "
				"put its LUN in TPT mode (tpt=on)\n", m->id,
				m->url);
		tp_step_end(m, -EPROTO);
		return;
	}
	if (tpt_endpoint_report_decode(task->datain.data, task->datain.size,
				       &tm->endpoint, &where)) {
		eprintf("tptraid: member %u (%s): bad endpoint report\n",
			m->id, m->url);
		tp_step_end(m, -EPROTO);
		return;
	}
	if (strcmp(tm->endpoint.provider, tpt_dm_provider_name(tpt_datamover()))) {
		eprintf("tptraid: member %u moves data with %s, this "
			"controller with %s\n", m->id, tm->endpoint.provider,
			tpt_dm_provider_name(tpt_datamover()));
		tp_step_end(m, -EPROTO);
		return;
	}
	tm->has_endpoint = true;
	tp_deliver_peer_lists(m->array, m, tp_joiner_lists_done, m);
}

/* The claim: its endpoint, then the peer list, whose key binds the LU to
 * the array (protocol.md 5.5) and supersedes our older nexus there. */
static void tp_member_claim(struct tpt_array *a, struct tpt_member *m,
			    void (*done)(struct tpt_member *m, int err))
{
	struct tp_member *tm = &tp_of(a)->member[m->id];
	uint8_t cdb[16] = { TPT_OP_REPORT_ENDPOINT };

	tm->step_done = done;
	tm->slots_ready = false;
	tm->slots_tries = 0;
	tp_slots_again_cancel(tm);
	/* A new session, a new token: whoever knew the old one is out. */
	if (getrandom(tm->token, sizeof(tm->token), 0) != sizeof(tm->token)) {
		tp_step_end(m, -EIO);
		return;
	}
	tpt_put_be(&cdb[10], TPT_ENDPOINT_REPORT_LEN, 4);
	if (member_send_cdb(m, cdb, SCSI_XFER_READ, NULL,
			    TPT_ENDPOINT_REPORT_LEN, tp_endpoint_done, NULL))
		tp_step_end(m, -EIO);
}

/* Once claimed and fenced: the slot table (the Send_Control STags). */
static void tp_member_setup(struct tpt_array *a, struct tpt_member *m,
			    void (*done)(struct tpt_member *m, int err))
{
	tp_of(a)->member[m->id].step_done = done;
	tp_report_slots(m);
}

/* @arg: the lost member's id (the array may be gone by now). */
static void tp_loss_lists_done(void *arg, int err)
{
	if (err)
		eprintf("tptraid: the peer list without member %u could not go "
			"out: %s\n", (unsigned int)(uintptr_t)arg,
			strerror(-err));
}

/*
 * The others learn at once that @m is gone: a new generation of the peer
 * list without it.  A target drops its links to a peer no list names
 * (protocol.md 6.3), which fails every transfer still waiting on @m -
 * a span caught by a cut link or a hung box has its commands on the
 * survivors waiting on @m's slots, and TCP alone keeps them waiting for
 * as long as the link stays cut, holding the span's stripes and, past
 * the command timeout, failing the survivors themselves.  Those commands
 * now end in PEER UNREACHABLE and their spans are planned again without
 * @m.
 */
static void tp_member_lost(struct tpt_array *a, struct tpt_member *m)
{
	struct tp_member *tm = &tp_of(a)->member[m->id];
	bool listed = tm->has_endpoint;

	tm->slots_ready = false;
	tm->has_endpoint = false;
	tp_slots_again_cancel(tm);
	/* Slots taken from this session's table are not given back. */
	slot_alloc_destroy(&tm->slots);
	if (listed)
		tp_deliver_peer_lists(a, NULL, tp_loss_lists_done,
				      (void *)(uintptr_t)m->id);
}

/* ---- array set-up ---- */

static void tp_teardown(struct tpt_array *a)
{
	struct tp_array *tp = tp_of(a);
	struct tp_array_entry *e;
	unsigned int i;

	if (!tp)
		return;
	list_for_each_entry(e, &tp_arrays, link) {
		if (e->array == a) {
			list_del(&e->link);
			free(e);
			break;
		}
	}
	for (i = 0; i < a->nr_boxes; i++) {
		tp_slots_again_cancel(&tp->member[i]);
		/* Controller stop (III-B step 4): the member drops every
		 * buffer it held for us and is free for another array,
		 * then we log out. */
		member_unbind_sync(&a->member[i]);
	}
	free(tp);
	a->mode_priv = NULL;
}

static int tp_setup(struct tpt_array *a)
{
	struct tp_array_entry *e;
	struct tp_array *tp;
	char portal[80];
	unsigned int p;
	int ret;

	tp = calloc(1, sizeof(*tp));
	e = calloc(1, sizeof(*e));
	if (!tp || !e) {
		free(tp);
		free(e);
		return -ENOMEM;
	}
	a->mode_priv = tp;
	e->array = a;
	list_add_tail(&e->link, &tp_arrays);
	if (getrandom(tp->token, sizeof(tp->token), 0) != sizeof(tp->token))
		return -EIO;
	snprintf(portal, sizeof(portal), "%s:%u", a->spec.dm_addr,
		 a->spec.dm_port);
	tpt_datamover_register(&tp_dm_user);
	ret = tpt_datamover_set_portal(portal);
	if (!ret)
		ret = tpt_datamover_open();
	if (ret)
		return ret;
	tp->plan_ctx.geo = &a->geo;
	tp->plan_ctx.level = a->level;
	tp->plan_ctx.slots = tp->slot_of;
	tp->plan_ctx.prefetch = a->spec.prefetch;
	tp->plan_ctx.gather = a->spec.parity_gather;
	tp->plan_ctx.rebuild_gather = a->spec.rebuild_gather;
	for (p = 0; p < TPT_SPEC_MAX_MEMBERS; p++)
		tp->slot_of[p] = &tp->member[0].slots;
	return 0;
}

/* ---- running a span ---- */

struct tp_run {
	struct tpt_span *span;
	struct tpt_plan plan;
	struct tpt_plan release;
	bool releasing;
	struct tpt_dm_buf *host_mr;
	/* An unmodified host's read needing no parity: the PREP READs go as
	 * plain READ(16)s (see the top of the file). */
	bool plain_read;
	/* Host pieces that moved inside iSCSI PDUs instead of by RMA. */
	unsigned int in_pdus;
	unsigned int step;
	unsigned int pending;
	int failure;
	bool retry;
	unsigned int pdus;		/* commands actually sent */
	/* The box serving each position when the span was planned, and its
	 * session then: its groups live there, so a later step must not go
	 * to a box that has taken the position over since (a spare,
	 * mid-span), nor to the same box in a later session (a box back
	 * from a cut link, whose groups of ours were dropped). */
	struct tpt_member *box[TPT_SPEC_MAX_MEMBERS];
	unsigned int box_session[TPT_SPEC_MAX_MEMBERS];
};

struct tp_cmd {
	struct tp_run *run;
	const struct tpt_plan_cmd *pc;
	uint8_t *data_out;
};

static void tp_step(struct tp_run *run);

/* The extended host's buffer a span's host pieces are in, or NULL when
 * they are in our own copy of an unmodified host's data. */
static struct tpt_host_buf *tp_direct(const struct tp_run *run)
{
	return run->span->req ? run->span->req->direct : NULL;
}

/* The box serving position @pos for this span: the one it was planned
 * with, in the same session, while that one still serves the position;
 * NULL once it does not, which fails the step and plans the span again. */
static struct tpt_member *tp_box(struct tp_run *run, unsigned int pos)
{
	struct tpt_member *m = run->box[pos];

	return m && m == array_span_box(run->span, pos) &&
	       m->session == run->box_session[pos] ? m : NULL;
}

/* Counters for the span, from its plan: what the controller sent and what
 * the members moved for it. */
static void tp_count(struct tp_run *run, struct tpt_array_counters *d)
{
	struct tpt_plan_counts k;
	unsigned int i;

	memset(d, 0, sizeof(*d));
	d->pdus = run->pdus;
	if (run->failure)
		return;
	tpt_plan_count(&run->plan, &k);
	/* Parity we computed: N-2 XORs of a unit per stripe, as Baseline's
	 * counter has it. */
	for (i = 0; i < run->plan.nr_refs; i++) {
		const struct tpt_plan_ref *ref = &run->plan.refs[i];

		if (ref->kind == TPT_REF_PARITY)
			d->bytes_xored += (uint64_t)(ref->nr_sources - 1) *
					  ref->length;
	}
	d->rma_ops = k.transfers - run->in_pdus;
	d->peer_bytes = k.peer_bytes;
	d->pdu_moves = run->in_pdus;
	/* An extended host's data went between it and the targets. */
	if (tp_direct(run))
		return;
	for (i = 0; i < run->span->array->nr_members; i++) {
		/* The host's data is ours: PREP READ and SEND RESULT push
		 * into it, everything else pulls from it. */
		d->target_bytes_in += k.member[i].host_out;
		d->target_bytes_out += k.member[i].host_in;
	}
}

static void tp_end(struct tp_run *run)
{
	struct tpt_span *s = run->span;
	struct tpt_array_counters d;

	/* Every member freed the slots: by WRITE NEW DATA or by RELEASE. */
	tpt_plan_return_slots(&run->plan);
	tp_count(run, &d);
	tpt_plan_free(&run->plan);
	if (run->releasing)
		tpt_plan_free(&run->release);
	if (run->host_mr)
		tpt_dm_buf_release(run->host_mr);
	tpt_span_done(s, run->failure, run->retry, &d);
	free(run);
}

static void tp_fail(struct tp_run *run, int err, bool retry)
{
	if (run->failure && !run->retry)
		return;
	run->failure = err;
	run->retry = retry;
}

/*
 * What a failed command means for its span (protocol.md 9.1): a member
 * whose WRITE NEW DATA failed is failed, a target that failed itself is
 * failed (a medium error on a read excludes it from this span only), a
 * peer it could not reach is probed, state lost is planned again at once,
 * a shortage after a pause.  A command we got wrong is a bug: the span
 * fails.
 */
static void tp_classify(struct tp_run *run, struct tpt_member *m,
			const struct tpt_plan_cmd *pc, struct scsi_task *task,
			int status)
{
	struct tpt_array *a = run->span->array;
	struct tpt_host_buf *direct = tp_direct(run);
	const struct tpt_sense_code *code;
	struct tpt_sense sense;

	/* The others may have written their part of the stripe already:
	 * planned again with this member in it, a read-modify-write would
	 * fold its stale unit into the parity.  Without it, the stripe reads
	 * back as the whole write (its unit from the others). */
	if (pc->op == TPT_PLAN_WRITE_NEW_DATA || pc->op == TPT_PLAN_WRITE) {
		array_member_error(a, m, pc->op == TPT_PLAN_WRITE ?
				   "WRITE failed" : "WRITE NEW DATA failed");
		tp_fail(run, -EIO, true);
		return;
	}
	if (run->plain_read) {
		bool retry;
		int err = array_read_failed(run->span, m, pc->member, task,
					    status, &retry);

		tp_fail(run, err, retry);
		return;
	}
	if (status != SCSI_STATUS_CHECK_CONDITION || !task ||
	    task->datain.size < 2 ||
	    tpt_sense_parse(task->datain.data + 2, task->datain.size - 2,
			    &sense)) {
		/* The member is gone (member.c failed it), or busy. */
		tp_fail(run, -EIO, true);
		return;
	}
	code = tpt_sense_code(sense.reason);
	if (!code) {
		tp_fail(run, -EIO, true);
		return;
	}
	/*
	 * The extended host's buffer failed the target (its datamover is
	 * down or refused the target, or it revoked the STag): the host's
	 * doing, which no re-plan cures and no box is to blame for
	 * (protocol.md 4.19).  Nothing reached a disk: WRITE NEW DATA moves
	 * nothing over the datamover.
	 */
	if (direct && tpt_sense_peer_failed(&sense) &&
	    sense.info.information == direct->peer_id) {
		if (!direct->fault)
			direct->fault = sense.reason;
		tp_fail(run, -ECOMM, false);
		return;
	}
	switch (code->fault) {
	case TPT_FAULT_STATE:
		tp_fail(run, -ESTALE, true);
		return;
	case TPT_FAULT_BUSY:
		tp_fail(run, -EAGAIN, true);
		return;
	case TPT_FAULT_PEER:
		if (sense.info.info_valid &&
		    sense.info.information < a->nr_boxes)
			member_unreachable(m, &a->member[sense.info.information]);
		tp_fail(run, -EIO, true);
		return;
	case TPT_FAULT_LOCAL:
		if (sense.reason == TPT_SENSE_READ_ERROR) {
			bool retry;
			int err = array_unreadable(run->span, m, pc->member,
						   &retry);

			tp_fail(run, err, retry);
			return;
		}
		array_member_error(a, m, code->name);
		tp_fail(run, -EIO, true);
		return;
	default:
		/* Our peer list may just be older than the target's. */
		tp_fail(run, -EIO, sense.reason == TPT_SENSE_UNKNOWN_PEER ||
				   sense.reason == TPT_SENSE_PEER_LIST_MISSING);
		return;
	}
}

static void tp_cmd_done(struct tpt_member *m, struct scsi_task *task,
			int status, void *arg)
{
	struct tp_cmd *c = arg;
	struct tp_run *run = c->run;

	if (status != SCSI_STATUS_GOOD && !run->releasing) {
		if (status != SCSI_STATUS_CANCELLED &&
		    !array_failure_quiet(run->span, task, status))
			eprintf("tptraid: member %u: %s of group %u failed: "
				"status 0x%x, sense %x/%04x\n", m->id,
				tpt_plan_op_name(c->pc->op),
				run->plan.group + c->pc->group_offset, status,
				task ? task->sense.key : 0,
				task ? task->sense.ascq : 0);
		tp_classify(run, m, c->pc, task, status);
	}
	free(c->data_out);
	free(c);
	if (!--run->pending)
		tp_step(run);
}

/* Whether @op's host pieces travel inline for an unmodified host: the
 * commands whose passive side is a data source (protocol.md 5.2). */
static bool tp_inline_op(enum tpt_plan_op op)
{
	return op == TPT_PLAN_XDWRITE || op == TPT_PLAN_PREP_WRITE ||
	       op == TPT_PLAN_READ_NEW_BLOCK;
}

/* Descriptors for bytes [@off, @off + @len) of an extended host's
 * request: one per piece of its buffer they fall in, at most @room.  How
 * many, or -E2BIG (the planner keeps a command within the descriptor
 * limit, tpt_plan_refs_max()). */
static int tp_host_descs(const struct tpt_host_buf *hb, uint64_t off,
			 uint32_t len, struct tpt_xfer_desc *d,
			 unsigned int room)
{
	unsigned int i = 0, n = 0;

	while (i < hb->nr_pieces && off >= hb->piece[i].length)
		off -= hb->piece[i++].length;
	while (len) {
		uint32_t take;

		if (i == hb->nr_pieces || n == room)
			return -E2BIG;
		take = hb->piece[i].length - off < len ?
		       (uint32_t)(hb->piece[i].length - off) : len;
		d[n].peer = hb->peer_id;
		d[n].flags = hb->flags;
		d[n].stag = hb->piece[i].stag;
		d[n].offset = hb->piece[i].rma_addr + off;
		d[n].length = take;
		n++;
		len -= take;
		off = 0;
		i++;
	}
	return (int)n;
}

/* Where a member command's transfer list is built before it is encoded:
 * one per thread, as in hosts.c (an 8 KiB malloc per command costs glibc
 * a consolidation of its free lists). */
static _Thread_local struct tpt_xfer_list member_list;

/* The transfer list of @pc, encoded into *@out: an extended host's
 * pieces name its buffer, an unmodified host's travel inline where the
 * command allows it (*@inline_len bytes, which tp_tpt_task() attaches)
 * and else name our registration of them, slot pieces the box's slot as
 * it reported it.  The list's length, or -errno. */
static int tp_xfer_list(struct tp_run *run, const struct tpt_plan *p,
			const struct tpt_plan_cmd *pc, uint8_t **out,
			uint32_t *inline_len)
{
	struct tp_array *tp = tp_of(run->span->array);
	const struct tpt_host_buf *direct = tp_direct(run);
	struct tpt_xfer_list *xl = &member_list;
	uint64_t base = run->host_mr ? tpt_dm_buf_rma_base(run->host_mr) : 0;
	bool inline_host = !direct && tp_inline_op(pc->op);
	unsigned int i, n;
	int len;

	*inline_len = 0;

	/* An extended host's pieces: this span's part of its buffer. */
	if (direct)
		base = (run->span->lba - run->span->req->lba) *
		       run->span->array->block_size;

	memset(xl, 0, offsetof(struct tpt_xfer_list, desc));
	xl->result_slot = pc->result_slot;
	xl->operand_gf_exp = pc->operand_gf_exp;
	for (i = 0, n = 0; i < pc->nr_refs; i++, n++) {
		const struct tpt_plan_ref *ref = &p->refs[pc->first_ref + i];
		struct tpt_xfer_desc *d = &xl->desc[n];
		unsigned int first = n;

		if (n == TPT_XFER_DESC_MAX)
			return -E2BIG;
		memset(d, 0, sizeof(*d));
		d->length = ref->length;
		if (ref->kind == TPT_REF_HOST && direct) {
			len = tp_host_descs(direct, base + ref->host_offset,
					    ref->length, d,
					    TPT_XFER_DESC_MAX - n);
			if (len < 0)
				return len;
			n += (unsigned int)len - 1;
		} else if (ref->kind == TPT_REF_HOST && inline_host) {
			d->peer = TPT_PEER_ID_CONTROLLER;
			d->offset = *inline_len;
			*inline_len += ref->length;
		} else if (ref->kind == TPT_REF_SKIP) {
			d->peer = TPT_PEER_ID_NONE;
		} else if (ref->kind == TPT_REF_HOST) {
			d->peer = TPT_CTL_PEER_ID;
			d->flags = base ? TPT_XFER_VIRT_ADDR : 0;
			d->stag = tpt_dm_buf_stag(run->host_mr);
			d->offset = base + ref->host_offset;
		} else {
			struct tpt_member *box = tp_box(run, ref->member);
			const struct tpt_slot_table *t;

			if (!box)
				return -EIO;
			t = &tp->member[box->id].slot_table;
			d->peer = (uint16_t)box->id;
			d->flags = TPT_XFER_SLOT | (t->flags & TPT_XFER_VIRT_ADDR);
			d->stag = t->slot[ref->slot].stag;
			d->offset = t->slot[ref->slot].offset;
		}
		/* A host ref may have become several descriptors: one
		 * pass, one weight. */
		for (; first <= n; first++)
			xl->desc[first].gf_exp = ref->gf_exp;
	}
	xl->count = (uint16_t)n;
	/* The descriptors' sum - the range, or a READ PARITY command's
	 * passes over it (protocol.md 5.1) - or, without any, what READ
	 * MEDIUM exports. */
	for (i = 0, xl->total_length = 0; i < n; i++)
		xl->total_length += xl->desc[i].length;
	if (!n)
		xl->total_length = (uint64_t)pc->blocks *
				   run->span->array->block_size;
	*out = malloc(TPT_XFER_LIST_LEN(xl->count));
	len = *out ? tpt_xfer_list_encode(xl, *out, TPT_XFER_LIST_LEN(xl->count)) :
		     -ENOMEM;
	if (len < 0) {
		free(*out);
		*out = NULL;
	}
	return len;
}

/* @pc, a PREP READ of an unmodified host's read that needs no parity, as
 * a plain READ(16) of its range, the data landing in its pieces of the
 * host data in order (a PREP READ's list covers its range in order,
 * protocol.md 5.1). */
static struct scsi_task *tp_plain_read_task(struct tp_run *run,
					    const struct tpt_plan *p,
					    const struct tpt_plan_cmd *pc)
{
	uint32_t bs = run->span->array->block_size;
	struct scsi_task *task;
	unsigned int i;

	task = scsi_cdb_read16(pc->lba, pc->blocks * bs, bs, 0, 0, 0, 0, 0);
	for (i = 0; task && i < pc->nr_refs; i++) {
		const struct tpt_plan_ref *ref = &p->refs[pc->first_ref + i];

		if (scsi_task_add_data_in_buffer(task, (int)ref->length,
						 (uint8_t *)run->span->buf +
							 ref->host_offset)) {
			scsi_free_scsi_task(task);
			task = NULL;
		}
	}
	return task;
}

/* dst = the XOR of @n pieces of @len bytes back to back from @src: the
 * parity of a stripe of an unmodified host's data.  @dst is aligned for
 * ISA-L; the host's data is where it came. */
static int tp_parity(uint8_t *dst, const uint8_t *src, uint32_t n,
		     uint32_t len)
{
	const void *vec[TPT_SPEC_MAX_MEMBERS];
	uint8_t *bounce;
	uint32_t i;
	int err = 0;

	if (!n || n > TPT_SPEC_MAX_MEMBERS)
		return -EINVAL;
	if ((uintptr_t)src % TPT_PARITY_ALIGN == 0) {
		for (i = 0; i < n; i++)
			vec[i] = src + (size_t)i * len;
		return tpt_xor(dst, vec, n, len);
	}
	bounce = aligned_alloc(TPT_PARITY_ALIGN, len);
	if (!bounce)
		return -ENOMEM;
	memcpy(dst, src, len);
	for (i = 1; i < n && !err; i++) {
		memcpy(bounce, src + (size_t)i * len, len);
		err = tpt_xor_acc(dst, (const void *[]){ bounce }, 1, len);
	}
	free(bounce);
	return err;
}

/*
 * @pc, a WRITE(16) of a member's run of an unmodified host's full
 * stripes: its data-out is the host's pieces where they are and the
 * parity pieces, computed into *@parity_out (freed with the command).
 */
static struct scsi_task *tp_write_task(struct tp_run *run,
				       const struct tpt_plan *p,
				       const struct tpt_plan_cmd *pc,
				       uint8_t **parity_out)
{
	uint32_t bs = run->span->array->block_size;
	uint8_t *host = run->span->buf, *parity;
	size_t parity_len = 0, at = 0;
	struct scsi_task *task;
	unsigned int i;

	for (i = 0; i < pc->nr_refs; i++)
		if (p->refs[pc->first_ref + i].kind == TPT_REF_PARITY)
			parity_len += p->refs[pc->first_ref + i].length;
	parity = parity_len ? aligned_alloc(TPT_PARITY_ALIGN, parity_len) : NULL;
	if (parity_len && !parity)
		return NULL;
	/* The host asked for its write to be on media (FUA). */
	task = scsi_cdb_write16(pc->lba, pc->blocks * bs, bs, 0, 0,
				run->span->fua ? 1 : 0, 0, 0);
	for (i = 0; task && i < pc->nr_refs; i++) {
		const struct tpt_plan_ref *ref = &p->refs[pc->first_ref + i];
		uint8_t *piece = host + ref->host_offset;

		if (ref->kind == TPT_REF_PARITY) {
			piece = parity + at;
			at += ref->length;
			if (tp_parity(piece, host + ref->host_offset,
				      ref->nr_sources, ref->length))
				goto fail;
		}
		if (scsi_task_add_data_out_buffer(task, (int)ref->length, piece))
			goto fail;
	}
	if (!task)
		goto fail;
	*parity_out = parity;
	return task;
fail:
	if (task)
		scsi_free_scsi_task(task);
	free(parity);
	return NULL;
}

/* @pc as the TPT command it is: *@task, its data-out the transfer list
 * in *@data_out (freed with the command) and any inline data where it
 * is.  0 or -errno. */
static int tp_tpt_task(struct tp_run *run, const struct tpt_plan *p,
		       const struct tpt_plan_cmd *pc, uint8_t **data_out,
		       struct scsi_task **task)
{
	struct tpt_cdb cdb = {
		.opcode = tpt_plan_opcode(pc->op),
		.lba = pc->lba,
		.transfer_length = pc->blocks,
		.group = p->group + pc->group_offset,
		.parity_mode = pc->parity_mode,
	};
	uint8_t raw[TPT_CDB_MAX_LEN] = { 0 };
	uint32_t inline_len = 0;
	int n, list_len = 0;
	unsigned int i;

	switch (pc->op) {
	case TPT_PLAN_PREP_READ:
	case TPT_PLAN_PREP_WRITE:
		cdb.flags = pc->final ? TPT_CDB_FINAL : 0;
		break;
	case TPT_PLAN_XDWRITE:
		cdb.flags = TPT_CDB_DISABLE_WRITE;
		break;
	case TPT_PLAN_WRITE_NEW_DATA:
		/* The host asked for its write to be on media (FUA). */
		cdb.flags = run->span->fua ? TPT_CDB_FUA : 0;
		break;
	case TPT_PLAN_PRE_FETCH:
		/* SBC's GROUP NUMBER is a hint there, not our request id. */
		cdb.group = 0;
		break;
	case TPT_PLAN_RELEASE:
		cdb.lba = 0;
		cdb.transfer_length = 0;
		break;
	default:
		break;
	}
	if (tpt_cdb_info(cdb.opcode)->param == TPT_PARAM_XFER_LIST) {
		list_len = tp_xfer_list(run, p, pc, data_out, &inline_len);
		if (list_len < 0)
			return list_len;
	}
	n = tpt_cdb_encode(&cdb, raw, sizeof(raw));
	if (n <= 0)
		return -EINVAL;
	*task = scsi_create_task(n, raw, list_len ? SCSI_XFER_WRITE :
				 SCSI_XFER_NONE, list_len + (int)inline_len);
	if (!*task)
		return -ENOMEM;
	/*
	 * The data-out: the list, then the inline pieces back to back in
	 * descriptor order (protocol.md 5.2), each sent from where the host
	 * data is rather than copied after the list.
	 */
	if (list_len &&
	    scsi_task_add_data_out_buffer(*task, list_len, *data_out))
		goto fail;
	for (i = 0; inline_len && i < pc->nr_refs; i++) {
		const struct tpt_plan_ref *ref = &p->refs[pc->first_ref + i];

		if (ref->kind == TPT_REF_HOST &&
		    scsi_task_add_data_out_buffer(*task, (int)ref->length,
				(uint8_t *)run->span->buf + ref->host_offset))
			goto fail;
	}
	return 0;
fail:
	scsi_free_scsi_task(*task);
	*task = NULL;
	return -ENOMEM;
}

static int tp_send(struct tp_run *run, const struct tpt_plan *p,
		   const struct tpt_plan_cmd *pc)
{
	struct tpt_member *m = tp_box(run, pc->member);
	struct scsi_task *task = NULL;
	struct tp_cmd *c;
	int err;

	if (!m)
		return -EIO;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->run = run;
	c->pc = pc;
	if (run->plain_read) {
		task = tp_plain_read_task(run, p, pc);
		err = task ? 0 : -ENOMEM;
	} else if (pc->op == TPT_PLAN_WRITE) {
		/* c->data_out: the parity; the task has every piece. */
		task = tp_write_task(run, p, pc, &c->data_out);
		err = task ? 0 : -ENOMEM;
	} else {
		err = tp_tpt_task(run, p, pc, &c->data_out, &task);
	}
	if (!err) {
		run->pending++;
		err = member_send(m, task, NULL, 0, tp_cmd_done, c);
		if (!err) {
			run->pdus++;
			return 0;
		}
		run->pending--;
	}
	free(c->data_out);
	free(c);
	return err;
}

/* Whether @s writes to a medium: a step of WRITE NEW DATA or WRITE. */
static bool tp_step_writes(const struct tpt_plan *p, const struct plan_step *s)
{
	unsigned int i;

	for (i = 0; i < s->nr_cmds; i++)
		if (p->cmds[s->first_cmd + i].op == TPT_PLAN_WRITE_NEW_DATA ||
		    p->cmds[s->first_cmd + i].op == TPT_PLAN_WRITE)
			return true;
	return false;
}

/*
 * Send a step.  A command that cannot be sent fails the span, and the
 * rest of an ordinary step is not worth sending; but a step that writes
 * goes out in full: once some members have written their part of a
 * stripe, every other must, or the stripe is torn, and a re-plan would
 * read the new data back as old and fold a wrong delta into the parity.
 * A member that cannot take its WRITE NEW DATA is failed instead (its
 * unit is then the others' to give), unless it is no longer the span's
 * box: a box that took over or came back since is not in sync there.
 * Releases, too, go to every member that can take one.
 */
static void tp_send_step(struct tp_run *run, const struct tpt_plan *p,
			 unsigned int step)
{
	const struct plan_step *s = &p->steps[step];
	bool writes = tp_step_writes(p, s);
	bool in_full = run->releasing || writes;
	unsigned int i;
	int err;

	if (writes)
		run->span->wrote = true;

	/* Held open while the step's commands go out. */
	run->pending++;
	for (i = 0; i < s->nr_cmds; i++) {
		const struct tpt_plan_cmd *pc = &p->cmds[s->first_cmd + i];
		struct tpt_member *m;

		err = tp_send(run, p, pc);
		if (!err)
			continue;
		/* A member gone since the plan: the re-plan knows. */
		tp_fail(run, err, err == -EIO);
		if (!in_full)
			break;
		m = tp_box(run, pc->member);
		if (m && (pc->op == TPT_PLAN_WRITE_NEW_DATA ||
			  pc->op == TPT_PLAN_WRITE))
			array_member_error(run->span->array, m,
					   "its write could not be sent");
	}
	if (!--run->pending)
		tp_step(run);
}

/* Runs when the current step's commands have all completed. */
static void tp_step(struct tp_run *run)
{
	if (run->releasing) {
		tp_end(run);
		return;
	}
	if (run->failure) {
		/* Undo at every member that may hold the group's buffers. */
		run->releasing = true;
		if (tpt_plan_release(&run->plan, &run->release) ||
		    !run->release.nr_steps) {
			tp_end(run);
			return;
		}
		tp_send_step(run, &run->release, 0);
		return;
	}
	if (run->step == run->plan.nr_steps) {
		tp_end(run);
		return;
	}
	tp_send_step(run, &run->plan, run->step++);
}

/* Point the planner at the slots of the boxes @s sends each position's
 * commands to. */
static void tp_bind_slots(struct tpt_span *s)
{
	struct tpt_array *a = s->array;
	struct tp_array *tp = tp_of(a);
	unsigned int p;

	for (p = 0; p < array_span_positions(s); p++) {
		struct tpt_member *m = array_span_box(s, p);

		tp->slot_of[p] = m ? &tp->member[m->id].slots :
				     &tp->member[0].slots;
	}
}

static int tp_plan(struct tpt_span *s, struct tp_run *run, uint32_t group)
{
	struct tpt_array *a = s->array;
	struct tp_array *tp = tp_of(a);
	struct tpt_plan_ctx *c = &tp->plan_ctx;

	tp_bind_slots(s);
	c->block_size = a->block_size;
	c->missing = array_span_missing(s);
	c->rebuild_also = s->kind == TPT_SPAN_REBUILD ? s->rebuild_also : 0;
	c->host_held = !tp_direct(run);
	c->host_pieces = tp_direct(run) ? tp_direct(run)->nr_pieces : 1;
	switch (s->kind) {
	case TPT_SPAN_WRITE:
		return a->level->tpt_write(c, s->lba, s->blocks, group,
					   &run->plan);
	case TPT_SPAN_READ:
		return a->level->tpt_read(c, s->lba, s->blocks, group,
					  &run->plan);
	case TPT_SPAN_REBUILD:
		if (s->copying)
			return tpt_plan_copy(c, s->first_stripe,
					     (uint32_t)(s->last_stripe -
							s->first_stripe + 1),
					     a->nr_members, 1u << s->member,
					     group, &run->plan);
		return a->level->tpt_rebuild(c, s->first_stripe,
					     (uint32_t)(s->last_stripe -
							s->first_stripe + 1),
					     s->member, group, &run->plan);
	case TPT_SPAN_CHECK:
		return a->level->tpt_check(c, s->first_stripe,
					   (uint32_t)(s->last_stripe -
						      s->first_stripe + 1),
					   group, &run->plan);
	}
	return -EINVAL;
}

/*
 * Route an unmodified host's pieces of @run's plan (see the top of the
 * file): a read needing no parity goes as plain READs (plain_read), the
 * pieces of commands that take them inline travel in PDUs (in_pdus).
 * Returns how many pieces are left to move by RMA, which need our
 * registration of the host data as their passive side.
 */
static unsigned int tp_route_proxy(struct tp_run *run)
{
	const struct tpt_plan *p = &run->plan;
	unsigned int i, j, by_rma = 0;

	run->plain_read = run->span->kind == TPT_SPAN_READ;
	for (i = 0; i < p->nr_cmds; i++)
		if (p->cmds[i].op != TPT_PLAN_PREP_READ)
			run->plain_read = false;
	for (i = 0; i < p->nr_cmds; i++) {
		const struct tpt_plan_cmd *pc = &p->cmds[i];

		for (j = 0; j < pc->nr_refs; j++) {
			if (p->refs[pc->first_ref + j].kind == TPT_REF_SLOT ||
			    p->refs[pc->first_ref + j].kind == TPT_REF_SKIP)
				continue;
			if (run->plain_read || tp_inline_op(pc->op) ||
			    pc->op == TPT_PLAN_WRITE)
				run->in_pdus++;
			else
				by_rma++;
		}
	}
	return by_rma;
}

static int tp_start(struct tpt_span *s)
{
	struct tpt_array *a = s->array;
	struct tp_array *tp = tp_of(a);
	/* A check's outcome is its own buffer, not the blocks it covers. */
	uint64_t bytes = s->kind == TPT_SPAN_CHECK ?
			 raid_check_bytes(a->level, &a->geo, a->block_size,
					  (uint32_t)(s->last_stripe -
						     s->first_stripe + 1)) :
			 (uint64_t)s->blocks * a->block_size;
	struct tp_run *run;
	uint32_t group;
	unsigned int p;
	int err;

	run = calloc(1, sizeof(*run));
	if (!run) {
		tpt_span_done(s, -ENOMEM, false, NULL);
		return 0;
	}
	run->span = s;
	/* TPT_PLAN_MAX_GROUPS group numbers per span, never 0. */
	group = tp->next_group;
	if (!group || group > UINT32_MAX - (TPT_PLAN_MAX_GROUPS - 1))
		group = 1;
	tp->next_group = group + TPT_PLAN_MAX_GROUPS;
	for (p = 0; p < array_span_positions(s); p++) {
		run->box[p] = array_span_box(s, p);
		run->box_session[p] = run->box[p] ? run->box[p]->session : 0;
	}
	err = tp_plan(s, run, group);
	if (err == -EAGAIN) {
		free(run);
		return -EAGAIN;
	}
	if (!err && s->kind != TPT_SPAN_REBUILD && !tp_direct(run)) {
		unsigned int by_rma = tp_route_proxy(run);

		if (by_rma)
			err = tpt_dm_register(tpt_datamover(), tp_scope(a),
					      s->buf, bytes,
					      s->kind == TPT_SPAN_WRITE ?
					      TPT_DM_ACCESS_REMOTE_READ :
					      TPT_DM_ACCESS_REMOTE_WRITE,
					      &run->host_mr);
	}
	if (err) {
		if (err != -ENODATA)
			eprintf("tptraid: cannot plan %u blocks at %" PRIu64
				": %s\n", s->blocks, s->lba, strerror(-err));
		if (run->plan.cmds) {
			tpt_plan_return_slots(&run->plan);
			tpt_plan_free(&run->plan);
		}
		free(run);
		tpt_span_done(s, err, false, NULL);
		return 0;
	}
	tp_step(run);
	return 0;
}

const struct tpt_mode_ops tpt_mode_tpt = {
	.name = "tpt",
	.setup = tp_setup,
	.teardown = tp_teardown,
	.member_claim = tp_member_claim,
	.member_unclaim = member_unbind,
	.member_setup = tp_member_setup,
	.member_lost = tp_member_lost,
	.start = tp_start,
	.hosts_changed = tp_hosts_changed,
};
