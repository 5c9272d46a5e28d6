/*
 * libFuzzer target for the datamover's hello (version 2: an HMAC proof of
 * the acceptor's token and a counter against replays, iser/tpt_dm_priv.h)
 * and the admission an acceptor bases on it.
 *
 * The input is a run of connection requests to one acceptor.  Each is a
 * hello a connector made with the right token, or with a wrong one, or a
 * right one with one byte changed on the way, or a replay of an earlier
 * request, or raw bytes.  The acceptor takes the steps dm_on_connreq()
 * takes, with the real functions: decode, check the proof against the
 * token its owner expects of that peer, check the counter is fresh.  The
 * fuzzer keeps its own account and requires:
 *
 * - a hello decodes exactly when it has 40 bytes or more, the magic and
 *   version 2, and then means the fields its first 24 bytes carry, whatever
 *   follows byte 40;
 * - it is admitted exactly when its proof is the one dm_hello_encode()
 *   makes with the expected token over those 24 bytes, and its counter is
 *   above the last admitted for its (array, role, peer id): a wrong token,
 *   a changed byte, a replay or an old counter never gets in;
 * - the answer the acceptor sends is the one the connector expects, and
 *   differs from the proof (the two MACs are kept apart by their label);
 * - the acceptor remembers one counter per peer it admitted, no more.
 *
 * The fuzzer includes tpt_dm_peer.c to reach dm_counter_fresh(); nothing
 * here opens a fabric, but the file's other functions link against the
 * rest of iser/, libfabric and nettle.
 */
#include "iser/tpt_dm_peer.c"
#include "test/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REQUESTS	32
#define NR_PEERS	4	/* peer ids the fuzzer's hellos use */
#define NR_ARRAYS	3	/* and array ids */

/* The token the acceptor's owner expects of a peer id. */
static void expected_token(uint16_t peer_id, uint8_t token[TPT_DM_TOKEN_LEN])
{
	memset(token, 0x11 * (peer_id % NR_PEERS + 1), TPT_DM_TOKEN_LEN);
}

enum request_kind {
	REQ_GENUINE,		/* made with the expected token */
	REQ_WRONG_TOKEN,	/* made with another one */
	REQ_TAMPERED,		/* genuine, one byte changed in flight */
	REQ_REPLAY,		/* an earlier request's bytes again */
	REQ_RAW,		/* the input's bytes as they come */
	NR_REQUEST_KINDS,
};

/* The fuzzer's own account of admissions. */
struct admitted {
	bool used;
	uint64_t array_id;
	uint8_t role;
	uint16_t peer_id;
	uint64_t counter;
};

static struct admitted *account_find(struct admitted *table, size_t n,
				     const struct tpt_dm_hello *h)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (table[i].used && table[i].array_id == h->array_id &&
		    table[i].role == h->role && table[i].peer_id == h->peer_id)
			return &table[i];
	return NULL;
}

static size_t seen_count(struct tpt_dm *dm)
{
	struct dm_list *pos;
	size_t n = 0;

	for (pos = dm->seen_peers.next; pos != &dm->seen_peers; pos = pos->next)
		n++;
	return n;
}

/* Decoding: exactly the documented layout, the tail ignored. */
static bool check_decode(const uint8_t *wire, size_t len,
			 struct tpt_dm_hello *h)
{
	bool well_formed = len >= DM_HELLO_WIRE_LEN &&
			   get_be32(wire) == DM_HELLO_MAGIC &&
			   wire[4] == DM_HELLO_VERSION;
	struct tpt_dm_hello prefix;

	if (!dm_hello_decode(wire, len, h) != well_formed)
		abort();
	if (!well_formed)
		return false;
	if (h->role != wire[5] || h->peer_id != get_be16(&wire[6]) ||
	    h->array_id != get_be64(&wire[8]) ||
	    h->counter != get_be64(&wire[16]) ||
	    memcmp(h->proof, &wire[DM_HELLO_SIGNED_LEN], TPT_DM_TOKEN_LEN) ||
	    dm_hello_decode(wire, DM_HELLO_WIRE_LEN, &prefix) ||
	    memcmp(&prefix, h, sizeof(prefix)))
		abort();
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t sent[MAX_REQUESTS][DM_HELLO_WIRE_LEN + 8];
	static size_t sent_len[MAX_REQUESTS];
	struct admitted account[MAX_REQUESTS];
	struct reader r = { .p = data, .left = size };
	struct tpt_dm dm;
	size_t n, admitted_keys = 0;

