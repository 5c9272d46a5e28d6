/*
 * Member sessions: one libiscsi context per member box, driven from
 * tgtd's epoll loop like any other fd there, and everything about
 * whether the box is there (paper III-D 1).
 *
 * A member is OFFLINE, CONNECTING (login and READ CAPACITY under way) or
 * ONLINE.  It is failed - its session dropped, every command it had
 * completed with SCSI_STATUS_CANCELLED, the array told - when:
 *
 *   - its connection breaks (refused, reset: a box that died),
 *   - it leaves a NOP-Out unanswered for fail_timeout seconds (a hung box,
 *     a cut link: TCP stays up and says nothing),
 *   - a command stays unanswered for 3 fail_timeout + 10 s (a backstop),
 *   - the array says so (a write error, a probe after a target reported
 *     it unreachable).
 *
 * A failed box's session is never reused: a command in flight when the
 * box hung may still execute when it wakes, so the array treats the box
 * as gone until it has caught up again (array.c).  OFFLINE members of an
 * array are tried again every few seconds, asynchronously.
 *
 * Teardown is deferred to the event loop's own turn (an eventfd), never
 * done inside a libiscsi callback, whose context it destroys.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "work.h"
#include "tpt_controller.h"

/* A connect (TCP, login, READ CAPACITY) that takes longer is given up. */
#define MEMBER_CONNECT_TIMEOUT 10
/* Seconds between attempts to reach an OFFLINE member. */
#define MEMBER_RECONNECT_INTERVAL 3
/* The longest TCP waits between two retransmissions (Linux's
 * TCP_RTO_MAX, seconds). */
#define TCP_BACKOFF_MAX 120
/* Ticks with no member heard that make every member silent at once: a
 * tick sends each a NOP-Out, so a member that is there is heard at every
 * tick. */
#define MEMBER_ALL_SILENT 2

struct member_cmd {
	struct list_head link;		/* member's cmds */
	struct tpt_member *member;
	struct scsi_task *task;
	member_cmd_cb cb;
	void *arg;
	struct iscsi_data data;
	time_t sent;			/* monotonic seconds */
	bool orphaned;			/* completed by a teardown */
};

static LIST_HEAD(watched_members);
static LIST_HEAD(failing_members);
static int failing_efd = -1;

const char *member_error(const struct tpt_member *m)
{
	return m->iscsi ? iscsi_get_error(m->iscsi) : "no session";
}

const char *member_link_name(enum member_link link)
{
	switch (link) {
	case MEMBER_OFFLINE:
		return "offline";
	case MEMBER_CONNECTING:
		return "connecting";
	case MEMBER_ONLINE:
		return "online";
	}
	return "?";
}

/*
 * libiscsi wants other events after every submission and service; during
 * login its socket may be replaced.  The loop is told only of a change.
 * And a logged-in session's queued commands are written from a scheduled
 * event at the end of this round of the loop, not after a POLLOUT
 * wake-up: the socket almost always has room, and adding and dropping
 * POLLOUT cost two epoll_ctl() and a wake-up per command (1.7 epoll_ctl
 * per 4 KiB host READ, strace).  POLLOUT is waited for only when a flush
 * left something queued.  @defer: a flush may be scheduled (not from the
 * flush itself).
 */
static void member_event(int fd, int events, void *data);

static void member_rearm_events(struct tpt_member *m, bool defer)
{
	int fd, events;

	if (!m->iscsi)
		return;
	fd = iscsi_get_fd(m->iscsi);
	if (fd != m->fd) {
		if (m->fd >= 0)
			tgt_event_del(m->fd);
		m->fd = -1;
		events = iscsi_which_events(m->iscsi);
		if (fd >= 0 && !tgt_event_add(fd, events, member_event, m)) {
			m->fd = fd;
			m->fd_events = events;
		}
		return;
	}
	events = iscsi_which_events(m->iscsi);
	if (defer && (events & POLLOUT) && !(m->fd_events & POLLOUT) &&
	    m->link == MEMBER_ONLINE) {
		tgt_add_sched_event(&m->flush);
		events &= ~POLLOUT;
	}
	if (fd >= 0 && events != m->fd_events &&
	    !tgt_event_modify(fd, events))
		m->fd_events = events;
}

