/* Register_Buffer / Deregister_Buffer: the pool and caller registrations.
 *
 * The pool's memory is mapped and populated once at open.  A buffer is
 * registered when it is handed out, in the scope asked for, with exactly
 * the remote access asked for, over exactly the bytes asked for and
 * under a fresh key (tpt_dm_fabric_mr_reg), and deregistered when it
 * comes back: that makes every STag handed out for it stale, and no free
 * buffer is reachable by any peer.  Only the scope's peers reach it
 * while it is out (tpt_dm.h), and none reaches past its length: the rest
 * of the pool buffer holds whatever an earlier request left there, and
 * no provider needs the length rounded.  One registration per use, as
 * when buffers were registered again on their way back; seed 004's
 * warning is about registering caller memory per I/O, which the pool
 * still avoids. */
#include "iser/tpt_dm_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DM_ACCESS_MASK (TPT_DM_ACCESS_REMOTE_READ | TPT_DM_ACCESS_REMOTE_WRITE)

static uint64_t dm_fi_access(unsigned int access)
{
	/* Local read/write always: the buffer is also the source or the
	 * target of our own Put/Get, which FI_MR_LOCAL providers check. */
	uint64_t fi_access = FI_READ | FI_WRITE;

	if (access & TPT_DM_ACCESS_REMOTE_READ)
		fi_access |= FI_REMOTE_READ;
	if (access & TPT_DM_ACCESS_REMOTE_WRITE)
		fi_access |= FI_REMOTE_WRITE;
	return fi_access;
}

/* Registers buf->len bytes at buf->addr in scope @scope_id. */
static int dm_mr_register(struct tpt_dm *dm, struct tpt_dm_buf *buf,
			  uint64_t scope_id, uint64_t fi_access)
{
	int ret = dm_scope_get(dm, scope_id, &buf->scope);

	if (ret)
		return ret;
	ret = tpt_dm_fabric_mr_reg(&dm->fab, &buf->scope->dom, buf->addr,
				   buf->len, fi_access, buf, &buf->mr);
	if (ret) {
		dm_scope_put(buf->scope);
		buf->scope = NULL;
		return ret;
	}
	buf->stag = fi_mr_key(buf->mr);
	buf->mr_access = fi_access;
	return 0;
}

static void dm_mr_close(struct tpt_dm *dm, struct tpt_dm_buf *buf)
{
	int ret;

	if (!buf->mr)
		return;
	ret = fi_close(&buf->mr->fid);
	if (ret)
		dm_log(dm, "closing MR of %zu bytes: %s", buf->len,
		       fi_strerror(-ret));
	buf->mr = NULL;
	buf->stag = 0;
	/* After the MR: a scope left empty closes its domain. */
	dm_scope_put(buf->scope);
	buf->scope = NULL;
}

static size_t dm_round_up(size_t n, size_t align)
{
	return (n + align - 1) / align * align;
}

int dm_pool_open(struct tpt_dm *dm)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t count = dm->cfg.pool_bytes / dm->cfg.pool_buf_bytes;
	size_t stride = dm_round_up(dm->cfg.pool_buf_bytes, page);
	size_t i;

	dm->pool_count = count;
	dm->pool_map_len = count * stride;
	/* Populated up front: FI_MR_ALLOCATED providers need backed pages,
	 * and the data path should never fault them in. */
	dm->pool_mem = mmap(NULL, dm->pool_map_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (dm->pool_mem == MAP_FAILED) {
		dm->pool_mem = NULL;
		return dm_error(dm, -errno, "mapping a %zu byte pool: %s",
				dm->pool_map_len, strerror(errno));
	}
	dm->pool = calloc(count, sizeof(*dm->pool));
	if (!dm->pool)
		return dm_error(dm, -ENOMEM, "out of memory");
	for (i = count; i-- > 0;) {
		struct tpt_dm_buf *buf = &dm->pool[i];

		buf->dm = dm;
		buf->addr = (char *)dm->pool_mem + i * stride;
		buf->from_pool = true;
		dm_list_init(&buf->link);
		buf->next_free = dm->pool_free;
		dm->pool_free = buf;
	}
	return 0;
}

