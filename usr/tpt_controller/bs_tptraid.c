/*
 * Backing store "tptraid": a LU whose blocks live on a TPT-RAID array.
 *
 *   tgtadm --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 \
 *          --bstype tptraid --backing-store /var/lib/tptraid/array1 \
 *          --bsopts "raid=5;unit=64k;mode=tpt;dm=10.0.0.1:4400;member=...;..."
 *
 * --bsopts defines the array (controller/array_spec.h); --backing-store is
 * a file where the controller keeps what it must remember about the array.
 *
 * The SBC semantics of each opcode (COMPARE AND WRITE, WRITE SAME, VERIFY,
 * ...) are expressed here in terms of whole-array reads and writes, run on
 * tgt's worker threads, which block while the event loop drives the
 * members; array.c and the modes do the RAID work.
 *
 * READ and WRITE, which carry nearly all the data, skip the workers, as do
 * an extended host's TPT HOST READ and WRITE: they go to the array from
 * the event loop and are answered from the array's callback.  The
 * hand-off to a worker and back (a condition variable, an eventfd and a
 * semaphore to the loop and back, a signal to answer) was most of what a
 * small request cost the controller.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "list.h"
#include "tgtd.h"
#include "scsi.h"
#include "spc.h"
#include "util.h"
#include "bs_thread.h"
#include "controller/state_file.h"
#include "tpt.h"
#include "tpt_controller.h"

struct tptraid_bs {
	struct bs_thread_info th;	/* first: BS_THREAD_I() finds it */
	struct tpt_array *array;
	char *bsopts;			/* the definition, until assembly */
	/*
	 * Read-modify-write commands (COMPARE AND WRITE, ORWRITE) must not
	 * see another write between their read and their write: they take
	 * this exclusively, every other command shares it.
	 */
	pthread_rwlock_t rmw_lock;
	/*
	 * READ and WRITE on the event loop hold no rmw_lock.  While a
	 * read-modify-write command is pending they go to the workers like
	 * everything else, and the read-modify-write waits, holding the lock
	 * exclusively, until those already on the loop are done.
	 */
	pthread_mutex_t loop_lock;
	pthread_cond_t loop_drained;
	unsigned int loop_running;	/* READ/WRITE on the event loop */
	unsigned int rmw_pending;	/* COMPARE AND WRITE, ORWRITE not done */
};

/* A READ or WRITE (or TPT HOST READ/WRITE) run from the event loop. */
struct tptraid_io {
	struct tpt_req r;
	struct tpt_host_buf host;	/* TPT HOST READ/WRITE: r.direct */
	struct scsi_cmd *cmd;
	/* The array answered before tpt_array_submit() returned: tgt takes
	 * the answer only after bs_cmd_submit has returned.  Answered from
	 * the loop's scheduled events, right after this turn: a timer
	 * (add_work) waited for the next 500 ms tick, which every request
	 * refused at once (a failed array's) paid. */
	bool submitting;
	struct event_data answer_later;
};

static struct tpt_array *array_of(struct scsi_lu *lu)
{
	return ((struct tptraid_bs *)BS_THREAD_I(lu))->array;
}

void tptraid_io_error(struct scsi_cmd *cmd, int err, bool write)
{
	/*
	 * The array could not complete it - two members lost under these
	 * blocks (-ENODATA), or no memory: what a single disk reports for a
	 * read or write it could not do.  One lost box is never reported:
	 * the array serves the request degraded.
	 */
	sense_data_build(cmd, err == -ENOMEM ? HARDWARE_ERROR : MEDIUM_ERROR,
			 err == -ENOMEM ? ASC_INTERNAL_TGT_FAILURE :
			 write ? ASC_WRITE_ERROR : ASC_READ_ERROR);
	scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
	/* No data: tgt sends the in buffer with CHECK CONDITION too, up
	 * to its transfer length, and what the array did not read there
	 * is whatever the buffer held before - another command's data. */
	if (scsi_get_data_dir(cmd) == DATA_READ ||
	    scsi_get_data_dir(cmd) == DATA_BIDIRECTIONAL)
		scsi_set_in_resid_by_actual(cmd, 0);
}

