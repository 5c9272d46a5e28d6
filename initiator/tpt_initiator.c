/* libtptinitiator: the context, connect (login, capacity, datamover, host
 * key), the event loop and the blocking wrappers.  I/O is tpt_init_io.c.
 *
 * Connect is a chain of libiscsi callbacks:
 *   full connect -> READ CAPACITY(16) -> open the datamover -> TPT HOST KEY
 * and the key's answer decides between host-direct and plain SCSI. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "initiator/tpt_init_priv.h"
#include "scsi/tpt_sense.h"

#define DEFAULT_IQN "iqn.2026-11.org.tptraid:initiator"
#define DEFAULT_MAX_IO (4u << 20)
#define MAX_MAX_IO (64u << 20)
#define DEFAULT_QD 16
#define MAX_QD 256
#define DEFAULT_TIMEOUT 30
#define DEFAULT_DIRECT_RETRY 60

double init_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void init_log(struct tpt_init *ctx, enum tpt_init_log_level level,
	      const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ctx->cfg.log)
		ctx->cfg.log(ctx->cfg.log_arg, level, msg);
	else if (level <= TPT_INIT_LOG_WARNING)
		fprintf(stderr, "tptinitiator: %s\n", msg);
}

void init_seterr(struct tpt_init *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
}

bool init_sense_is(const struct scsi_task *task, enum tpt_sense_reason reason)
{
	const struct tpt_sense_code *c = tpt_sense_code(reason);

	return c && task->sense.key == c->key &&
	       task->sense.ascq == (c->asc << 8 | c->ascq);
}

/* libiscsi leaves the raw sense in the task's data-in, behind its 2-byte
 * length. */
bool init_task_sense(const struct scsi_task *task, struct tpt_sense *out)
{
	return task->datain.size >= 2 &&
	       !tpt_sense_parse(task->datain.data + 2,
				(size_t)task->datain.size - 2, out);
}

/* A MEDIUM ERROR's INFORMATION, when VALID: the first block the LUN could
 * not read or write (the blocks before it were done, as a disk reports a
 * bad sector). */
static const char *lost_block_text(const struct scsi_task *task, char *buf,
				   size_t len)
{
	struct tpt_sense sense;

	if (task->sense.key != SCSI_SENSE_MEDIUM_ERROR ||
	    !init_task_sense(task, &sense) || !sense.info.info_valid)
		return "";
	snprintf(buf, len, ", first block not done: %u",
		 sense.info.information);
	return buf;
}

int init_status_error(struct tpt_init *ctx, const char *what, int status,
		      const struct scsi_task *task)
{
	char lost[48];

	switch (status) {
	case SCSI_STATUS_CHECK_CONDITION:
		init_seterr(ctx, "%s: CHECK CONDITION, sense key 0x%x (%s), "
			    "ASC/ASCQ 0x%04x (%s)%s", what, task->sense.key,
			    scsi_sense_key_str(task->sense.key),
			    task->sense.ascq,
			    scsi_sense_ascq_str(task->sense.ascq),
			    lost_block_text(task, lost, sizeof(lost)));
		return -EIO;
	case SCSI_STATUS_TIMEOUT:
		init_seterr(ctx, "%s: timed out after %u s", what,
			    ctx->cfg.timeout_s);
		return -ETIMEDOUT;
	case SCSI_STATUS_CANCELLED:
		init_seterr(ctx, "%s: cancelled (%s)", what,
			    ctx->state == INIT_CLOSING ? "context closed" :
			    "session lost");
		return ctx->state == INIT_CLOSING ? -ECANCELED : -ENOTCONN;
	case SCSI_STATUS_ERROR:
		init_seterr(ctx, "%s: %s", what, iscsi_get_error(ctx->iscsi));
		return -EIO;
	default:
		init_seterr(ctx, "%s: SCSI status 0x%02x", what,
			    (unsigned int)status);
		return -EIO;
	}
}

/* --- the context --- */

static int keep_string(struct tpt_init *ctx, const char **field,
		       unsigned int *n)
{
	if (!*field)
		return 0;
	ctx->strings[*n] = strdup(*field);
	if (!ctx->strings[*n])
		return -ENOMEM;
	*field = ctx->strings[(*n)++];
	return 0;
}

