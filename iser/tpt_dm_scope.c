/* Datamover scopes (tpt_dm.h): one libfabric domain, with the CQ of its
 * endpoints, per scope id the owner names.
 *
 * A scope opens with the first registration or peer that names it and
 * closes once the last is gone.  A peer keeps its scope until it is
 * freed, which is after the provider handed back its last chunk, so a
 * domain is closed only when no endpoint, registration or completion of
 * it is left.  While the context is busy (a buffer released from a
 * callback may empty a scope while progress walks the scopes' CQs) the
 * closing waits for dm_reap().
 *
 * Scopes are opened and closed silently: which ids exist says something
 * about the owner's arrays, and the logs are not the place for it. */
#include "iser/tpt_dm_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

static void dm_scope_free(struct tpt_dm *dm, struct dm_scope *scope)
{
	/* Out of the epoll set before the CQ takes its fd away. */
	if (scope->cq_fd >= 0)
		epoll_ctl(dm->epoll_fd, EPOLL_CTL_DEL, scope->cq_fd, NULL);
	tpt_dm_fabric_domain_close(&scope->dom);
	dm_list_del(&scope->link);
	free(scope);
}

static int dm_scope_open(struct tpt_dm *dm, uint64_t id,
			 struct dm_scope **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct dm_scope *scope;
	int ret;

	scope = calloc(1, sizeof(*scope));
	if (!scope)
		return dm_error(dm, -ENOMEM, "out of memory");
	scope->dm = dm;
	scope->id = id;
	scope->cq_fd = -1;
	dm_list_add_tail(&dm->scopes, &scope->link);
	ret = tpt_dm_fabric_domain_open(&dm->fab, &scope->dom);
	if (ret)
		goto fail;
	ret = fi_control(&scope->dom.cq->fid, FI_GETWAIT, &scope->cq_fd);
	if (ret) {
		scope->cq_fd = -1;
		ret = dm_error(dm, tpt_dm_fabric_errno(ret), "CQ wait fd: %s",
			       fi_strerror(-ret));
		goto fail;
	}
	/* The owner's one fd must wake for this CQ too: its completions,
	 * and with tcp the sockets of its endpoints. */
	ev.data.fd = scope->cq_fd;
	if (epoll_ctl(dm->epoll_fd, EPOLL_CTL_ADD, scope->cq_fd, &ev) < 0) {
		ret = dm_error(dm, -errno, "epoll add CQ fd: %s",
			       strerror(errno));
		scope->cq_fd = -1;
		goto fail;
	}
	*out = scope;
	return 0;

fail:
	dm_scope_free(dm, scope);
	return ret;
}

int dm_scope_get(struct tpt_dm *dm, uint64_t id, struct dm_scope **out)
{
	struct dm_list *pos;
	int ret;

	for (pos = dm->scopes.next; pos != &dm->scopes; pos = pos->next) {
		struct dm_scope *scope =
			dm_container_of(pos, struct dm_scope, link);

		if (scope->id == id) {
			scope->refs++;
			*out = scope;
			return 0;
		}
	}
	ret = dm_scope_open(dm, id, out);
	if (!ret)
		(*out)->refs = 1;
	return ret;
}

void dm_scope_put(struct dm_scope *scope)
{
	if (!--scope->refs && !scope->dm->busy)
		dm_scope_free(scope->dm, scope);
}

void dm_scopes_reap(struct tpt_dm *dm)
{
	struct dm_list *pos, *next;

	for (pos = dm->scopes.next; pos != &dm->scopes; pos = next) {
		struct dm_scope *scope =
			dm_container_of(pos, struct dm_scope, link);

		next = pos->next;
		if (!scope->refs)
			dm_scope_free(dm, scope);
	}
}

void dm_scopes_close(struct tpt_dm *dm)
{
	while (!dm_list_empty(&dm->scopes))
		dm_scope_free(dm, dm_container_of(dm->scopes.next,
						  struct dm_scope, link));
}
