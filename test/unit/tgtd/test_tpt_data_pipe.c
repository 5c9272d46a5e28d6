/*
 * usr/tpt_data_pipe.c, zero-copy READ data: a file's bytes through a pipe
 * to a TCP socket on loopback, reuse of emptied pipes, and every way a
 * READ falls back to its buffer (a file that ends early, a pipe given
 * back with data, too many pipes).  The module has no dependency on the
 * rest of tgtd, so the test compiles it in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/unit/unit.h"
#include "usr/tpt_data_pipe.c"

#define FILE_BYTES (4u << 20)

static int file_fd;
static uint8_t *file_data;
static int tx, rx;	/* a connected TCP pair on loopback; tx non-blocking */

static void open_file(void)
{
	char path[] = "/tmp/test_tpt_data_pipe.XXXXXX";
	unsigned int i;

	file_fd = mkstemp(path);
	unlink(path);
	file_data = malloc(FILE_BYTES);
	for (i = 0; i < FILE_BYTES; i++)
		file_data[i] = (uint8_t)(i * 7 + i / 4096);
	/* The last MiB stays a hole. */
	if (pwrite(file_fd, file_data, FILE_BYTES - (1u << 20), 0) !=
	    FILE_BYTES - (1u << 20) || ftruncate(file_fd, FILE_BYTES))
		abort();
	memset(file_data + FILE_BYTES - (1u << 20), 0, 1u << 20);
}

static void connect_pair(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		abort();
	tx = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(tx, (struct sockaddr *)&a, sizeof(a)))
		abort();
	rx = accept(l, NULL, NULL);
	close(l);
	fcntl(tx, F_SETFL, O_NONBLOCK);
}

/* Sends all of @p in pieces of at most @piece (as Data-In PDUs would),
 * receiving as it goes, and checks that what arrives is the file's
 * @len bytes from @offset. */
static void send_and_check(struct tpt_data_pipe *p, off_t offset, size_t len,
			   size_t piece)
{
	uint8_t *got = malloc(len);
	size_t sent = 0, received = 0;
	ssize_t n;

	while (received < len) {
		if (sent < len) {
			size_t want = len - sent < piece ? len - sent : piece;

			n = tpt_data_pipe_send(p, tx, want, sent + want < len);
			if (n > 0)
				sent += n;
			else
				CHECK(n < 0 && errno == EAGAIN);
		}
		n = recv(rx, got + received, len - received,
			 sent < len ? MSG_DONTWAIT : 0);
		if (n > 0)
			received += n;
		else
			CHECK(n < 0 && errno == EAGAIN);
	}
	CHECK_EQ(tpt_data_pipe_left(p), 0);
	CHECK_MEM(got, file_data + offset, len);
	free(got);
}

static void test_bounds(void)
{
	CHECK(!tpt_data_pipe_fits(TPT_DATA_PIPE_MIN - 512));
	CHECK(tpt_data_pipe_fits(TPT_DATA_PIPE_MIN));
	CHECK(tpt_data_pipe_fits(TPT_DATA_PIPE_MAX));
	CHECK(!tpt_data_pipe_fits(TPT_DATA_PIPE_MAX + 512));
}

static void test_file_bytes_reach_the_socket(void)
{
	struct tpt_data_pipe_stats s0, s1;
	struct tpt_data_pipe *p;

	tpt_data_pipe_stats(&s0);
	p = tpt_data_pipe_fill(file_fd, 512, 64 << 10);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ(tpt_data_pipe_left(p), 64 << 10);
	send_and_check(p, 512, 64 << 10, 64 << 10);
	tpt_data_pipe_release(p);
	/* A whole MiB in Data-In PDUs of 256 KiB, and one over the hole. */
	p = tpt_data_pipe_fill(file_fd, 1 << 20, 1 << 20);
	CHECK(p != NULL);
	if (p)
		send_and_check(p, 1 << 20, 1 << 20, 256 << 10);
	tpt_data_pipe_release(p);
	p = tpt_data_pipe_fill(file_fd, FILE_BYTES - (1u << 20), 1 << 20);
	CHECK(p != NULL);
	if (p)
		send_and_check(p, FILE_BYTES - (1u << 20), 1 << 20, 8192);
	tpt_data_pipe_release(p);
	tpt_data_pipe_stats(&s1);
	CHECK_EQ(s1.reads - s0.reads, 3);
	CHECK_EQ(s1.bytes - s0.bytes, (64 << 10) + (2 << 20));
	CHECK_EQ(s1.fallbacks, s0.fallbacks);
	CHECK_EQ(s1.busy, 0);
}