static void free_strings(struct tpt_init *ctx)
{
	size_t i;

	for (i = 0; i < sizeof(ctx->strings) / sizeof(ctx->strings[0]); i++) {
		/* Secrets: not left in freed heap memory. */
		if (ctx->strings[i])
			explicit_bzero(ctx->strings[i],
				       strlen(ctx->strings[i]));
		free(ctx->strings[i]);
	}
}

int tpt_init_new(const struct tpt_init_config *cfg, struct tpt_init **out,
		 char *err, size_t errlen)
{
	struct tpt_init *ctx;
	struct iscsi_url *url;
	unsigned int n = 0;
	const char *user, *pass, *tuser, *tpass;

#define FAIL(code, ...) do { \
		if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
		tpt_init_close(ctx); return (code); } while (0)

	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ctx->cfg = *cfg;
	if (!cfg->url)
		FAIL(-EINVAL, "no URL");
	if (keep_string(ctx, &ctx->cfg.url, &n) ||
	    keep_string(ctx, &ctx->cfg.initiator_name, &n) ||
	    keep_string(ctx, &ctx->cfg.user, &n) ||
	    keep_string(ctx, &ctx->cfg.password, &n) ||
	    keep_string(ctx, &ctx->cfg.target_user, &n) ||
	    keep_string(ctx, &ctx->cfg.target_password, &n) ||
	    keep_string(ctx, &ctx->cfg.dm_addr, &n) ||
	    keep_string(ctx, &ctx->cfg.dm_provider, &n))
		FAIL(-ENOMEM, "out of memory");
	if (!ctx->cfg.max_io)
		ctx->cfg.max_io = DEFAULT_MAX_IO;
	if (!ctx->cfg.queue_depth)
		ctx->cfg.queue_depth = DEFAULT_QD;
	if (!ctx->cfg.timeout_s)
		ctx->cfg.timeout_s = DEFAULT_TIMEOUT;
	if (ctx->cfg.max_io < 512 || ctx->cfg.max_io > MAX_MAX_IO ||
	    ctx->cfg.max_io % 512)
		FAIL(-EINVAL, "max_io %zu: must be a multiple of 512 in "
		     "512..%u", ctx->cfg.max_io, MAX_MAX_IO);
	if (ctx->cfg.queue_depth > MAX_QD)
		FAIL(-EINVAL, "queue depth %u: at most %u",
		     ctx->cfg.queue_depth, MAX_QD);
	if (ctx->cfg.timeout_s > 3600)
		FAIL(-EINVAL, "timeout %u s: at most 3600",
		     ctx->cfg.timeout_s);
	if (!ctx->cfg.direct_retry_s)
		ctx->cfg.direct_retry_s = DEFAULT_DIRECT_RETRY;
	if (ctx->cfg.direct_retry_s > 3600)
		FAIL(-EINVAL, "direct_retry %u s: at most 3600",
		     ctx->cfg.direct_retry_s);
	ctx->direct_retry_wait = ctx->cfg.direct_retry_s;
	if (!ctx->cfg.merge_max)
		ctx->cfg.merge_max = TPT_INIT_MERGE_MAX;
	if (ctx->cfg.merge_max > TPT_INIT_MERGE_MAX)
		FAIL(-EINVAL, "merge_max %u: at most %u", ctx->cfg.merge_max,
		     TPT_INIT_MERGE_MAX);
	if ((unsigned int)ctx->cfg.direct > TPT_INIT_DIRECT_OFF)
		FAIL(-EINVAL, "direct: not auto, on or off");

	ctx->iscsi = iscsi_create_context(ctx->cfg.initiator_name ?
					  ctx->cfg.initiator_name :
					  DEFAULT_IQN);
	if (!ctx->iscsi)
		FAIL(-ENOMEM, "cannot create an iSCSI context");
	url = iscsi_parse_full_url(ctx->iscsi, ctx->cfg.url);
	if (!url)
		FAIL(-EINVAL, "bad URL: %s (iscsi://[user[%%password]@]"
		     "host[:port]/IQN/LUN)", iscsi_get_error(ctx->iscsi));
	snprintf(ctx->portal, sizeof(ctx->portal), "%s", url->portal);
	snprintf(ctx->target, sizeof(ctx->target), "%s", url->target);
	ctx->lun = url->lun;
	user = ctx->cfg.user ? ctx->cfg.user : url->user;
	pass = ctx->cfg.password ? ctx->cfg.password : url->passwd;
	tuser = ctx->cfg.target_user ? ctx->cfg.target_user : url->target_user;
	tpass = ctx->cfg.target_password ? ctx->cfg.target_password :
		url->target_passwd;
	iscsi_set_targetname(ctx->iscsi, ctx->target);
	iscsi_set_session_type(ctx->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(ctx->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	/* A lost session is not logged in again behind our back: the key
	 * died with it (protocol.md 4.14), and the loss must show. */
	iscsi_set_noautoreconnect(ctx->iscsi, 1);
	iscsi_set_timeout(ctx->iscsi, (int)ctx->cfg.timeout_s);
	if (user && user[0])
		iscsi_set_initiator_username_pwd(ctx->iscsi, user,
						 pass ? pass : "");
	if (tuser && tuser[0]) {
		if (!user || !user[0]) {
			iscsi_destroy_url(url);
			FAIL(-EINVAL, "mutual CHAP needs the initiator's CHAP "
			     "user and password too");
		}
		iscsi_set_target_username_pwd(ctx->iscsi, tuser,
					      tpass ? tpass : "");
	}
	explicit_bzero(url->passwd, sizeof(url->passwd));
	explicit_bzero(url->target_passwd, sizeof(url->target_passwd));
	iscsi_destroy_url(url);
	ctx->state = INIT_NEW;
	*out = ctx;
	return 0;
#undef FAIL
}

/* --- connect --- */

static void connect_done(struct tpt_init *ctx, int status)
{
	tpt_init_cb cb = ctx->connect_cb;

	if (!cb)
		return;
	ctx->connect_cb = NULL;
	if (status) {
		ctx->state = INIT_DEAD;
		if (ctx->dm) {
			tpt_dm_close(ctx->dm);
			ctx->dm = NULL;
		}
	} else {
		ctx->state = INIT_READY;
	}
	cb(ctx, status, ctx->connect_arg);
}

static void dm_log(void *arg, const char *msg)
{
	init_log(arg, TPT_INIT_LOG_WARNING, "datamover: %s", msg);
}

/* Only target boxes that prove this session's key get in (6.4): the
 * datamover checks the proof again and the counter after us. */
static int dm_accept(void *arg, const struct tpt_dm_hello *hello,
		     const struct sockaddr *src, socklen_t srclen,
		     uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	struct tpt_init *ctx = arg;
	const char *why = NULL;
	char from[INET6_ADDRSTRLEN] = "?";

	if (!ctx->direct && ctx->state != INIT_CONNECTING)
		why = "this host is not registered for host-direct I/O";
	else if (hello->role != TPT_DM_ROLE_TARGET)
		why = "not a target box (only targets move a host's data)";
	else if (!tpt_dm_hello_proves(hello, ctx->key))
		why = "does not prove this session's host key";
	if (why) {
		if (src && src->sa_family == AF_INET &&
		    srclen >= (socklen_t)sizeof(struct sockaddr_in))
			inet_ntop(AF_INET, &((const struct sockaddr_in *)src)->sin_addr,
				  from, sizeof(from));
		else if (src && src->sa_family == AF_INET6 &&
			 srclen >= (socklen_t)sizeof(struct sockaddr_in6))
			inet_ntop(AF_INET6,
				  &((const struct sockaddr_in6 *)src)->sin6_addr,
				  from, sizeof(from));
		/* The datamover logs the refusal too, and counts it. */
		init_log(ctx, TPT_INIT_LOG_WARNING, "datamover peer id %u role "
			 "%u from %s: %s", hello->peer_id, hello->role, from,
			 why);
		return -EACCES;
	}
	memcpy(token, ctx->key, TPT_DM_TOKEN_LEN);
	/* Our buffers all live in scope 0: one host, one key per context. */
	*scope = 0;
	ctx->stats.accepted_peers++;
	return 0;
}

/* The datamover listens where the array can reach us: by default the
 * local address of our connection to the controller. */
static int open_dm(struct tpt_init *ctx, struct tpt_host_key *hk)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN];
	struct tpt_dm_config dc = {
		.provider = ctx->cfg.dm_provider,
		.listen_port = ctx->cfg.dm_port,
		.pool_bytes = ctx->max_io * ctx->cfg.queue_depth,
		.pool_buf_bytes = ctx->max_io,
		.accept = dm_accept,
		.accept_arg = ctx,
		.log = dm_log,
		.log_arg = ctx,
	};
	int ret;

	memset(hk, 0, sizeof(*hk));
	if (ctx->cfg.dm_addr) {
		snprintf(addr, sizeof(addr), "%s", ctx->cfg.dm_addr);
	} else {
		if (getsockname(iscsi_get_fd(ctx->iscsi),
				(struct sockaddr *)&ss, &sl)) {
			init_seterr(ctx, "getsockname: %s", strerror(errno));
			return -errno;
		}
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
				  addr, sizeof(addr));
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)&ss)->sin6_addr,
				  addr, sizeof(addr));
		else {
			init_seterr(ctx, "the iSCSI connection is neither "
				    "IPv4 nor IPv6");
			return -EAFNOSUPPORT;
		}
	}
	if (inet_pton(AF_INET, addr, hk->ep.addr) == 1) {
		hk->ep.family = TPT_AF_IPV4;
	} else if (inet_pton(AF_INET6, addr, hk->ep.addr) == 1) {
		hk->ep.family = TPT_AF_IPV6;
	} else {
		init_seterr(ctx, "datamover address '%s': not a numeric IPv4 "
			    "or IPv6 address", addr);
		return -EINVAL;
	}
	dc.listen_addr = addr;
	ret = tpt_dm_open(&dc, &ctx->dm);
	if (ret) {
		init_seterr(ctx, "datamover on %s: %s", addr, strerror(-ret));
		ctx->dm = NULL;
		return ret;
	}
	hk->ep.port = tpt_dm_listen_port(ctx->dm);
	snprintf(ctx->dm_endpoint, sizeof(ctx->dm_endpoint),
		 hk->ep.family == TPT_AF_IPV6 ? "[%s]:%u" : "%s:%u", addr,
		 hk->ep.port);
	/* A fresh key per session from the kernel's CSPRNG; all zero is
	 * not a key (5.6). */
	do {
		if (getrandom(ctx->key, sizeof(ctx->key), 0) !=
		    (ssize_t)sizeof(ctx->key)) {
			init_seterr(ctx, "getrandom: %s", strerror(errno));
			return -EIO;
		}
	} while (!memcmp(ctx->key, (uint8_t[TPT_AUTH_TOKEN_LEN]){ 0 },
			 sizeof(ctx->key)));
	memcpy(hk->key, ctx->key, sizeof(hk->key));
	return 0;
}