static void member_rearm(struct tpt_member *m)
{
	member_rearm_events(m, true);
}

/* Holds the socket's partial segments (TCP_CORK) while @on. */
static void member_cork(struct tpt_member *m, int on)
{
	int fd = iscsi_get_fd(m->iscsi);

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
}

static void member_flush(struct event_data *ev)
{
	struct tpt_member *m = ev->data;
	/*
	 * Several commands, or one with a data-out (every TPT command's
	 * transfer list): corked, what libiscsi writes in several send()s
	 * leaves in full segments at the end, and the target wakes once
	 * for all of it rather than once per send() (2 wake-ups per PREP
	 * READ before).  A lone plain READ goes as it is.
	 */
	bool cork = m->flush_cmds > 1 || m->flush_data_out;
	int ret;

	m->flush_cmds = 0;
	m->flush_data_out = false;
	if (!m->iscsi || m->failing || m->link != MEMBER_ONLINE)
		return;
	if (cork)
		member_cork(m, 1);
	ret = iscsi_service(m->iscsi, POLLOUT);
	if (cork && m->iscsi)
		member_cork(m, 0);
	if (ret < 0) {
		member_fail(m, NULL);
		return;
	}
	member_rearm_events(m, false);
}

bool member_say_once(struct tpt_member *m, const char *what)
{
	if (!strcmp(what, m->said))
		return false;
	snprintf(m->said, sizeof(m->said), "%s", what);
	return true;
}

void member_fail(struct tpt_member *m, const char *why)
{
	uint64_t one = 1;

	if (m->link == MEMBER_OFFLINE || m->failing)
		return;
	m->failing = true;
	/* A copy: callers may pass a message built on their stack. */
	snprintf(m->fail_reason, sizeof(m->fail_reason), "%s", why ? why : "");
	array_member_failing(m->array, m);
	list_add_tail(&m->fail_link, &failing_members);
	if (write(failing_efd, &one, sizeof(one)) < 0)
		eprintf("tptraid: eventfd write: %m\n");
}

/*
 * Drop @m's session.  Its commands are completed here, with
 * SCSI_STATUS_CANCELLED, after the array has marked the member gone, so
 * that whoever re-plans on that status plans without it; libiscsi may or
 * may not call them back while the context is destroyed, so they are
 * freed only after that.
 */
static void member_teardown(struct tpt_member *m)
{
	struct iscsi_context *iscsi = m->iscsi;
	enum member_link was = m->link;
	struct member_cmd *c, *tmp;
	const char *why;
	LIST_HEAD(gone);

	if (m->failing) {
		list_del(&m->fail_link);
		m->failing = false;
	}
	if (was == MEMBER_OFFLINE)
		return;
	why = m->fail_reason[0] ? m->fail_reason : member_error(m);
	/* A box that stays away is said once, not at every attempt; so is
	 * one that fails the same way at every reconnect before it serves
	 * (bound to another array, reserved elsewhere), and a refused one
	 * has said why already (member_refusal()). */
	if (was == MEMBER_ONLINE && !m->refused) {
		if (m->ready)
			m->said[0] = '\0';
		if (m->ready || member_say_once(m, why))
			eprintf("tptraid: member %u (%s) failed: %s%s\n", m->id,
				m->url, why, m->ready ? "" : MEMBER_SAID_ONCE);
	} else if (was != MEMBER_ONLINE && !m->unreachable_said) {
		eprintf("tptraid: member %u (%s) unreachable: %s (trying "
			"again every %u s)\n", m->id, m->url, why,
			MEMBER_RECONNECT_INTERVAL);
	}
	m->unreachable_said = true;
	tgt_remove_sched_event(&m->flush);
	m->link = MEMBER_OFFLINE;
	m->session++;
	m->fenced = false;
	m->next_connect = tpt_now_s() + MEMBER_RECONNECT_INTERVAL;
	m->nop_sent = 0;
	if (m->fd >= 0) {
		/* Reset, not a graceful close: commands still queued in our
		 * socket would otherwise be retransmitted when a cut link
		 * heals, and run on the box after it has been caught up. */
		struct linger reset = { .l_onoff = 1, .l_linger = 0 };

		if (was == MEMBER_ONLINE &&
		    setsockopt(m->fd, SOL_SOCKET, SO_LINGER, &reset,
			       sizeof(reset)))
			eprintf("tptraid: member %u: SO_LINGER: %m\n", m->id);
		tgt_event_del(m->fd);
	}
	m->fd = -1;
	m->iscsi = NULL;
	list_splice_init(&m->cmds, &gone);
	list_for_each_entry(c, &gone, link)
		c->orphaned = true;
	array_member_lost(m->array, m, was == MEMBER_ONLINE);
	list_for_each_entry(c, &gone, link)
		c->cb(m, c->task, SCSI_STATUS_CANCELLED, c->arg);
	if (iscsi)
		iscsi_destroy_context(iscsi);
	list_for_each_entry_safe(c, tmp, &gone, link) {
		scsi_free_scsi_task(c->task);
		free(c);
	}
	m->fail_reason[0] = '\0';
}

