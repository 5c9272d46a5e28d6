/* nbdkit-tptraid-plugin: a TPT-RAID LUN as an NBD export, through
 * libtptinitiator, so that nbd-client (the kernel's nbd), qemu, nbdcopy
 * and fio's nbd engine run on host-direct TPT-RAID (and on any other
 * iSCSI LUN, as plain iSCSI).
 *
 *   nbdkit nbdkit-tptraid-plugin.so url=iscsi://HOST/IQN/LUN \
 *          [user=U password=P|-|+FILE] [dm=ADDR[:PORT]] [max_io=4M] ...
 *
 * Thread model PARALLEL.  The library is not thread-safe, so every NBD
 * connection gets its own context (its own iSCSI session, datamover and
 * host key) owned by one service thread that runs the library's event
 * loop.  nbdkit's worker threads hand their requests to it through a
 * mutex'ed queue and an eventfd, and sleep on a condition variable until
 * their request completes. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "initiator/tpt_init_args.h"
#include "initiator/tpt_initiator.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* --- configuration (nbdkit's main thread, before any connection) --- */

static char *cfg_url, *cfg_user, *cfg_password, *cfg_target_user,
	    *cfg_target_password, *cfg_initiator, *cfg_provider;
static char cfg_dm_addr[64];
static uint16_t cfg_dm_port;
static size_t cfg_max_io;
static unsigned int cfg_qd, cfg_timeout, cfg_merge, cfg_direct_retry;
static enum tpt_init_direct cfg_direct;

static void tptraid_unload(void)
{
	free(cfg_url);
	free(cfg_user);
	if (cfg_password)
		explicit_bzero(cfg_password, strlen(cfg_password));
	free(cfg_password);
	free(cfg_target_user);
	if (cfg_target_password)
		explicit_bzero(cfg_target_password,
			       strlen(cfg_target_password));
	free(cfg_target_password);
	free(cfg_initiator);
	free(cfg_provider);
}

static int set_string(char **field, const char *key, const char *value)
{
	if (*field) {
		nbdkit_error("%s given twice", key);
		return -1;
	}
	*field = strdup(value);
	if (!*field) {
		nbdkit_error("strdup: %m");
		return -1;
	}
	return 0;
}

static int parse_number(const char *key, const char *value, uint64_t max,
			uint64_t *out)
{
	if (tpt_init_parse_size(value, out) || *out > max) {
		nbdkit_error("%s=%s: a number up to %" PRIu64 " (k, m, g "
			     "suffixes)", key, value, max);
		return -1;
	}
	return 0;
}

static int tptraid_config(const char *key, const char *value)
{
	uint64_t v;

	if (!strcmp(key, "url"))
		return set_string(&cfg_url, key, value);
	if (!strcmp(key, "user"))
		return set_string(&cfg_user, key, value);
	if (!strcmp(key, "target_user"))
		return set_string(&cfg_target_user, key, value);
	if (!strcmp(key, "initiator"))
		return set_string(&cfg_initiator, key, value);
	if (!strcmp(key, "provider"))
		return set_string(&cfg_provider, key, value);
	if (!strcmp(key, "password") || !strcmp(key, "target_password")) {
		char **field = key[0] == 'p' ? &cfg_password :
			       &cfg_target_password;

		if (*field) {
			nbdkit_error("%s given twice", key);
			return -1;
		}
		/* "-" asks on the tty, "+FILE" reads a file, "-FD" a
		 * descriptor: secrets stay out of ps. */
		return nbdkit_read_password(value, field);
	}
	if (!strcmp(key, "dm")) {
		if (tpt_init_parse_endpoint(value, cfg_dm_addr,
					    sizeof(cfg_dm_addr),
					    &cfg_dm_port)) {
			nbdkit_error("dm=%s: ADDR, ADDR:PORT, [IPV6]:PORT or "
				     ":PORT, numeric", value);
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "max_io")) {
		if (parse_number(key, value, 64u << 20, &v))
			return -1;
		if (v < 512 || v % 512) {
			nbdkit_error("max_io=%s: a multiple of 512", value);
			return -1;
		}
		cfg_max_io = (size_t)v;
		return 0;
	}
	if (!strcmp(key, "qd")) {
		if (parse_number(key, value, 256, &v) || !v)
			return v ? -1 : (nbdkit_error("qd=0"), -1);
		cfg_qd = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "merge")) {
		if (parse_number(key, value, TPT_INIT_MERGE_MAX, &v) || !v)
			return v ? -1 : (nbdkit_error("merge=0"), -1);
		cfg_merge = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "timeout")) {
		if (parse_number(key, value, 3600, &v) || !v)
			return v ? -1 : (nbdkit_error("timeout=0"), -1);
		cfg_timeout = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "direct_retry")) {
		if (parse_number(key, value, 3600, &v) || !v)
			return v ? -1 : (nbdkit_error("direct_retry=0"), -1);
		cfg_direct_retry = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "direct")) {
		if (tpt_init_parse_direct(value, &cfg_direct)) {
			nbdkit_error("direct=%s: auto, on or off", value);
			return -1;
		}
		return 0;
	}
	nbdkit_error("unknown parameter '%s' (see --help)", key);
	return -1;
}