/* Without the key: plain SCSI from here on; the datamover goes. */
static void fall_back(struct tpt_init *ctx)
{
	if (ctx->dm) {
		tpt_dm_close(ctx->dm);
		ctx->dm = NULL;
	}
	ctx->dm_endpoint[0] = 0;
	explicit_bzero(ctx->key, sizeof(ctx->key));
	ctx->direct = false;
}

static void send_host_key(struct tpt_init *ctx);

static void host_key_cb(struct iscsi_context *iscsi, int status,
			void *command_data, void *private_data)
{
	struct tpt_init *ctx = private_data;
	struct scsi_task *task = command_data;
	int err;

	(void)iscsi;
	if (status == SCSI_STATUS_GOOD) {
		scsi_free_scsi_task(task);
		ctx->direct = true;
		init_log(ctx, TPT_INIT_LOG_INFO, "host-direct: key registered, "
			 "datamover on %s (%s)", ctx->dm_endpoint,
			 tpt_dm_provider_name(ctx->dm));
		connect_done(ctx, 0);
		return;
	}
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
	    ++ctx->ua_retries < INIT_UA_RETRIES) {
		scsi_free_scsi_task(task);
		send_host_key(ctx);
		return;
	}
	err = init_status_error(ctx, "TPT HOST KEY", status, task);
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    ctx->cfg.direct == TPT_INIT_DIRECT_AUTO) {
		/* INVALID COMMAND OPERATION CODE: no TPT-mode array. */
		bool plain = init_sense_is(task, TPT_SENSE_INVALID_OPCODE);

		init_log(ctx, plain ? TPT_INIT_LOG_INFO : TPT_INIT_LOG_WARNING,
			 "%s: plain SCSI through the controller", plain ?
			 "not a TPT-mode array" : ctx->err);
		scsi_free_scsi_task(task);
		fall_back(ctx);
		connect_done(ctx, 0);
		return;
	}
	if (task)
		scsi_free_scsi_task(task);
	connect_done(ctx, err);
}