static void failing_event(int fd, int events, void *data)
{
	uint64_t count;

	(void)events;
	(void)data;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		eprintf("tptraid: eventfd read: %m\n");
	while (!list_empty(&failing_members))
		member_teardown(list_first_entry(&failing_members,
						 struct tpt_member, fail_link));
}

static void member_event(int fd, int events, void *data)
{
	struct tpt_member *m = data;

	(void)fd;
	if (!m->iscsi || m->failing)
		return;
	if (events & POLLIN)
		m->heard = true;
	if (iscsi_service(m->iscsi, events) < 0) {
		member_fail(m, NULL);
		return;
	}
	member_rearm(m);
}

/* ---- commands ---- */

static void member_cmd_done(struct iscsi_context *iscsi, int status,
			    void *command_data, void *private_data)
{
	struct member_cmd *c = private_data;
	struct tpt_member *m = c->member;

	(void)iscsi;
	(void)command_data;
	/* A teardown completed it already and frees it. */
	if (c->orphaned)
		return;
	list_del(&c->link);
	if (status != SCSI_STATUS_GOOD)
		m->stats.errors++;
	if (status == SCSI_STATUS_TIMEOUT)
		member_fail(m, "a command timed out");
	else if (status == SCSI_STATUS_ERROR || status == SCSI_STATUS_CANCELLED)
		member_fail(m, NULL);
	c->cb(m, c->task, status, c->arg);
	scsi_free_scsi_task(c->task);
	free(c);
}

static int member_submit(struct tpt_member *m, struct scsi_task *task,
			 void *data_out, uint32_t data_out_len,
			 member_cmd_cb cb, void *arg)
{
	struct member_cmd *c;

	if (!m->iscsi || m->failing) {
		scsi_free_scsi_task(task);
		return -EIO;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		scsi_free_scsi_task(task);
		return -ENOMEM;
	}
	c->member = m;
	c->task = task;
	c->cb = cb;
	c->arg = arg;
	c->data.data = data_out;
	c->data.size = data_out_len;
	c->sent = tpt_now_s();
	if (iscsi_scsi_command_async(m->iscsi, m->lun, task, member_cmd_done,
				     data_out ? &c->data : NULL, c)) {
		scsi_free_scsi_task(task);
		free(c);
		return -EIO;
	}
	list_add_tail(&c->link, &m->cmds);
	m->stats.cmds++;
	m->flush_cmds++;
	m->flush_data_out |= task->xfer_dir == SCSI_XFER_WRITE;
	member_rearm(m);
	return 0;
}

int member_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		uint32_t data_out_len, member_cmd_cb cb, void *arg)
{
	if (m->link != MEMBER_ONLINE) {
		scsi_free_scsi_task(task);
		return -EIO;
	}
	return member_submit(m, task, data_out, data_out_len, cb, arg);
}