/*
 * READ @r failed: its host gets the blocks read before the span that
 * failed, and in the sense INFORMATION the first block the array could
 * not get, as a disk reports the sector it could not read (Linux's sd
 * completes the blocks before it and fails only the rest).  A TPT HOST
 * READ has no Data-In: the targets put those blocks in the host's buffer.
 */
void tptraid_read_error(struct scsi_cmd *cmd, const struct tpt_req *r)
{
	struct scsi_lu *lu = cmd->dev;

	if (r->result != -EIO && r->result != -ENODATA) {
		tptraid_io_error(cmd, r->result, false);
		return;
	}
	sense_data_build_with_info(cmd, MEDIUM_ERROR, ASC_READ_ERROR,
				   r->lost_lba);
	scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
	if (scsi_get_data_dir(cmd) == DATA_READ ||
	    scsi_get_data_dir(cmd) == DATA_BIDIRECTIONAL)
		scsi_set_in_resid_by_actual(cmd, (uint32_t)(r->next - r->lba)
					    << lu->blk_shift);
}

static void io_error(struct scsi_cmd *cmd, int err)
{
	tptraid_io_error(cmd, err, scsi_get_data_dir(cmd) != DATA_READ);
}

/* WRITE(10/12/16) and WRITE AND VERIFY with FUA: through to the members'
 * media before GOOD. */
static bool cmd_fua(const struct scsi_cmd *cmd)
{
	return cmd->scb[0] != WRITE_6 && (cmd->scb[1] & 0x08);
}

/* Read-modify-write commands: no other write may come between their read
 * and their write. */
static bool is_rmw(const struct scsi_cmd *cmd)
{
	return cmd->scb[0] == COMPARE_AND_WRITE || cmd->scb[0] == ORWRITE_16;
}

/* The bytes a WRITE writes: an initiator that sent less than the CDB
 * asked for (an underflow) gets the whole blocks it sent written. */
static uint32_t write_bytes(struct scsi_cmd *cmd)
{
	return scsi_get_out_length(cmd) & ~((1U << cmd->dev->blk_shift) - 1);
}

static int array_rw(struct scsi_cmd *cmd, bool write, uint64_t offset,
		    void *buf, uint32_t len)
{
	struct scsi_lu *lu = cmd->dev;

	return tpt_array_io(array_of(lu), write ? TPT_REQ_WRITE : TPT_REQ_READ,
			    offset >> lu->blk_shift, len >> lu->blk_shift, buf,
			    write && cmd_fua(cmd));
}

/* The first differing byte, for the sense INFORMATION of a miscompare. */
static uint64_t first_difference(const uint8_t *a, const uint8_t *b,
				 uint32_t len)
{
	uint32_t i = 0;

	while (i < len && a[i] == b[i])
		i++;
	return i;
}

static void tptraid_compare(struct scsi_cmd *cmd, uint64_t offset,
			    const uint8_t *expect, uint32_t len)
{
	uint8_t *now;
	int err;

	/* A WRITE AND VERIFY of zero blocks has no data-out buffer at all:
	 * nothing to read back, nothing to compare. */
	if (!len)
		return;
	now = malloc(len);
	if (!now) {
		io_error(cmd, -ENOMEM);
		return;
	}
	err = array_rw(cmd, false, offset, now, len);
	if (err) {
		io_error(cmd, err);
	} else if (memcmp(now, expect, len)) {
		sense_data_build(cmd, MISCOMPARE,
				 ASC_MISCOMPARE_DURING_VERIFY_OPERATION);
		scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
	}
	free(now);
}