static void test_an_emptied_pipe_is_reused(void)
{
	struct tpt_data_pipe *a, *b;
	struct tpt_data_pipe_stats s;

	a = tpt_data_pipe_fill(file_fd, 0, 16 << 10);
	CHECK(a != NULL);
	if (!a)
		return;
	send_and_check(a, 0, 16 << 10, 16 << 10);
	tpt_data_pipe_release(a);
	tpt_data_pipe_stats(&s);
	b = tpt_data_pipe_fill(file_fd, 4096, 32 << 10);
	CHECK(b == a);
	if (b)
		send_and_check(b, 4096, 32 << 10, 32 << 10);
	tpt_data_pipe_release(b);
	tpt_data_pipe_stats(&s);
	CHECK_EQ(s.busy, 0);
}

static void test_a_pipe_given_back_with_data_is_closed(void)
{
	struct tpt_data_pipe_stats s0, s1;
	struct tpt_data_pipe *p;

	/* Warm: a free pipe exists, so this fill opens none. */
	tpt_data_pipe_stats(&s0);
	p = tpt_data_pipe_fill(file_fd, 0, 64 << 10);
	CHECK(p != NULL);
	tpt_data_pipe_release(p);	/* a connection lost before its data */
	tpt_data_pipe_stats(&s1);
	CHECK_EQ(s1.open, s0.open - 1);
	CHECK_EQ(s1.busy, 0);
}

static void test_a_file_that_ends_early_falls_back(void)
{
	struct tpt_data_pipe_stats s0, s1;
	struct tpt_data_pipe *p;

	tpt_data_pipe_stats(&s0);
	/* Nothing there at all, then half of it. */
	errno = 0;
	p = tpt_data_pipe_fill(file_fd, FILE_BYTES, 64 << 10);
	CHECK(p == NULL && errno == ENODATA);
	errno = 0;
	p = tpt_data_pipe_fill(file_fd, FILE_BYTES - (32 << 10), 64 << 10);
	CHECK(p == NULL && errno == ENODATA);
	p = tpt_data_pipe_fill(-1, 0, 64 << 10);
	CHECK(p == NULL && errno == EBADF);
	tpt_data_pipe_stats(&s1);
	CHECK_EQ(s1.fallbacks - s0.fallbacks, 3);
	CHECK_EQ(s1.reads, s0.reads);
	CHECK_EQ(s1.busy, 0);
}

static void test_pipes_are_bounded(void)
{
	struct tpt_data_pipe *p[TPT_DATA_PIPE_OPEN + 1];
	struct tpt_data_pipe_stats s0, s1;
	unsigned int i;

	tpt_data_pipe_stats(&s0);
	for (i = 0; i < TPT_DATA_PIPE_OPEN; i++) {
		p[i] = tpt_data_pipe_fill(file_fd, 0, 16 << 10);
		CHECK(p[i] != NULL);
	}
	errno = 0;
	p[i] = tpt_data_pipe_fill(file_fd, 0, 16 << 10);
	CHECK(p[i] == NULL && errno == EBUSY);
	tpt_data_pipe_stats(&s1);
	CHECK_EQ(s1.open, TPT_DATA_PIPE_OPEN);
	CHECK_EQ(s1.busy, TPT_DATA_PIPE_OPEN);
	CHECK_EQ(s1.fallbacks - s0.fallbacks, 1);
	for (i = 0; i < TPT_DATA_PIPE_OPEN; i++)
		tpt_data_pipe_release(p[i]);	/* all full: all closed */
	tpt_data_pipe_stats(&s1);
	CHECK_EQ(s1.open, 0);
	CHECK_EQ(s1.busy, 0);
}

int main(void)
{
	open_file();
	connect_pair();
	RUN(test_bounds);
	RUN(test_file_bytes_reach_the_socket);
	RUN(test_an_emptied_pipe_is_reused);
	RUN(test_a_pipe_given_back_with_data_is_closed);
	RUN(test_a_file_that_ends_early_falls_back);
	RUN(test_pipes_are_bounded);
	close(tx);
	close(rx);
	close(file_fd);
	free(file_data);
	UNIT_EXIT();
}