int member_send_cdb(struct tpt_member *m, const uint8_t *cdb, int xfer_dir,
		    void *data, uint32_t len, member_cmd_cb cb, void *arg)
{
	struct scsi_task *task;

	task = scsi_create_task(16, (unsigned char *)cdb, xfer_dir, (int)len);
	if (!task)
		return -ENOMEM;
	if (xfer_dir == SCSI_XFER_READ && data &&
	    scsi_task_add_data_in_buffer(task, (int)len, data)) {
		scsi_free_scsi_task(task);
		return -ENOMEM;
	}
	return member_send(m, task, xfer_dir == SCSI_XFER_WRITE ? data : NULL,
			   xfer_dir == SCSI_XFER_WRITE ? len : 0, cb, arg);
}

/* ---- liveness ---- */

static void member_nop_done(struct iscsi_context *iscsi, int status,
			    void *command_data, void *private_data)
{
	struct tpt_member *m = private_data;

	(void)iscsi;
	(void)command_data;
	if (status == SCSI_STATUS_GOOD) {
		m->nop_answered_sent = m->nop_sent;
		m->nop_sent = 0;
		m->nop_answered = tpt_now_s();
	}
}

/* Every member silent now, as over an outage of the controller's own link:
 * none is judged for silence meanwhile. */
static bool member_all_silent(const struct tpt_array *a, time_t now)
{
	return now - a->heard_last >= MEMBER_ALL_SILENT;
}

/*
 * Whether the controller can tell @m's silence since @since from its own:
 * another member of the array answered a NOP-Out sent later, or none is
 * online to ask.  When every port's traffic ends in the controller's, a
 * full controller port (the data of reads from every member, on slow
 * links) holds each member's NOP-In behind the others' data, and a member
 * with nothing of its own to send is as silent as a hung one.  A later
 * NOP of another member answered went through that same queue, behind
 * @m's answer: then @m's silence is its own.  Later by a second at least
 * (the ticks send them): NOP-Ins of one tick drain from such a queue
 * together, and a tick may fall between two of them.
 */
static bool others_answered_since(const struct tpt_member *m, time_t since,
				  time_t now)
{
	const struct tpt_array *a = m->array;
	bool asked = false, answered = false;
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++) {
		const struct tpt_member *o = &a->member[i];

		if (o == m || o->link != MEMBER_ONLINE || o->failing)
			continue;
		answered |= o->nop_answered_sent > since;
		asked = true;
	}
	/* An answer from before every member went silent tells nothing of
	 * who is silent now (member_all_silent()). */
	return !asked || (answered && !member_all_silent(a, now));
}

/* How long after a silence of @len seconds a connection that backed off
 * through it may stay silent (member_silence_excused()). */
static time_t silence_backoff(time_t len)
{
	return len < TCP_BACKOFF_MAX ? len : TCP_BACKOFF_MAX;
}

/*
 * @m was heard at @now.  When every member of its array had been silent
 * (MEMBER_ALL_SILENT), that silence ends here: all of them silent at once
 * is the controller's own link out, or its port full.  A silence that
 * began within the backoff after the last one is the same outage to the
 * connections still backing off from that one, heard by none in between:
 * their silence runs from the first one's start.  Before, a link out
 * 23 s, back 2 s and out 13 s failed a member silent all 39 s, though
 * the others had answered in the gap, and the host's commands on it.
 */
static void member_heard(struct tpt_member *m, time_t now)
{
	struct tpt_array *a = m->array;
	time_t start = a->heard_last;

	m->last_heard = now;
	if (start && now - start >= MEMBER_ALL_SILENT) {
		if (member_silence_excused(a, start))
			start = a->silence_end - a->silence_len;
		a->silence_end = now;
		a->silence_len = now - start;
		eprintf("tptraid: every member silent for %u s (the "
			"controller's own link, or its port full): each "
			"may take %u s more to be heard again\n",
			(unsigned int)a->silence_len,
			(unsigned int)silence_backoff(a->silence_len));
	}
	a->heard_last = now;
}

