/* The datamover context: libfabric objects, the one pollable fd, progress.
 *
 * One EQ (connection events) per context and one CQ (RMA completions of
 * its endpoints) per scope, all with FI_WAIT_FD wait objects.  Their fds
 * and an eventfd of our own sit in an epoll set whose fd is what the
 * owner polls: nested epoll fds report readiness level-triggered, so the
 * owner wakes on connection events, on completions and, because the tcp
 * provider puts its sockets in their CQ's wait set, on incoming RMA that
 * needs our progress on the passive side. */
#include "iser/tpt_dm_priv.h"
#include "iser/tpt_dm_provider.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define DM_DEFAULT_POOL_BYTES (64u << 20)
#define DM_DEFAULT_POOL_BUF_BYTES (1u << 20)
#define DM_DEFAULT_CHUNK_BYTES (1u << 20)
#define DM_DEFAULT_MAX_INFLIGHT 16u
#define DM_MAX_INFLIGHT_LIMIT 4096u
/* Rounds of EQ + CQ processing per tpt_dm_progress() call while a CQ
 * keeps handing out full batches: enough to drain a busy context, few
 * enough not to starve the owner's other fds.  When work is left we wake
 * ourselves instead of looping on. */
#define DM_PROGRESS_ROUNDS 8

int dm_error(struct tpt_dm *dm, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dm->fab.errbuf, sizeof(dm->fab.errbuf), fmt, ap);
	va_end(ap);
	return err;
}

void dm_log(struct tpt_dm *dm, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dm->cfg.log)
		dm->cfg.log(dm->cfg.log_arg, msg);
	else
		fprintf(stderr, "tpt-dm: %s\n", msg);
}