static void log_to_nbdkit(void *arg, enum tpt_init_log_level level,
			  const char *msg)
{
	(void)arg;
	if (level == TPT_INIT_LOG_INFO)
		nbdkit_debug("%s", msg);
	else
		nbdkit_error("%s", msg);
}

static void fill_config(struct tpt_init_config *c)
{
	memset(c, 0, sizeof(*c));
	c->url = cfg_url;
	c->user = cfg_user;
	c->password = cfg_password;
	c->target_user = cfg_target_user;
	c->target_password = cfg_target_password;
	c->initiator_name = cfg_initiator ? cfg_initiator :
		"iqn.2026-11.org.tptraid:nbdkit";
	c->direct = cfg_direct;
	c->dm_addr = cfg_dm_addr[0] ? cfg_dm_addr : NULL;
	c->dm_port = cfg_dm_port;
	c->dm_provider = cfg_provider;
	c->max_io = cfg_max_io;
	c->queue_depth = cfg_qd;
	c->timeout_s = cfg_timeout;
	c->merge_max = cfg_merge;
	c->direct_retry_s = cfg_direct_retry;
	c->log = log_to_nbdkit;
}

static int tptraid_config_complete(void)
{
	struct tpt_init_config c;
	struct tpt_init *ctx;
	char err[512];

	if (!cfg_url) {
		nbdkit_error("url=iscsi://HOST[:PORT]/IQN/LUN is required");
		return -1;
	}
	/* Judge the URL and values now, not at the first connection. */
	fill_config(&c);
	if (tpt_init_new(&c, &ctx, err, sizeof(err))) {
		nbdkit_error("%s", err);
		return -1;
	}
	tpt_init_close(ctx);
	return 0;
}

#define tptraid_config_help \
	"url=iscsi://[USER[%PASS]@]HOST[:PORT]/IQN/LUN  (required) the LUN.\n" \
	"user=USER           CHAP user (overrides the URL's).\n" \
	"password=PASS|-|+FILE|-FD  CHAP secret, as nbdkit reads passwords.\n" \
	"target_user=USER    mutual CHAP: the name the target answers with.\n" \
	"target_password=..  mutual CHAP: the target's secret.\n" \
	"initiator=IQN       our initiator name.\n" \
	"direct=auto|on|off  host-direct: try and fall back, insist, never.\n" \
	"direct_retry=S      after a target lost its path to us, direct again\n" \
	"                    in S seconds, doubling while it stays lost (60).\n" \
	"dm=ADDR[:PORT]      where the datamover listens (default: the local\n" \
	"                    address of the iSCSI connection, ephemeral port).\n" \
	"provider=NAME       libfabric provider (default: the datamover's pick).\n" \
	"max_io=SIZE         largest SCSI command, 512..64M (4M).\n" \
	"qd=N                commands in flight per connection, 1..256 (16).\n" \
	"merge=N             adjacent requests one command may carry, 1..64\n" \
	"                    (64; 1: never merge).\n" \
	"timeout=S           login and command timeout in seconds (30)."

/* --- one connection --- */