/*
 * When the first member is heard after every member was silent
 * (member_heard()), the others' TCP connections are likely still in
 * retransmission backoff, each direction on its own timer: the wait
 * doubles at every try, so the next can come as long after the link's
 * return as the outage lasted (TCP_BACKOFF_MAX at most).  What was sent
 * before the silence ended or during that backoff is given the silence
 * and the backoff on top of its limit.  Before, a 15 s outage of the
 * controller's link failed the two members whose connections came back
 * last, and the array with them.
 */
time_t member_silence_excused(const struct tpt_array *a, time_t since)
{
	time_t backoff = silence_backoff(a->silence_len);

	return since < a->silence_end + backoff ?
	       a->silence_len + backoff : 0;
}

/*
 * The backstop behind the NOP-Outs: a member that answers them but has
 * left a command unanswered for 3 fail_timeout + 10 s (long enough for a
 * loaded box to finish a large command).  Here rather than libiscsi's
 * timeout so that, for a command sent before every member went silent or
 * in the backoff after (queued behind what TCP waits to retransmit),
 * that silence and the backoff do not count, and while every
 * member is silent none is judged, as for NOP-Outs (others_answered_
 * since()).  Commands are listed in the order sent: the first is the
 * oldest.
 */
static time_t member_cmd_overdue(const struct tpt_member *m, time_t now)
{
	const struct tpt_array *a = m->array;
	const struct member_cmd *c;
	time_t limit = 3 * (time_t)a->fail_timeout + 10;

	if (list_empty(&m->cmds) || member_all_silent(a, now))
		return 0;
	c = list_first_entry(&m->cmds, struct member_cmd, link);
	return now - c->sent >= limit + member_silence_excused(a, c->sent) ?
	       now - c->sent : 0;
}

/* Once a second: a NOP-Out to every ONLINE member that has none in
 * flight, a verdict on those whose NOP went unanswered or whose oldest
 * command is overdue, and libiscsi serviced (the timeout a stop sets
 * advances only then).  A box is failed
 * when its NOP has been unanswered and the box silent for fail_timeout,
 * while another box answered one sent later: one that keeps sending
 * (the data of a rebuild's reads on a slow link, where its NOP-In queues
 * behind seconds of them, with TCP's retransmission pauses between) is
 * alive, and one whose answer waits behind the others' data in the
 * controller's own port is no more silent than they are.  A hung box
 * sends nothing, and a dead one nothing but a reset. */
static void member_check(struct tpt_member *m, time_t now)
{
	const struct tpt_array *a = m->array;
	time_t timeout = a->fail_timeout;
	char why[80];
	time_t overdue;

	if (m->failing || !m->iscsi)
		return;
	if (m->link == MEMBER_CONNECTING &&
	    now - m->connect_started >= MEMBER_CONNECT_TIMEOUT) {
		member_fail(m, "connect timed out");
		return;
	}
	if (m->heard)
		member_heard(m, now);
	m->heard = false;
	if (m->link == MEMBER_ONLINE) {
		if (m->nop_sent && now - m->nop_sent >= timeout +
		    member_silence_excused(a, m->nop_sent) &&
		    now - m->last_heard >= timeout +
		    member_silence_excused(a, m->last_heard) &&
		    others_answered_since(m, m->nop_sent, now)) {
			snprintf(why, sizeof(why), "no answer to NOP-Out for "
				 "%u s, nothing heard for %u s",
				 (unsigned int)(now - m->nop_sent),
				 (unsigned int)(now - m->last_heard));
			member_fail(m, why);
			return;
		}
		overdue = member_cmd_overdue(m, now);
		if (overdue) {
			snprintf(why, sizeof(why), "a command unanswered for "
				 "%u s", (unsigned int)overdue);
			member_fail(m, why);
			return;
		}
		if (!m->nop_sent &&
		    !iscsi_nop_out_async(m->iscsi, member_nop_done, NULL, 0, m))
			m->nop_sent = now;
	}
	if (iscsi_service(m->iscsi, 0) < 0) {
		member_fail(m, NULL);
		return;
	}
	member_rearm(m);
}