static void tptraid_compare_and_write(struct scsi_cmd *cmd)
{
	uint32_t len = scsi_get_out_length(cmd) / 2;
	uint8_t *data = scsi_get_out_buffer(cmd);
	uint8_t *now;
	int err;

	if (len != cmd->tl) {
		sense_data_build(cmd, ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
		scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
		return;
	}
	now = malloc(len);
	if (!now) {
		io_error(cmd, -ENOMEM);
		return;
	}
	err = array_rw(cmd, false, cmd->offset, now, len);
	if (err) {
		io_error(cmd, err);
	} else if (memcmp(now, data, len)) {
		sense_data_build_with_info(cmd, MISCOMPARE,
			ASC_MISCOMPARE_DURING_VERIFY_OPERATION,
			first_difference(now, data, len));
		scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
	} else {
		err = array_rw(cmd, true, cmd->offset, data + len, len);
		if (err)
			io_error(cmd, err);
	}
	free(now);
}

static void tptraid_orwrite(struct scsi_cmd *cmd)
{
	uint32_t len = scsi_get_out_length(cmd), i;
	uint8_t *data = scsi_get_out_buffer(cmd);
	uint8_t *now = malloc(len);
	int err;

	if (!now) {
		io_error(cmd, -ENOMEM);
		return;
	}
	err = array_rw(cmd, false, cmd->offset, now, len);
	if (!err) {
		for (i = 0; i < len; i++)
			now[i] |= data[i];
		err = array_rw(cmd, true, cmd->offset, now, len);
	}
	if (err)
		io_error(cmd, err);
	free(now);
}

/* WRITE SAME: one block repeated, with LBDATA/PBDATA stamping its LBA;
 * UNMAP writes zeroes, the array's reading of a deallocated block. */
static void tptraid_write_same(struct scsi_cmd *cmd)
{
	uint32_t bs = 1U << cmd->dev->blk_shift;
	uint64_t offset = cmd->offset, end = cmd->offset + cmd->tl;
	const uint32_t chunk_blocks = 256;
	uint8_t *buf = malloc((size_t)bs * chunk_blocks);
	int err = 0;

	if (!buf) {
		io_error(cmd, -ENOMEM);
		return;
	}
	while (offset < end && !err) {
		uint32_t n = (end - offset) / bs, i;

		if (n > chunk_blocks)
			n = chunk_blocks;
		for (i = 0; i < n; i++) {
			uint8_t *blk = buf + (size_t)i * bs;
			uint64_t lba = (offset >> cmd->dev->blk_shift) + i;

			if (cmd->scb[1] & 0x08)
				memset(blk, 0, bs);
			else
				memcpy(blk, scsi_get_out_buffer(cmd), bs);
			if ((cmd->scb[1] & 0x06) == 0x02)
				put_unaligned_be32(lba, blk);
			else if ((cmd->scb[1] & 0x06) == 0x04)
				put_unaligned_be64(lba, blk);
		}
		err = array_rw(cmd, true, offset, buf, n * bs);
		offset += (uint64_t)n * bs;
	}
	if (err)
		io_error(cmd, err);
	free(buf);
}

static void tptraid_request(struct scsi_cmd *cmd)
{
	struct tptraid_bs *bs = (struct tptraid_bs *)BS_THREAD_I(cmd->dev);
	struct tpt_array *a = bs->array;
	uint32_t len;
	bool verify = false, rmw;
	int err = 0;

	rmw = is_rmw(cmd);
	if (rmw) {
		pthread_rwlock_wrlock(&bs->rmw_lock);
		/* No READ or WRITE starts on the loop any more (rmw_pending):
		 * wait for those that did. */
		pthread_mutex_lock(&bs->loop_lock);
		while (bs->loop_running)
			pthread_cond_wait(&bs->loop_drained, &bs->loop_lock);
		pthread_mutex_unlock(&bs->loop_lock);
	} else {
		pthread_rwlock_rdlock(&bs->rmw_lock);
	}
	scsi_set_result(cmd, SAM_STAT_GOOD);
	switch (cmd->scb[0]) {
	case READ_6:
	case READ_10:
	case READ_12:
	case READ_16:
		err = array_rw(cmd, false, cmd->offset, scsi_get_in_buffer(cmd),
			       scsi_get_in_length(cmd));
		break;
	case WRITE_VERIFY:
	case WRITE_VERIFY_12:
	case WRITE_VERIFY_16:
		verify = true;
		/* fall through */
	case WRITE_6:
	case WRITE_10:
	case WRITE_12:
	case WRITE_16:
		len = write_bytes(cmd);
		err = array_rw(cmd, true, cmd->offset, scsi_get_out_buffer(cmd),
			       len);
		if (!err && verify)
			tptraid_compare(cmd, cmd->offset,
					scsi_get_out_buffer(cmd), len);
		break;
	case VERIFY_10:
	case VERIFY_12:
	case VERIFY_16:
		/* BYTCHK 0 sends nothing to compare with: the medium is
		 * readable, which is all such a VERIFY asks. */
		if (scsi_get_out_length(cmd))
			tptraid_compare(cmd, cmd->offset,
					scsi_get_out_buffer(cmd),
					scsi_get_out_length(cmd));
		break;
	case COMPARE_AND_WRITE:
		tptraid_compare_and_write(cmd);
		break;
	case ORWRITE_16:
		tptraid_orwrite(cmd);
		break;
	case WRITE_SAME:
	case WRITE_SAME_16:
		tptraid_write_same(cmd);
		break;
	case SYNCHRONIZE_CACHE:
	case SYNCHRONIZE_CACHE_16:
		if (cmd->scb[1] & 0x2) {
			sense_data_build(cmd, ILLEGAL_REQUEST,
					 ASC_INVALID_FIELD_IN_CDB);
			scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
		} else {
			err = tpt_array_io(a, TPT_REQ_SYNC, 0, 0, NULL, false);
		}
		break;
	case PRE_FETCH_10:
	case PRE_FETCH_16:
		break;
	case TPT_OP_HOST_READ:
	case TPT_OP_HOST_WRITE:
		tpt_hosts_io(a, cmd);
		break;
	case UNMAP:
		/* Only reachable with thin provisioning, which an array of
		 * fully provisioned members does not offer. */
		sense_data_build(cmd, ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
		scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
		break;
	default:
		sense_data_build(cmd, ILLEGAL_REQUEST, ASC_INVALID_OP_CODE);
		scsi_set_result(cmd, SAM_STAT_CHECK_CONDITION);
		break;
	}
	if (err)
		io_error(cmd, err);
	pthread_rwlock_unlock(&bs->rmw_lock);
	if (rmw) {
		pthread_mutex_lock(&bs->loop_lock);
		bs->rmw_pending--;
		pthread_mutex_unlock(&bs->loop_lock);
	}
}

static void loop_io_end(struct tptraid_bs *bs)
{
	pthread_mutex_lock(&bs->loop_lock);
	if (!--bs->loop_running)
		pthread_cond_broadcast(&bs->loop_drained);
	pthread_mutex_unlock(&bs->loop_lock);
}

static void loop_io_answer(struct tptraid_io *io)
{
	struct scsi_cmd *cmd = io->cmd;

	if (io->r.direct)
		tpt_hosts_io_answer(cmd, &io->r);
	else if (io->r.result && io->r.kind == TPT_REQ_READ)
		tptraid_read_error(cmd, &io->r);
	else if (io->r.result)
		io_error(cmd, io->r.result);
	else
		scsi_set_result(cmd, SAM_STAT_GOOD);
	loop_io_end((struct tptraid_bs *)BS_THREAD_I(cmd->dev));
	free(io);
	target_cmd_io_done(cmd, scsi_get_result(cmd));
}

static void loop_io_answer_later(struct event_data *ev)
{
	loop_io_answer(ev->data);
}

static void loop_io_done(struct tpt_req *r, int result)
{
	struct tptraid_io *io = r->priv;

	(void)result;			/* r->result */
	if (io->submitting) {
		tgt_init_sched_event(&io->answer_later, loop_io_answer_later,
				     io);
		tgt_add_sched_event(&io->answer_later);
		return;
	}
	loop_io_answer(io);
}

/* READ and WRITE from the event loop, the rest on the workers
 * (tptraid_request). */
static int tptraid_cmd_submit(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->dev;
	struct tptraid_bs *bs = (struct tptraid_bs *)BS_THREAD_I(lu);
	struct tptraid_io *io;
	bool write = false, on_loop;
	uint32_t len = 0;

	switch (cmd->scb[0]) {
	case READ_6:
	case READ_10:
	case READ_12:
	case READ_16:
		len = scsi_get_in_length(cmd);
		break;
	case WRITE_6:
	case WRITE_10:
	case WRITE_12:
	case WRITE_16:
		write = true;
		len = write_bytes(cmd);
		break;
	case TPT_OP_HOST_READ:
	case TPT_OP_HOST_WRITE:
		break;
	default:
		goto worker;
	}
	pthread_mutex_lock(&bs->loop_lock);
	on_loop = !bs->rmw_pending;
	if (on_loop)
		bs->loop_running++;
	pthread_mutex_unlock(&bs->loop_lock);
	if (!on_loop)
		goto worker;
	io = calloc(1, sizeof(*io));
	if (!io) {
		loop_io_end(bs);
		goto worker;
	}
	io->cmd = cmd;
	if (cmd->scb[0] == TPT_OP_HOST_READ || cmd->scb[0] == TPT_OP_HOST_WRITE) {
		if (tpt_hosts_io_req(bs->array, cmd, &io->r, &io->host)) {
			/* Out of memory: the worker answers it. */
			free(io);
			loop_io_end(bs);
			goto worker;
		}
	} else {
		io->r.kind = write ? TPT_REQ_WRITE : TPT_REQ_READ;
		io->r.lba = cmd->offset >> lu->blk_shift;
		io->r.blocks = len >> lu->blk_shift;
		io->r.buf = write ? scsi_get_out_buffer(cmd) :
				    scsi_get_in_buffer(cmd);
		io->r.fua = write && cmd_fua(cmd);
	}
	io->r.done = loop_io_done;
	io->r.priv = io;
	io->submitting = true;
	set_cmd_async(cmd);
	tpt_array_submit(bs->array, &io->r);
	io->submitting = false;
	return 0;
worker:
	if (is_rmw(cmd)) {
		pthread_mutex_lock(&bs->loop_lock);
		bs->rmw_pending++;
		pthread_mutex_unlock(&bs->loop_lock);
	}
	return bs_thread_cmd_submit(cmd);
}

static tgtadm_err tptraid_init(struct scsi_lu *lu, char *bsopts)
{
	pthread_rwlockattr_t rmw_lock_attr;
	struct tptraid_bs *bs = (struct tptraid_bs *)BS_THREAD_I(lu);
	tgtadm_err adm;

	/* The array is assembled in tptraid_open(), which knows where its
	 * state file is. */
	bs->bsopts = bsopts && *bsopts ? strdup(bsopts) : NULL;
	if (bsopts && *bsopts && !bs->bsopts)
		return TGTADM_NOMEM;
	/* glibc's default prefers readers: a stream of READs would starve
	 * COMPARE AND WRITE and ORWRITE of their exclusive turn. */
	pthread_rwlockattr_init(&rmw_lock_attr);
	pthread_rwlockattr_setkind_np(&rmw_lock_attr,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&bs->rmw_lock, &rmw_lock_attr);
	pthread_mutex_init(&bs->loop_lock, NULL);
	pthread_cond_init(&bs->loop_drained, NULL);
	adm = bs_thread_open(&bs->th, tptraid_request, nr_iothreads);
	if (adm) {
		free(bs->bsopts);
		bs->bsopts = NULL;
	}
	return adm;
}

static void tptraid_exit(struct scsi_lu *lu)
{
	struct tptraid_bs *bs = (struct tptraid_bs *)BS_THREAD_I(lu);

	bs_thread_close(&bs->th);
	if (bs->array)
		tpt_array_destroy(bs->array);
	bs->array = NULL;
	free(bs->bsopts);
	bs->bsopts = NULL;
}

/* What the state file at @path says, or NULL (and 0) when there is none
 * yet: a new array.  -EINVAL, logged, for a damaged one. */
static int read_state(const char *path, struct tpt_state **out)
{
	struct tpt_state *st;
	char err[256], *text;
	struct stat sb;
	ssize_t n;
	int fd, ret;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &sb) || sb.st_size > (1 << 20)) {
		close(fd);
		eprintf("tptraid: %s: not a state file\n", path);
		return -EINVAL;
	}
	if (!sb.st_size) {
		close(fd);
		return 0;
	}
	text = malloc((size_t)sb.st_size);
	st = malloc(sizeof(*st));
	n = text && st ? read(fd, text, (size_t)sb.st_size) : -1;
	close(fd);
	ret = n == sb.st_size ?
	      tpt_state_parse(text, (size_t)n, st, err, sizeof(err)) : -EIO;
	if (ret) {
		if (n == sb.st_size)
			eprintf("tptraid: %s: %s\n", path, err);
		free(st);
		st = NULL;
	}
	free(text);
	*out = st;
	return ret;
}