static void send_host_key(struct tpt_init *ctx)
{
	/* TPT SET PEER LIST's layout with PARAMETER LIST LENGTH 40 (4.14). */
	uint8_t cdb[16] = { TPT_OP_HOST_KEY };
	struct iscsi_data data = { .size = sizeof(ctx->key_list),
				   .data = ctx->key_list };
	struct scsi_task *task;

	cdb[13] = TPT_HOST_KEY_LEN;
	task = scsi_create_task(16, cdb, SCSI_XFER_WRITE, TPT_HOST_KEY_LEN);
	if (!task || iscsi_scsi_command_async(ctx->iscsi, ctx->lun, task,
					      host_key_cb, &data, ctx)) {
		if (task)
			scsi_free_scsi_task(task);
		init_seterr(ctx, "cannot send TPT HOST KEY: %s",
			    iscsi_get_error(ctx->iscsi));
		connect_done(ctx, -EIO);
	}
}

static void start_direct(struct tpt_init *ctx)
{
	struct tpt_host_key hk;
	int ret;

	if (ctx->cfg.direct == TPT_INIT_DIRECT_OFF) {
		connect_done(ctx, 0);
		return;
	}
	ret = open_dm(ctx, &hk);
	if (!ret && tpt_host_key_encode(&hk, ctx->key_list,
					sizeof(ctx->key_list)) < 0) {
		init_seterr(ctx, "cannot encode the host key");
		ret = -EINVAL;
	}
	explicit_bzero(&hk, sizeof(hk));
	if (ret) {
		if (ctx->cfg.direct == TPT_INIT_DIRECT_ON) {
			connect_done(ctx, ret);
			return;
		}
		init_log(ctx, TPT_INIT_LOG_WARNING, "%s: plain SCSI through "
			 "the controller", ctx->err);
		fall_back(ctx);
		connect_done(ctx, 0);
		return;
	}
	ctx->ua_retries = 0;
	send_host_key(ctx);
}