void member_probe(struct tpt_member *m)
{
	time_t now = tpt_now_s();

	/* An unanswered NOP counts from now at the latest: the box gets
	 * fail_timeout from the report to answer. */
	if (m->link != MEMBER_ONLINE || m->failing)
		return;
	if (!m->nop_sent &&
	    !iscsi_nop_out_async(m->iscsi, member_nop_done, NULL, 0, m))
		m->nop_sent = now;
	member_rearm(m);
}

/* How many pairs @m is in whose path is reported broken. */
static unsigned int broken_pairs(const struct tpt_member *m)
{
	const struct tpt_array *a = m->array;
	unsigned int i, n = (unsigned int)__builtin_popcountll(m->unreached_by);

	for (i = 0; i < a->nr_boxes; i++)
		n += !!(a->member[i].unreached_by & (1ull << m->id));
	return n;
}

void member_unreachable(struct tpt_member *from, struct tpt_member *to)
{
	unsigned int timeout = to->array->fail_timeout;
	struct tpt_member *first, *second, *victim;
	time_t now = tpt_now_s();
	char why[160];

	member_probe(to);
	if (from == to || from->failing || to->failing ||
	    to->link != MEMBER_ONLINE)
		return;
	/* Reports that stopped for a while were a moment's trouble. */
	if (!to->unreached_by || now - to->unreached_last > 2 * (time_t)timeout) {
		to->unreached_by = 0;
		to->unreached_since = now;
		to->unreached_said = false;
	}
	to->unreached_by |= 1ull << from->id;
	to->unreached_last = now;
	/* A box that is gone is failed by its NOP within fail_timeout of
	 * the probe; one that answered since the first report is there. */
	if (now - to->unreached_since < (time_t)timeout ||
	    to->nop_answered <= to->unreached_since)
		return;
	if (broken_pairs(from) > broken_pairs(to)) {
		first = from;
		second = to;
	} else {
		first = to;
		second = from;
	}
	victim = array_may_lose(to->array, first) ? first :
		 array_may_lose(to->array, second) ? second : NULL;
	if (!victim) {
		if (!to->unreached_said)
			eprintf("tptraid: members %u and %u cannot reach each "
				"other over the datamover, and the array can "
				"lose neither\n", from->id, to->id);
		to->unreached_said = true;
		return;
	}
	snprintf(why, sizeof(why), "%s member %u over the datamover for %u s, "
		 "while both answer the controller",
		 victim == to ? "unreachable from" : "cannot reach",
		 victim == to ? from->id : to->id,
		 (unsigned int)(now - to->unreached_since));
	to->unreached_by = 0;
	member_fail(victim, why);
}

static struct tgt_work member_tick_work;

static void member_tick(void *data)
{
	struct tpt_member *m, *tmp;
	time_t now = tpt_now_s();

	(void)data;
	list_for_each_entry_safe(m, tmp, &watched_members, watch_link) {
		member_check(m, now);
		if (m->link == MEMBER_OFFLINE && !m->failing && !m->held &&
		    now >= m->next_connect)
			member_connect(m);
	}
	add_work(&member_tick_work, 1);
}

/* ---- connecting ---- */

static void member_capacity_done(struct tpt_member *m, struct scsi_task *task,
				 int status, void *arg)
{
	struct scsi_readcapacity16 *rc16;

	(void)arg;
	if (status != SCSI_STATUS_GOOD ||
	    !(rc16 = scsi_datain_unmarshall(task))) {
		if (status != SCSI_STATUS_CANCELLED)
			member_fail(m, "READ CAPACITY failed");
		return;
	}
	m->block_size = rc16->block_length;
	m->nr_blocks = rc16->returned_lba + 1;
	m->link = MEMBER_ONLINE;
	m->unreachable_said = false;
	m->nop_sent = 0;
	array_member_online(m->array, m);
}