#define DIRTY_DEGRADED_OPT "start_dirty_degraded=yes"

/*
 * Assemble the array: from --bsopts for a new one; from its state file
 * when the LU is created again (--bsopts then empty, the very definition
 * the file recorded, or start_dirty_degraded=yes alone: anything else is
 * refused rather than silently preferred).
 */
static int tptraid_open(struct scsi_lu *lu, char *path, int *fd,
			uint64_t *size)
{
	struct tptraid_bs *bs = (struct tptraid_bs *)BS_THREAD_I(lu);
	struct tpt_array_spec *spec = NULL;
	struct tpt_state *state = NULL;
	bool dirty_degraded = false;
	char *canonical = NULL, *recorded;
	const char *text;
	char err[256];
	int ret;

	if (bs->array) {
		eprintf("tptraid: the array's state file cannot change\n");
		return -EINVAL;
	}
	ret = read_state(path, &state);
	if (ret)
		goto out;
	/* The operator's answer to a refusal to start dirty and degraded
	 * (array.c): this assembly only, the definition stays as recorded. */
	/* One line, as the state file keeps it: a definition written over
	 * several lines is the same definition. */
	canonical = malloc(2 * TPT_STATE_SPEC_MAX);
	if (!canonical) {
		ret = -ENOMEM;
		goto out;
	}
	recorded = canonical + TPT_STATE_SPEC_MAX;
	if (bs->bsopts && tpt_array_spec_canonical(bs->bsopts, canonical,
						   TPT_STATE_SPEC_MAX)) {
		eprintf("tptraid: --bsopts: longer than %u bytes\n",
			TPT_STATE_SPEC_MAX - 1);
		ret = -EINVAL;
		goto out;
	}
	if (state && tpt_array_spec_canonical(state->spec, recorded,
					      TPT_STATE_SPEC_MAX))
		snprintf(recorded, TPT_STATE_SPEC_MAX, "%s", state->spec);
	if (state && bs->bsopts && !strcmp(canonical, DIRTY_DEGRADED_OPT)) {
		dirty_degraded = true;
	} else if (state && bs->bsopts && strcmp(recorded, canonical)) {
		char *shown = malloc(sizeof(state->spec));

		if (shown)
			tpt_spec_hide_secrets(state->spec, shown,
					      sizeof(state->spec));
		if (state->creating)
			eprintf("tptraid: %s records array %016" PRIx64 ", whose "
				"creation a crash stopped, defined as \"%s\": "
				"give no --bsopts to create it again with the "
				"members it claimed, or remove the file to define "
				"a new array (and free those members by hand, "
				"docs/target.md)\n", path, state->array_id,
				shown ? shown : "(out of memory)");
		else
			eprintf("tptraid: %s records array %016" PRIx64 " defined "
				"as \"%s\": give no --bsopts to assemble it (or "
				"only " DIRTY_DEGRADED_OPT "), or remove the file "
				"to define a new array\n", path, state->array_id,
				shown ? shown : "(out of memory)");
		free(shown);
		ret = -EINVAL;
		goto out;
	}
	text = bs->bsopts && !dirty_degraded ? canonical :
	       state ? state->spec : NULL;
	if (!text) {
		eprintf("tptraid: no --bsopts and no state file at %s: nothing "
			"to assemble\n", path);
		ret = -EINVAL;
		goto out;
	}
	spec = malloc(sizeof(*spec));
	if (!spec) {
		ret = -ENOMEM;
		goto out;
	}
	if (tpt_array_spec_parse(text, spec, err, sizeof(err))) {
		eprintf("tptraid: --bsopts: %s\n", err);
		ret = -EINVAL;
		goto out;
	}
	if (dirty_degraded)
		spec->start_dirty_degraded = true;
	ret = tpt_array_create(lu, spec, text, state, path, &bs->array);
	if (ret) {
		eprintf("tptraid: cannot assemble the array: %s\n",
			strerror(-ret));
		goto out;
	}
	if (bs->array->block_size != (1U << (lu->blk_shift ? lu->blk_shift : 9))) {
		eprintf("tptraid: the members' %u-byte blocks differ from the "
			"LU's block size (--blocksize)\n",
			bs->array->block_size);
		ret = -EINVAL;
		goto out;
	}
	/* tgt keeps an fd of the backing store: the state file's (being
	 * written by now, and replaced by renames later). */
	*fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
	if (*fd < 0) {
		ret = -errno;
		eprintf("tptraid: cannot open %s: %m\n", path);
		goto out;
	}
	*size = tpt_array_bytes(bs->array);
	tpt_hosts_attach(bs->array);
out:
	if (ret && bs->array) {
		tpt_array_destroy(bs->array);
		bs->array = NULL;
	}
	free(canonical);
	free(spec);
	free(state);
	return ret;
}

static void tptraid_close(struct scsi_lu *lu)
{
	close(lu->fd);
}

static struct backingstore_template tptraid_bst;

struct tpt_array *tptraid_array_of(struct scsi_lu *lu)
{
	return lu->bst == &tptraid_bst ? array_of(lu) : NULL;
}

bool tptraid_lu(struct scsi_lu *lu)
{
	return lu->bst == &tptraid_bst;
}

tgtadm_err tptraid_param(struct scsi_lu *lu, const char *key,
			 const char *value)
{
	struct tpt_array *a = tptraid_array_of(lu);

	return a ? tpt_array_param(a, key, value) : TGTADM_UNKNOWN_PARAM;
}

static struct backingstore_template tptraid_bst = {
	.bs_name		= "tptraid",
	.bs_datasize		= sizeof(struct tptraid_bs),
	.bs_open		= tptraid_open,
	.bs_close		= tptraid_close,
	.bs_init		= tptraid_init,
	.bs_exit		= tptraid_exit,
	.bs_cmd_submit		= tptraid_cmd_submit,
};

__attribute__((constructor)) static void tptraid_constructor(void)
{
	register_backingstore_template(&tptraid_bst);
}