void dm_wake(struct tpt_dm *dm)
{
	uint64_t one = 1;

	/* One write keeps the fd readable until drained: save the rest. */
	if (dm->wake_pending)
		return;
	dm->wake_pending = true;
	if (write(dm->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		dm_log(dm, "eventfd write: %s", strerror(errno));
}

static void dm_wake_drain(struct tpt_dm *dm)
{
	uint64_t count;

	if (!dm->wake_pending)
		return;
	dm->wake_pending = false;
	if (read(dm->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		dm_log(dm, "eventfd read: %s", strerror(errno));
}

static int dm_epoll_add(struct tpt_dm *dm, int fd, const char *what)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ev.data.fd = fd;
	if (epoll_ctl(dm->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return dm_error(dm, -errno, "epoll add %s fd: %s", what,
				strerror(errno));
	return 0;
}

/* The one fd the owner polls: the EQ's wait fd and our own eventfd in an
 * epoll set, where each scope adds its CQ's. */
static int dm_open_event_fd(struct tpt_dm *dm)
{
	int eq_fd, ret;

	ret = fi_control(&dm->fab.eq->fid, FI_GETWAIT, &eq_fd);
	if (ret)
		return dm_error(dm, tpt_dm_fabric_errno(ret), "EQ wait fd: %s",
				fi_strerror(-ret));

	dm->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (dm->epoll_fd < 0)
		return dm_error(dm, -errno, "epoll_create1: %s",
				strerror(errno));
	dm->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dm->wake_fd < 0)
		return dm_error(dm, -errno, "eventfd: %s", strerror(errno));
	ret = dm_epoll_add(dm, eq_fd, "EQ");
	if (!ret)
		ret = dm_epoll_add(dm, dm->wake_fd, "wake");
	return ret;
}

static void dm_free(struct tpt_dm *dm)
{
	struct dm_list *pos, *next;

	/* Endpoints first: closing them makes the provider hand back (or
	 * drop) every context it still holds; then the memory they used,
	 * the registrations, the scopes' domains and the fabric. */
	for (pos = dm->peers.next; pos != &dm->peers; pos = pos->next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		if (peer->ep) {
			fi_close(&peer->ep->fid);
			peer->ep = NULL;
		}
	}
	for (pos = dm->peers.next; pos != &dm->peers; pos = next) {
		next = pos->next;
		dm_peer_free(dm_container_of(pos, struct tpt_dm_peer, link));
	}
	dm_bufs_close(dm);
	dm_ops_close(dm);
	dm_seen_peers_free(dm);
	dm_scopes_close(dm);
	tpt_dm_fabric_close(&dm->fab);
	if (dm->epoll_fd >= 0)
		close(dm->epoll_fd);
	if (dm->wake_fd >= 0)
		close(dm->wake_fd);
	free(dm->provider);
	free(dm);
}

int tpt_dm_open(const struct tpt_dm_config *cfg, struct tpt_dm **out)
{
	struct tpt_dm *dm;
	const char *provider;
	int ret;

	*out = NULL;
	if (!cfg)
		return -EINVAL;
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->cfg = *cfg;
	dm->epoll_fd = dm->wake_fd = -1;
	dm_list_init(&dm->peers);
	dm_list_init(&dm->scopes);
	dm_list_init(&dm->user_bufs);
	dm_list_init(&dm->seen_peers);
	if (!dm->cfg.pool_bytes)
		dm->cfg.pool_bytes = DM_DEFAULT_POOL_BYTES;
	if (!dm->cfg.pool_buf_bytes)
		dm->cfg.pool_buf_bytes = DM_DEFAULT_POOL_BUF_BYTES;
	if (!dm->cfg.chunk_bytes)
		dm->cfg.chunk_bytes = DM_DEFAULT_CHUNK_BYTES;
	if (!dm->cfg.max_inflight)
		dm->cfg.max_inflight = DM_DEFAULT_MAX_INFLIGHT;
	if (dm->cfg.max_inflight > DM_MAX_INFLIGHT_LIMIT) {
		ret = dm_error(dm, -EINVAL, "max_inflight %u exceeds %u",
			       dm->cfg.max_inflight, DM_MAX_INFLIGHT_LIMIT);
		goto fail;
	}
	if (dm->cfg.pool_buf_bytes > dm->cfg.pool_bytes) {
		ret = dm_error(dm, -EINVAL,
			       "pool_buf_bytes %zu exceeds pool_bytes %zu",
			       dm->cfg.pool_buf_bytes, dm->cfg.pool_bytes);
		goto fail;
	}
	/* The caller's strings need not outlive this call. */
	dm->cfg.listen_addr = NULL;
	dm->cfg.provider = NULL;

	provider = cfg->provider ? cfg->provider : tpt_dm_provider_choose();
	if (!provider) {
		const char *forced = getenv("TPT_DM_PROVIDER");

		ret = dm_error(dm, -ENODEV, "no usable libfabric provider "
			       "(TPT_DM_PROVIDER=%s)", forced ? forced : "unset");
		goto fail;
	}
	dm->provider = strdup(provider);
	if (!dm->provider) {
		ret = dm_error(dm, -ENOMEM, "out of memory");
		goto fail;
	}
	dm->provider_is_verbs = !strcmp(provider, "verbs");
	ret = tpt_dm_fabric_open(&dm->fab, provider, cfg->listen_addr,
				 cfg->listen_port);
	if (ret)
		goto fail;
	/* Where writes on an endpoint are processed in order, the last
	 * chunk's delivery vouches for the chunks before it, which then
	 * only need to have left: one acknowledgement per put instead of
	 * one per chunk. */
	dm->early_write_flags = dm->fab.write_flags;
	if (dm->fab.info->tx_attr->msg_order & FI_ORDER_WAW)
		dm->early_write_flags = FI_COMPLETION;
	if (dm->cfg.chunk_bytes > dm->fab.info->ep_attr->max_msg_size)
		dm->cfg.chunk_bytes = dm->fab.info->ep_attr->max_msg_size;
	ret = dm_open_event_fd(dm);
	if (ret)
		goto fail;
	ret = dm_pool_open(dm);
	if (ret)
		goto fail;
	ret = dm_ops_open(dm);
	if (ret)
		goto fail;
	dm->eq_trywait_ok = true;
	*out = dm;
	return 0;

fail:
	dm_log(dm, "open failed: %s", dm->fab.errbuf);
	dm_free(dm);
	return ret;
}

void tpt_dm_close(struct tpt_dm *dm)
{
	struct dm_list *pos;

	if (!dm)
		return;
	dm->closing = true;
	dm->busy++;
	/* Teardown runs owners' callbacks, which may disconnect peers or
	 * release buffers but never frees a peer while we are busy. */
	for (pos = dm->peers.next; pos != &dm->peers; pos = pos->next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		if (peer->state != DM_PEER_DOWN)
			dm_peer_teardown(peer, -ECANCELED, false);
	}
	dm_free(dm);
}

int tpt_dm_event_fd(const struct tpt_dm *dm)
{
	return dm->epoll_fd;
}

/* Before the owner sleeps on our fd, libfabric must agree that sleeping is
 * safe (fi_trywait): the tcp provider uses this moment to ask for POLLOUT
 * on sockets with queued data, and it may have buffered input that no fd
 * will announce.  When it says "not yet" for any of our queues, the
 * eventfd keeps our fd readable so the owner comes straight back.  Each
 * queue is asked on its own: a trywait on several is the same question
 * asked of each in turn, and this way a refusal names its queue. */
static void dm_arm_wait(struct tpt_dm *dm)
{
	struct dm_list *pos;
	struct fid *fid;
	int ret;

	for (pos = dm->scopes.next; pos != &dm->scopes; pos = pos->next) {
		fid = &dm_container_of(pos, struct dm_scope, link)->dom.cq->fid;
		ret = fi_trywait(dm->fab.fabric, &fid, 1);
		if (ret == -FI_EAGAIN) {
			dm_wake(dm);
			return;
		}
		if (ret && !dm->trywait_failed) {
			/* Nothing better to do than trust the fds; say so
			 * once. */
			dm->trywait_failed = true;
			dm_log(dm, "fi_trywait: %s", fi_strerror(-ret));
		}
	}
	/* fi_trywait on the EQ is not offered by every provider; then the
	 * EQ's fd alone is trusted, as with any level-triggered fd. */
	if (!dm->eq_trywait_ok)
		return;
	fid = &dm->fab.eq->fid;
	ret = fi_trywait(dm->fab.fabric, &fid, 1);
	if (ret == -FI_EAGAIN)
		dm_wake(dm);
	else if (ret)
		dm->eq_trywait_ok = false;
}

/* Peers whose posting stopped: a provider queue was full (-FI_EAGAIN) or a
 * post failed outside progress, where no callback may run. */
static void dm_retry_peers(struct tpt_dm *dm)
{
	struct dm_list *pos;

	for (pos = dm->peers.next; pos != &dm->peers; pos = pos->next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		if (peer->state != DM_PEER_UP)
			continue;
		if (peer->fail_pending)
			dm_peer_teardown(peer, -ECONNRESET, true);
		else if (peer->kick_pending)
			dm_peer_kick(peer);
	}
}

/* Completions of every scope: *more when any CQ may have entries left. */
static int dm_scopes_progress(struct tpt_dm *dm, bool *more)
{
	struct dm_list *pos;
	int ret;

	*more = false;
	/* A callback may open a scope (it goes to the tail, and is polled
	 * too) but none is closed while we are busy. */
	for (pos = dm->scopes.next; pos != &dm->scopes; pos = pos->next) {
		bool left;

		ret = dm_cq_progress(dm, dm_container_of(pos, struct dm_scope,
							 link), &left);
		if (ret < 0)
			return ret;
		*more |= left;
	}
	return 0;
}

void dm_reap(struct tpt_dm *dm)
{
	if (dm->busy)
		return;
	dm_peer_reap(dm);
	dm_scopes_reap(dm);
}

int tpt_dm_progress(struct tpt_dm *dm)
{
	int round, ret;
	bool more = false;

	/* A callback calling back in would re-enter the provider's queues
	 * mid-walk; the outer call finishes the job. */
	if (dm->busy)
		return 0;
	dm->busy++;
	dm->callbacks_run = 0;
	dm_wake_drain(dm);
	/* Events that our own callbacks cause (new posts completing, a
	 * teardown flushing a CQ) need no extra round here: fi_trywait
	 * sees them and keeps the fd readable. */
	for (round = 0; round < DM_PROGRESS_ROUNDS; round++) {
		ret = dm_eq_progress(dm);
		if (ret < 0)
			goto out;
		ret = dm_scopes_progress(dm, &more);
		if (ret < 0)
			goto out;
		dm_retry_peers(dm);
		if (!more)
			break;
	}
	if (more)
		dm_wake(dm);
	else
		dm_arm_wait(dm);
	ret = dm->callbacks_run;
out:
	dm->busy--;
	dm_reap(dm);
	return ret;
}

uint16_t tpt_dm_listen_port(const struct tpt_dm *dm)
{
	return dm->fab.listen_port;
}

const char *tpt_dm_provider_name(const struct tpt_dm *dm)
{
	return dm->provider;
}

bool tpt_dm_virt_addr(const struct tpt_dm *dm)
{
	return (dm->fab.mr_mode & FI_MR_VIRT_ADDR) != 0;
}

const char *tpt_dm_strerror(const struct tpt_dm *dm)
{
	return dm->fab.errbuf[0] ? dm->fab.errbuf : "no error";
}

void tpt_dm_set_peer_down_cb(struct tpt_dm *dm,
			     void (*cb)(struct tpt_dm_peer *peer, void *arg),
			     void *arg)
{
	dm->peer_down_cb = cb;
	dm->peer_down_arg = arg;
}

void tpt_dm_set_peer_up_cb(struct tpt_dm *dm,
			   void (*cb)(struct tpt_dm_peer *peer, void *arg),
			   void *arg)
{
	dm->peer_up_cb = cb;
	dm->peer_up_arg = arg;
}

void tpt_dm_get_stats(const struct tpt_dm *dm, struct tpt_dm_stats *st)
{
	*st = dm->stats;
}