static void member_connected(struct iscsi_context *iscsi, int status,
			     void *command_data, void *private_data)
{
	struct tpt_member *m = private_data;
	struct scsi_task *task;

	(void)iscsi;
	(void)command_data;
	/* libiscsi calls this a second time when an established session
	 * fails: that is a failure like any other. */
	if (status != SCSI_STATUS_GOOD || m->link != MEMBER_CONNECTING) {
		char why[sizeof(m->fail_reason)];

		/* libiscsi says why: refused, CHAP failed either way, ... */
		snprintf(why, sizeof(why), "login failed: %s", member_error(m));
		member_fail(m, m->link == MEMBER_CONNECTING ? why : NULL);
		return;
	}
	task = scsi_cdb_readcapacity16();
	if (!task || member_submit(m, task, NULL, 0, member_capacity_done,
				   NULL))
		member_fail(m, "cannot send READ CAPACITY");
}

/*
 * Whether @url names a CHAP user itself.  libiscsi fills in a URL without
 * one from LIBISCSI_CHAP_* in the environment, which for a controller is
 * the shell's of whoever started tgtd: its members' credentials come from
 * the array definition only.
 */
static bool url_has_user(const char *url)
{
	const char *authority = strstr(url, "://");
	const char *at, *slash;

	authority = authority ? authority + 3 : url;
	at = strchr(authority, '@');
	slash = strchr(authority, '/');
	return at && (!slash || at < slash);
}

void member_connect(struct tpt_member *m)
{
	struct iscsi_url *url;

	if (m->link != MEMBER_OFFLINE || m->failing)
		return;
	m->next_connect = tpt_now_s() + MEMBER_RECONNECT_INTERVAL;
	m->iscsi = iscsi_create_context(m->array->spec.initiator);
	if (!m->iscsi)
		return;
	url = iscsi_parse_full_url(m->iscsi, m->login_url);
	if (!url) {
		eprintf("tptraid: %s: %s\n", m->url, member_error(m));
		iscsi_destroy_context(m->iscsi);
		m->iscsi = NULL;
		return;
	}
	iscsi_set_targetname(m->iscsi, url->target);
	iscsi_set_session_type(m->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(m->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	/* No libiscsi timeout: member_cmd_overdue() is the backstop. */
	/* An unreachable address must not hold a connect for minutes. */
	iscsi_set_tcp_syncnt(m->iscsi, 2);
	/*
	 * A member that goes away must fail the commands it had, at once:
	 * libiscsi's silent reconnect would park them, and the host's I/O
	 * with them, until the box came back.  Taking a member back is the
	 * array's decision (degraded mode, rebuild), not libiscsi's.
	 */
	iscsi_set_noautoreconnect(m->iscsi, 1);
	/*
	 * CHAP towards a member: iscsi://user%secret@host/iqn/lun; mutual
	 * with ?target_user=NAME&target_password=SECRET, when the member
	 * must prove itself too (libiscsi refuses a wrong answer).
	 */
	if (url_has_user(m->login_url))
		iscsi_set_initiator_username_pwd(m->iscsi, url->user,
						 url->passwd);
	else
		iscsi_set_initiator_username_pwd(m->iscsi, "", "");
	if (strstr(m->login_url, "target_user="))
		iscsi_set_target_username_pwd(m->iscsi, url->target_user,
					      url->target_passwd);
	else
		iscsi_set_target_username_pwd(m->iscsi, "", "");
	m->lun = url->lun;
	m->link = MEMBER_CONNECTING;
	m->connect_started = tpt_now_s();
	if (iscsi_full_connect_async(m->iscsi, url->portal, url->lun,
				     member_connected, m)) {
		iscsi_destroy_url(url);
		member_fail(m, "cannot start the login");
		return;
	}
	iscsi_destroy_url(url);
	member_rearm(m);
}

/* One turn of a private poll loop over @a's members' sessions, waiting at
 * most @ms for one to be ready. */
static void member_serve(struct tpt_array *a, int ms)
{
	struct pollfd pfd[TPT_SPEC_MAX_MEMBERS + TPT_SPEC_MAX_SPARES];
	struct tpt_member *who[TPT_SPEC_MAX_MEMBERS + TPT_SPEC_MAX_SPARES];
	unsigned int i, n;

	for (i = 0, n = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];

		if (!m->iscsi || m->failing)
			continue;
		pfd[n].fd = iscsi_get_fd(m->iscsi);
		pfd[n].events = iscsi_which_events(m->iscsi);
		who[n++] = m;
	}
	if (poll(pfd, n, ms) < 0 && errno != EINTR)
		return;
	for (i = 0; i < n; i++) {
		if (!who[i]->iscsi || who[i]->failing)
			continue;
		if (iscsi_service(who[i]->iscsi, pfd[i].revents) < 0)
			member_fail(who[i], NULL);
	}
	for (i = 0; i < a->nr_boxes; i++)
		member_check(&a->member[i], tpt_now_s());
	while (!list_empty(&failing_members))
		member_teardown(list_first_entry(&failing_members,
						 struct tpt_member, fail_link));
}

/*
 * Run the members' sessions on a private poll loop until none of @a's is
 * CONNECTING or setting up, or @seconds have passed: creating an array is
 * synchronous for tgtadm, but the members are reached side by side and
 * the wait is bounded.
 */
void member_wait(struct tpt_array *a, unsigned int seconds)
{
	time_t deadline = tpt_now_s() + seconds;

	while (tpt_now_s() < deadline && array_settling(a))
		member_serve(a, 100);
}

static bool cmds_in_flight(const struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++)
		if (a->member[i].array && !list_empty(&a->member[i].cmds))
			return true;
	return false;
}