	memset(&dm, 0, sizeof(dm));
	dm_list_init(&dm.seen_peers);
	memset(account, 0, sizeof(account));

	for (n = 0; n < MAX_REQUESTS && r.left; n++) {
		enum request_kind kind = take(&r, 1) % NR_REQUEST_KINDS;
		uint8_t token[TPT_DM_TOKEN_LEN], answer[DM_HELLO_ANSWER_LEN];
		uint8_t expected_answer[DM_HELLO_ANSWER_LEN];
		uint8_t again[DM_HELLO_WIRE_LEN];
		struct tpt_dm_hello made, got, expected_proof;
		uint8_t *wire = sent[n];
		struct admitted *last;
		bool proven, fresh;
		size_t i;

		memset(&made, 0, sizeof(made));
		made.role = (uint8_t)take(&r, 1);
		made.peer_id = (uint16_t)(take(&r, 1) % NR_PEERS);
		made.array_id = take(&r, 1) % NR_ARRAYS + 1;
		made.counter = take(&r, 8);
		expected_token(made.peer_id, made.token);
		sent_len[n] = DM_HELLO_WIRE_LEN;

		switch (kind) {
		case REQ_WRONG_TOKEN:
			made.token[take(&r, 1) % TPT_DM_TOKEN_LEN] ^=
				(uint8_t)(take(&r, 1) | 1);
			dm_hello_encode(&made, wire);
			break;
		case REQ_TAMPERED:
			dm_hello_encode(&made, wire);
			wire[take(&r, 1) % DM_HELLO_WIRE_LEN] ^=
				(uint8_t)(take(&r, 1) | 1);
			break;
		case REQ_REPLAY:
			if (!n) {
				dm_hello_encode(&made, wire);
				break;
			}
			i = take(&r, 1) % n;
			memcpy(wire, sent[i], sent_len[i]);
			sent_len[n] = sent_len[i];
			break;
		case REQ_RAW:
			sent_len[n] = DM_HELLO_WIRE_LEN - 8 +
				      take(&r, 1) % 17;	/* 32..48 bytes */
			for (i = 0; i < sent_len[n]; i++)
				wire[i] = (uint8_t)take(&r, 1);
			break;
		case REQ_GENUINE:
		default:
			dm_hello_encode(&made, wire);
			break;
		}

		/* The acceptor, step by step as dm_on_connreq(). */
		if (!check_decode(wire, sent_len[n], &got))
			continue;
		expected_token(got.peer_id, token);
		proven = tpt_dm_hello_proves(&got, token);
		/* The proof is the one the encoder makes with that token. */
		expected_proof = got;
		memcpy(expected_proof.token, token, TPT_DM_TOKEN_LEN);
		dm_hello_encode(&expected_proof, again);
		if (memcmp(again, wire, DM_HELLO_SIGNED_LEN) ||
		    proven != !memcmp(expected_proof.proof, got.proof,
				      TPT_DM_TOKEN_LEN))
			abort();
		/* A wrong token or a changed byte never proves anything. */
		if (proven && (kind == REQ_WRONG_TOKEN || kind == REQ_TAMPERED))
			abort();
		if (!proven)
			continue;
		last = account_find(account, MAX_REQUESTS, &got);
		fresh = dm_counter_fresh(&dm, &got);
		if (fresh != (!last || got.counter > last->counter))
			abort();
		if (!fresh)
			continue;
		if (!last) {
			last = &account[admitted_keys++];
			last->used = true;
			last->array_id = got.array_id;
			last->role = got.role;
			last->peer_id = got.peer_id;
		}
		last->counter = got.counter;
		if (seen_count(&dm) != admitted_keys)
			abort();

		/* The connector accepts only the answer it expects. */
		dm_hello_answer(&got, token, answer);
		if (kind != REQ_RAW && kind != REQ_REPLAY) {
			dm_hello_answer(&made, made.token, expected_answer);
			if (memcmp(answer, expected_answer, sizeof(answer)))
				abort();
		}
		if (!memcmp(answer, got.proof, sizeof(answer)))
			abort();
	}
	dm_seen_peers_free(&dm);
	return 0;
}