static void send_capacity(struct tpt_init *ctx);

static void capacity_cb(struct iscsi_context *iscsi, int status,
			void *command_data, void *private_data)
{
	struct tpt_init *ctx = private_data;
	struct scsi_task *task = command_data;
	struct scsi_readcapacity16 *rc;
	int err;

	(void)iscsi;
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
	    ++ctx->ua_retries < INIT_UA_RETRIES) {
		scsi_free_scsi_task(task);
		send_capacity(ctx);
		return;
	}
	if (status != SCSI_STATUS_GOOD) {
		err = init_status_error(ctx, "READ CAPACITY(16)", status, task);
		if (task)
			scsi_free_scsi_task(task);
		connect_done(ctx, err);
		return;
	}
	rc = scsi_datain_unmarshall(task);
	if (!rc || !rc->block_length || rc->block_length % 512 ||
	    rc->block_length > (1u << 20)) {
		init_seterr(ctx, "READ CAPACITY(16): no usable block size");
		scsi_free_scsi_task(task);
		connect_done(ctx, -EIO);
		return;
	}
	ctx->block_size = rc->block_length;
	ctx->nr_blocks = rc->returned_lba + 1;
	scsi_free_scsi_task(task);
	/* A command carries whole blocks. */
	ctx->max_io = ctx->cfg.max_io / ctx->block_size * ctx->block_size;
	if (!ctx->max_io)
		ctx->max_io = ctx->block_size;
	start_direct(ctx);
}