enum job_kind { JOB_READ, JOB_WRITE, JOB_FLUSH };

struct conn;

struct job {
	struct conn *conn;
	enum job_kind kind;
	void *buf;
	uint32_t count;
	uint64_t offset;
	uint32_t flags;
	bool done;
	int status;
	char msg[256];
	struct job *next;
};

struct conn {
	struct tpt_init *ctx;		/* the service thread's alone */
	uint64_t size;
	uint32_t block_size;
	size_t max_io;
	pthread_t thread;
	int efd;			/* wakes the service thread */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a job is done */
	struct job *head, *tail;	/* waiting for the service thread */
	bool stop;
};

static void job_done(struct tpt_init *ctx, int status, void *arg);

/* Service thread: gives the queued jobs to the library. */
static void take_jobs(struct conn *c)
{
	struct job *list, *j;
	uint64_t n;
	int ret;

	if (read(c->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		nbdkit_debug("eventfd read: %m");
	pthread_mutex_lock(&c->lock);
	list = c->head;
	c->head = c->tail = NULL;
	pthread_mutex_unlock(&c->lock);
	while ((j = list)) {
		list = j->next;
		switch (j->kind) {
		case JOB_READ:
			ret = tpt_init_pread_async(c->ctx, j->buf, j->count,
						   j->offset, job_done, j);
			break;
		case JOB_WRITE:
			ret = tpt_init_pwrite_async(c->ctx, j->buf, j->count,
						    j->offset,
						    j->flags & NBDKIT_FLAG_FUA ?
						    TPT_INIT_FUA : 0,
						    job_done, j);
			break;
		default:
			ret = tpt_init_flush_async(c->ctx, job_done, j);
			break;
		}
		if (ret)
			job_done(c->ctx, ret, j);
	}
}

static void job_done(struct tpt_init *ctx, int status, void *arg)
{
	struct job *j = arg;
	struct conn *c = j->conn;

	if (status)
		snprintf(j->msg, sizeof(j->msg), "%s", tpt_init_error(ctx));
	pthread_mutex_lock(&c->lock);
	j->status = status;
	j->done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void *service_thread(void *arg)
{
	struct conn *c = arg;

	for (;;) {
		struct pollfd fds[TPT_INIT_MAX_FDS + 1];
		int n = tpt_init_get_fds(c->ctx, fds);
		bool stop;

		fds[n].fd = c->efd;
		fds[n].events = POLLIN;
		fds[n].revents = 0;
		if (poll(fds, (nfds_t)n + 1, tpt_init_poll_timeout_ms(c->ctx)) < 0 &&
		    errno != EINTR) {
			nbdkit_error("poll: %m");
			continue;
		}
		tpt_init_service(c->ctx, fds, n);
		if (fds[n].revents & POLLIN)
			take_jobs(c);
		/* Callbacks of jobs that failed at once run now. */
		tpt_init_service(c->ctx, fds, 0);
		pthread_mutex_lock(&c->lock);
		stop = c->stop && !c->head;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
	}
	return NULL;
}

static void *tptraid_open(int readonly)
{
	struct tpt_init_config cfg;
	struct conn *c;
	char err[512];
	int ret;

	(void)readonly;
	c = calloc(1, sizeof(*c));
	if (!c) {
		nbdkit_error("calloc: %m");
		return NULL;
	}
	c->efd = -1;
	fill_config(&cfg);
	if (tpt_init_new(&cfg, &c->ctx, err, sizeof(err))) {
		nbdkit_error("%s", err);
		goto fail;
	}
	/* Blocking, in this thread: the service thread takes the context
	 * over once it is up (pthread_create orders the two). */
	ret = tpt_init_connect(c->ctx);
	if (ret) {
		nbdkit_error("%s", tpt_init_error(c->ctx));
		goto fail;
	}
	c->size = tpt_init_size(c->ctx);
	c->block_size = tpt_init_block_size(c->ctx);
	c->max_io = tpt_init_max_io(c->ctx);
	nbdkit_debug("tptraid: %s, %" PRIu64 " bytes in blocks of %u%s%s",
		     tpt_init_is_direct(c->ctx) ? "host-direct" : "plain iSCSI",
		     c->size, c->block_size,
		     tpt_init_is_direct(c->ctx) ? ", datamover on " : "",
		     tpt_init_dm_endpoint(c->ctx));
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		nbdkit_error("eventfd: %m");
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	ret = pthread_create(&c->thread, NULL, service_thread, c);
	if (ret) {
		nbdkit_error("pthread_create: %s", strerror(ret));
		pthread_mutex_destroy(&c->lock);
		pthread_cond_destroy(&c->cond);
		goto fail;
	}
	return c;
fail:
	if (c->efd >= 0)
		close(c->efd);
	tpt_init_close(c->ctx);
	free(c);
	return NULL;
}

static void wake(struct conn *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0)
		nbdkit_debug("eventfd write: %m");
}

static void tptraid_close(void *handle)
{
	struct conn *c = handle;

	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_mutex_unlock(&c->lock);
	wake(c);
	pthread_join(c->thread, NULL);
	/* Logout revokes the host key; the datamover closes. */
	tpt_init_close(c->ctx);
	close(c->efd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* A worker thread's request: queue it, wake the service thread, sleep. */
static int run_job(struct conn *c, struct job *j)
{
	j->conn = c;
	pthread_mutex_lock(&c->lock);
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	pthread_mutex_unlock(&c->lock);
	wake(c);
	pthread_mutex_lock(&c->lock);
	while (!j->done)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	if (j->status) {
		nbdkit_error("%s", j->msg);
		nbdkit_set_error(-j->status == ECANCELED ||
				 -j->status == ENOTCONN ||
				 -j->status == ETIMEDOUT ? EIO : -j->status);
		return -1;
	}
	return 0;
}

static int64_t tptraid_get_size(void *handle)
{
	return (int64_t)((struct conn *)handle)->size;
}

static int tptraid_block_size(void *handle, uint32_t *minimum,
			      uint32_t *preferred, uint32_t *maximum)
{
	struct conn *c = handle;

	*minimum = c->block_size;
	*preferred = c->block_size > 4096 ? c->block_size : 4096;
	*maximum = (uint32_t)c->max_io;
	return 0;
}

static int tptraid_can_flush(void *handle)
{
	(void)handle;
	return 1;
}

static int tptraid_can_fua(void *handle)
{
	(void)handle;
	return NBDKIT_FUA_NATIVE;
}

static int tptraid_pread(void *handle, void *buf, uint32_t count,
			 uint64_t offset, uint32_t flags)
{
	struct job j = { .kind = JOB_READ, .buf = buf, .count = count,
			 .offset = offset };

	(void)flags;
	return run_job(handle, &j);
}

static int tptraid_pwrite(void *handle, const void *buf, uint32_t count,
			  uint64_t offset, uint32_t flags)
{
	struct job j = { .kind = JOB_WRITE, .buf = (void *)(uintptr_t)buf,
			 .count = count, .offset = offset, .flags = flags };

	return run_job(handle, &j);
}

static int tptraid_flush(void *handle, uint32_t flags)
{
	struct job j = { .kind = JOB_FLUSH };

	(void)flags;
	return run_job(handle, &j);
}

static struct nbdkit_plugin plugin = {
	.name = "tptraid",
	.longname = "TPT-RAID host-direct initiator (libtptinitiator)",
	.version = "0.1.0",
	.description = "A TPT-RAID LUN over iSCSI, its data moved straight "
		       "between the target boxes and this host by RMA "
		       "(plain iSCSI on other LUNs).",
	.unload = tptraid_unload,
	.config = tptraid_config,
	.config_complete = tptraid_config_complete,
	.config_help = tptraid_config_help,
	.magic_config_key = "url",
	.open = tptraid_open,
	.close = tptraid_close,
	.get_size = tptraid_get_size,
	.block_size = tptraid_block_size,
	.can_flush = tptraid_can_flush,
	.can_fua = tptraid_can_fua,
	.pread = tptraid_pread,
	.pwrite = tptraid_pwrite,
	.flush = tptraid_flush,
};

struct nbdkit_plugin *plugin_init(void);
NBDKIT_REGISTER_PLUGIN(plugin)