void member_drain(struct tpt_array *a, unsigned int seconds)
{
	time_t deadline = tpt_now_s() + seconds;
	unsigned int i;

	while (tpt_now_s() < deadline && cmds_in_flight(a))
		member_serve(a, 100);
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];

		if (!m->array || list_empty(&m->cmds))
			continue;
		member_fail(m, "no answer while the array stopped");
		while (!list_empty(&failing_members))
			member_teardown(list_first_entry(&failing_members,
							 struct tpt_member,
							 fail_link));
	}
}

/* ---- life of a member record ---- */

int member_init(struct tpt_array *a, struct tpt_member *m, unsigned int id,
		const char *url)
{
	if (failing_efd < 0) {
		failing_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (failing_efd < 0 ||
		    tgt_event_add(failing_efd, EPOLLIN, failing_event, NULL)) {
			if (failing_efd >= 0)
				close(failing_efd);
			failing_efd = -1;
			return -EIO;
		}
	}
	memset(m, 0, sizeof(*m));
	m->array = a;
	m->id = id;
	m->position = -1;
	m->fd = -1;
	tgt_init_sched_event(&m->flush, member_flush, m);
	snprintf(m->login_url, sizeof(m->login_url), "%s", url);
	tpt_spec_hide_secrets(url, m->url, sizeof(m->url));
	INIT_LIST_HEAD(&m->cmds);
	if (list_empty(&watched_members)) {
		member_tick_work.func = member_tick;
		add_work(&member_tick_work, 1);
	}
	list_add_tail(&m->watch_link, &watched_members);
	return 0;
}

void member_close(struct tpt_member *m)
{
	if (!m->array)
		return;
	list_del(&m->watch_link);
	/* The tick runs while anything is watched. */
	if (list_empty(&watched_members))
		del_work(&member_tick_work);
	if (m->failing) {
		list_del(&m->fail_link);
		m->failing = false;
	}
	if (m->link == MEMBER_ONLINE && m->iscsi) {
		iscsi_set_timeout(m->iscsi, MEMBER_STOP_TIMEOUT);
		if (m->fenced)
			member_unfence_sync(m, m->array->array_id);
		iscsi_logout_sync(m->iscsi);
	}
	if (m->link != MEMBER_OFFLINE) {
		snprintf(m->fail_reason, sizeof(m->fail_reason), "%s",
			 "the array is stopping");
		member_teardown(m);
	}
	m->array = NULL;
}