static void send_capacity(struct tpt_init *ctx)
{
	if (!iscsi_readcapacity16_task(ctx->iscsi, ctx->lun, capacity_cb,
				       ctx)) {
		init_seterr(ctx, "cannot send READ CAPACITY(16): %s",
			    iscsi_get_error(ctx->iscsi));
		connect_done(ctx, -EIO);
	}
}

static void login_cb(struct iscsi_context *iscsi, int status,
		     void *command_data, void *private_data)
{
	struct tpt_init *ctx = private_data;

	(void)command_data;
	if (ctx->state != INIT_CONNECTING)
		return;
	if (status != SCSI_STATUS_GOOD) {
		init_seterr(ctx, "login to %s failed: %s", ctx->portal,
			    iscsi_get_error(iscsi));
		connect_done(ctx, -ECONNREFUSED);
		return;
	}
	ctx->ua_retries = 0;
	send_capacity(ctx);
}

int tpt_init_connect_async(struct tpt_init *ctx, tpt_init_cb cb, void *arg)
{
	if (ctx->state != INIT_NEW) {
		init_seterr(ctx, "connect: already done");
		return -EINVAL;
	}
	ctx->state = INIT_CONNECTING;
	ctx->connect_cb = cb;
	ctx->connect_arg = arg;
	ctx->deadline = init_now() + ctx->cfg.timeout_s;
	if (iscsi_full_connect_async(ctx->iscsi, ctx->portal, ctx->lun,
				     login_cb, ctx)) {
		init_seterr(ctx, "connect to %s: %s", ctx->portal,
			    iscsi_get_error(ctx->iscsi));
		ctx->connect_cb = NULL;
		ctx->state = INIT_DEAD;
		return -ECONNREFUSED;
	}
	return 0;
}

/* --- the loop --- */

int tpt_init_get_fds(struct tpt_init *ctx,
		     struct pollfd fds[TPT_INIT_MAX_FDS])
{
	int n = 0;

	if (ctx->state == INIT_DEAD)
		return 0;
	/* The caller is about to sleep: what it submitted since it last
	 * slept goes now, adjacent requests together. */
	if (ctx->state == INIT_READY)
		init_io_pump(ctx);
	if (iscsi_get_fd(ctx->iscsi) >= 0) {
		fds[n].fd = iscsi_get_fd(ctx->iscsi);
		fds[n].events = (short)iscsi_which_events(ctx->iscsi);
		fds[n++].revents = 0;
	}
	if (ctx->dm) {
		fds[n].fd = tpt_dm_event_fd(ctx->dm);
		fds[n].events = POLLIN;
		fds[n++].revents = 0;
	}
	return n;
}

int tpt_init_poll_timeout_ms(const struct tpt_init *ctx)
{
	/*
	 * Completions waiting for their callbacks: come back at once.  With
	 * direct requests in flight, within a millisecond: the targets'
	 * Get_Data of a WRITE is served by our passive side, which the tcp
	 * provider only moves on when we progress it, and its event fd
	 * does not wake us while a large answer waits for socket room
	 * (measured: 1 MiB direct WRITEs at a third of the proxied rate).
	 * Otherwise once a second, for libiscsi's timeout scan and ours.
	 */
	if (ctx->done_head)
		return 0;
	return ctx->dm && ctx->inflight ? 1 : 1000;
}

/* The session is gone: every request fails, and so does a connect. */
static void session_lost(struct tpt_init *ctx, const char *why)
{
	char text[256];
	size_t n;

	if (ctx->state == INIT_DEAD)
		return;
	/* libiscsi's messages may end in a newline. */
	snprintf(text, sizeof(text), "%s", why);
	n = strlen(text);
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = 0;
	if (ctx->state == INIT_CONNECTING) {
		/* The caller of connect says why; no log of ours. */
		init_seterr(ctx, "login to %s failed: %s", ctx->portal, text);
		connect_done(ctx, -ECONNREFUSED);
	} else {
		init_seterr(ctx, "session lost: %s", text);
		init_log(ctx, TPT_INIT_LOG_ERROR, "%s", ctx->err);
	}
	ctx->state = INIT_DEAD;
	iscsi_scsi_cancel_all_tasks(ctx->iscsi);
	init_io_fail_waiting(ctx, -ENOTCONN);
}