void dm_bufs_close(struct tpt_dm *dm)
{
	struct dm_list *pos, *next;
	size_t i;

	for (pos = dm->user_bufs.next; pos != &dm->user_bufs; pos = next) {
		struct tpt_dm_buf *buf =
			dm_container_of(pos, struct tpt_dm_buf, link);

		next = pos->next;
		dm_mr_close(dm, buf);
		free(buf);
	}
	dm_list_init(&dm->user_bufs);
	for (i = 0; dm->pool && i < dm->pool_count; i++)
		dm_mr_close(dm, &dm->pool[i]);
	free(dm->pool);
	dm->pool = NULL;
	dm->pool_free = NULL;
	if (dm->pool_mem)
		munmap(dm->pool_mem, dm->pool_map_len);
	dm->pool_mem = NULL;
}

int tpt_dm_buf_get(struct tpt_dm *dm, uint64_t scope, size_t len,
		   unsigned int access, struct tpt_dm_buf **out)
{
	struct tpt_dm_buf *buf;
	uint64_t fi_access = dm_fi_access(access);
	int ret;

	*out = NULL;
	if (access & ~DM_ACCESS_MASK)
		return dm_error(dm, -EINVAL, "buf_get: unknown access bits "
				"0x%x", access);
	if (!len || len > dm->cfg.pool_buf_bytes)
		return dm_error(dm, -EINVAL,
				"buf_get: %zu bytes: the pool's buffers hold "
				"1 to %zu", len, dm->cfg.pool_buf_bytes);
	buf = dm->pool_free;
	if (!buf) {
		dm->stats.pool_exhausted++;
		return dm_error(dm, -EAGAIN, "buf_get: pool of %zu buffers "
				"exhausted", dm->pool_count);
	}
	/* Remote access exactly as asked: a buffer lent out for Get_Data
	 * must not take Put_Data. */
	buf->len = len;
	ret = dm_mr_register(dm, buf, scope, fi_access);
	if (ret)
		return ret;
	dm->pool_free = buf->next_free;
	buf->next_free = NULL;
	buf->in_use = true;
	*out = buf;
	return 0;
}

int tpt_dm_register(struct tpt_dm *dm, uint64_t scope, void *addr,
		    size_t len, unsigned int access, struct tpt_dm_buf **out)
{
	struct tpt_dm_buf *buf;
	int ret;

	*out = NULL;
	if (!addr || !len)
		return dm_error(dm, -EINVAL, "register: empty region");
	if (access & ~DM_ACCESS_MASK)
		return dm_error(dm, -EINVAL, "register: unknown access bits "
				"0x%x", access);
	buf = calloc(1, sizeof(*buf));
	if (!buf)
		return dm_error(dm, -ENOMEM, "out of memory");
	buf->dm = dm;
	buf->addr = addr;
	buf->len = len;
	buf->in_use = true;
	ret = dm_mr_register(dm, buf, scope, dm_fi_access(access));
	if (ret) {
		free(buf);
		return ret;
	}
	dm_list_add_tail(&dm->user_bufs, &buf->link);
	*out = buf;
	return 0;
}

void tpt_dm_buf_release(struct tpt_dm_buf *buf)
{
	struct tpt_dm *dm;

	if (!buf || !buf->in_use)
		return;
	dm = buf->dm;
	dm_mr_close(dm, buf);
	buf->in_use = false;
	if (!buf->from_pool) {
		dm_list_del(&buf->link);
		free(buf);
		return;
	}
	buf->next_free = dm->pool_free;
	dm->pool_free = buf;
}

void *tpt_dm_buf_addr(const struct tpt_dm_buf *buf)
{
	return buf->addr;
}

size_t tpt_dm_buf_len(const struct tpt_dm_buf *buf)
{
	return buf->len;
}

uint64_t tpt_dm_buf_stag(const struct tpt_dm_buf *buf)
{
	return buf->stag;
}

uint64_t tpt_dm_buf_rma_base(const struct tpt_dm_buf *buf)
{
	return tpt_dm_fabric_rma_base(&buf->dm->fab, buf->addr);
}