/*
 * libiscsi writes a command's header and its data-out (a direct
 * command's transfer list) with two send()s, and every segment wakes the
 * controller.  Corked while libiscsi writes, what it writes for the
 * commands sent together leaves in full segments at the end: the
 * controller wakes once for all of them.
 */
static int iscsi_service_corked(struct tpt_init *ctx, int revents)
{
	int fd = iscsi_get_fd(ctx->iscsi), on = 1, off = 0, ret;
	bool cork = (revents & POLLOUT) && ctx->state == INIT_READY;

	if (cork)
		setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
	ret = iscsi_service(ctx->iscsi, revents);
	/* The session may have reconnected on another socket. */
	if (cork && iscsi_get_fd(ctx->iscsi) == fd)
		setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
	return ret;
}

int tpt_init_service(struct tpt_init *ctx, const struct pollfd *fds, int n)
{
	bool iscsi_done = false;
	int i, ret;

	for (i = 0; i < n && ctx->state != INIT_DEAD; i++) {
		if (ctx->dm && fds[i].fd == tpt_dm_event_fd(ctx->dm)) {
			/* Woken by the timeout too: see above. */
			if (fds[i].revents || ctx->inflight) {
				ret = tpt_dm_progress(ctx->dm);
				if (ret < 0)
					init_log(ctx, TPT_INIT_LOG_ERROR,
						 "datamover: %s",
						 tpt_dm_strerror(ctx->dm));
			}
		} else if (fds[i].fd == iscsi_get_fd(ctx->iscsi)) {
			iscsi_done = true;
			if (iscsi_service_corked(ctx, fds[i].revents) < 0)
				session_lost(ctx, iscsi_get_error(ctx->iscsi));
		}
	}
	/* With no event too: libiscsi scans for timeouts here. */
	if (!iscsi_done && ctx->state != INIT_DEAD &&
	    iscsi_get_fd(ctx->iscsi) >= 0 &&
	    iscsi_service(ctx->iscsi, 0) < 0)
		session_lost(ctx, iscsi_get_error(ctx->iscsi));
	if (ctx->state == INIT_CONNECTING && init_now() > ctx->deadline) {
		init_seterr(ctx, "connect to %s: no answer within %u s",
			    ctx->portal, ctx->cfg.timeout_s);
		iscsi_scsi_cancel_all_tasks(ctx->iscsi);
		connect_done(ctx, -ETIMEDOUT);
	}
	if (ctx->state == INIT_READY)
		init_io_pump(ctx);
	init_io_run_done(ctx);
	return ctx->state == INIT_DEAD ? -ENOTCONN : 0;
}

/* --- blocking wrappers --- */

struct waiter {
	bool done;
	int status;
};

static void wake(struct tpt_init *ctx, int status, void *arg)
{
	struct waiter *w = arg;

	(void)ctx;
	w->done = true;
	w->status = status;
}

/* Runs the loop until @w is done.  Every way out of the loop completes
 * the request first (session loss fails them all), so @w, on our stack,
 * is never written after we return. */
static int run_until(struct tpt_init *ctx, struct waiter *w)
{
	while (!w->done) {
		struct pollfd fds[TPT_INIT_MAX_FDS];
		int n = tpt_init_get_fds(ctx, fds);

		int i;

		/* The request must end before this returns: its callback
		 * writes to our stack.  poll() fails only for want of
		 * memory here, for a while; the request's timeout, which
		 * servicing keeps, still bounds the wait. */
		if (poll(fds, (nfds_t)n, tpt_init_poll_timeout_ms(ctx)) < 0) {
			for (i = 0; i < n; i++)
				fds[i].revents = 0;
			if (errno != EINTR)
				poll(NULL, 0, 10);
		}
		tpt_init_service(ctx, fds, n);
	}
	return w->status;
}

int tpt_init_connect(struct tpt_init *ctx)
{
	struct waiter w = { 0 };
	int ret = tpt_init_connect_async(ctx, wake, &w);

	return ret ? ret : run_until(ctx, &w);
}

int tpt_init_pread(struct tpt_init *ctx, void *buf, size_t len,
		   uint64_t offset)
{
	struct waiter w = { 0 };
	int ret = tpt_init_pread_async(ctx, buf, len, offset, wake, &w);

	return ret ? ret : run_until(ctx, &w);
}

int tpt_init_pwrite(struct tpt_init *ctx, const void *buf, size_t len,
		    uint64_t offset, unsigned int flags)
{
	struct waiter w = { 0 };
	int ret = tpt_init_pwrite_async(ctx, buf, len, offset, flags, wake,
					&w);

	return ret ? ret : run_until(ctx, &w);
}

int tpt_init_flush(struct tpt_init *ctx)
{
	struct waiter w = { 0 };
	int ret = tpt_init_flush_async(ctx, wake, &w);

	return ret ? ret : run_until(ctx, &w);
}

/* --- close --- */

static void logout_cb(struct iscsi_context *iscsi, int status,
		      void *command_data, void *private_data)
{
	(void)iscsi;
	(void)status;
	(void)command_data;
	*(bool *)private_data = true;
}

void tpt_init_close(struct tpt_init *ctx)
{
	bool logged_out = false;

	if (!ctx)
		return;
	if (ctx->iscsi) {
		enum init_state was = ctx->state;

		ctx->state = INIT_CLOSING;
		/* Outstanding requests end here: their buffers go back to
		 * the pool, which revokes their STags (a target still
		 * moving data for them fails). */
		iscsi_scsi_cancel_all_tasks(ctx->iscsi);
		init_io_fail_waiting(ctx, -ECANCELED);
		if (ctx->connect_cb) {
			init_seterr(ctx, "context closed");
			connect_done(ctx, -ECANCELED);
			ctx->state = INIT_CLOSING;
		}
		init_io_run_done(ctx);
		/* Logout ends the nexus, and the controller drops our key
		 * with it (protocol.md 4.14). */
		if (was != INIT_DEAD && iscsi_is_logged_in(ctx->iscsi) &&
		    !iscsi_logout_async(ctx->iscsi, logout_cb, &logged_out)) {
			double deadline = init_now() + ctx->cfg.timeout_s;

			while (!logged_out && init_now() < deadline) {
				struct pollfd p = {
					.fd = iscsi_get_fd(ctx->iscsi),
					.events = (short)iscsi_which_events(ctx->iscsi),
				};

				if (poll(&p, 1, 200) < 0 && errno != EINTR)
					break;
				if (iscsi_service(ctx->iscsi, p.revents) < 0)
					break;
			}
		}
	}
	if (ctx->dm)
		tpt_dm_close(ctx->dm);
	if (ctx->iscsi)
		iscsi_destroy_context(ctx->iscsi);
	explicit_bzero(ctx->key, sizeof(ctx->key));
	explicit_bzero(ctx->key_list, sizeof(ctx->key_list));
	free_strings(ctx);
	free(ctx);
}

/* --- what the context knows --- */

uint64_t tpt_init_size(const struct tpt_init *ctx)
{
	return ctx->nr_blocks * ctx->block_size;
}

uint32_t tpt_init_block_size(const struct tpt_init *ctx)
{
	return ctx->block_size;
}

size_t tpt_init_max_io(const struct tpt_init *ctx)
{
	return ctx->max_io ? ctx->max_io : ctx->cfg.max_io;
}

bool tpt_init_is_direct(const struct tpt_init *ctx)
{
	return ctx->direct;
}

const char *tpt_init_dm_endpoint(const struct tpt_init *ctx)
{
	return ctx->dm_endpoint;
}

const char *tpt_init_error(const struct tpt_init *ctx)
{
	return ctx->err;
}

void tpt_init_get_stats(const struct tpt_init *ctx, struct tpt_init_stats *st)
{
	*st = ctx->stats;
	if (ctx->dm) {
		struct tpt_dm_stats ds;

		tpt_dm_get_stats(ctx->dm, &ds);
		st->refused_peers = ds.refused_peers;
	}
}
