/*
 * libFuzzer target for the login keys our tgtd parses: upstream tgt's
 * text-key scanning (iscsid.c), its negotiation of the session keys
 * (param.c) and its CHAP exchange (chap.c), fed the data segment of a
 * Login request.  Our own X-org.tptraid.* keys are not parsed yet
 * (docs/protocol.md 6.2); tgt answers them NotUnderstood like any other.
 *
 * Upstream is never committed: the Makefile compiles this file against
 * the patched tree in $(BUILD)/tgt.  It includes iscsid.c and chap.c to
 * reach their static scanners, and links param.c, md5.c and sha1.c; the
 * linker's --gc-sections keeps only what these paths call.  tgtd
 * registers its iSCSI driver from a constructor, which would keep every
 * driver entry point and with them the rest of tgtd; the fuzzer has no
 * driver registry, so "constructor" reads as "unused" while iscsid.c is
 * compiled.  What the scanners call outside those files (the account
 * lookup and logging) is defined below.
 *
 * The first input byte picks the step of a login and, for the CHAP
 * response, the digest; the rest is the PDU's data segment, in a buffer of
 * exactly its size.  Nothing may crash or read past it; the response must
 * be well-formed key=value text that fits its buffer; every negotiated
 * session key must stay inside its range; a challenge goes out exactly
 * when an algorithm was agreed; and the target answers the initiator's
 * challenge only once the initiator's own response was accepted.  The
 * seeds (test/fuzz/corpus/fuzz_iscsi_login_keys) hold correct MD5 and
 * SHA1 responses to the fixed challenge below, so the accepting path is
 * reached too.
 */
#include <stdbool.h>

#define constructor unused
#include "iscsid.c"
#undef constructor
#include "chap.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The one account every target has here: CHAP both ways. */
#define FUZZ_USER	"iqn.2026-11.org.example:host"
#define FUZZ_SECRET	"fuzz-secret-0123"
#define FUZZ_TARGET_USER "iqn.2026-11.org.example:target"
#define FUZZ_TARGET_SECRET "fuzz-secret-4567"

int account_available(int tid, int dir)
{
	(void)tid;
	(void)dir;
	return 1;
}

int account_lookup(int tid, int type, char *user, int ulen, char *password,
		   int plen)
{
	(void)tid;
	if (type == AUTH_DIR_INCOMING) {
		/* @user is the name the initiator gave: match it. */
		if (strcmp(user, FUZZ_USER))
			return -ENOENT;
		snprintf(password, (size_t)plen, "%s", FUZZ_SECRET);
		return 0;
	}
	snprintf(user, (size_t)ulen, "%s", FUZZ_TARGET_USER);
	snprintf(password, (size_t)plen, "%s", FUZZ_TARGET_SECRET);
	return 0;
}

/* log.c's entry points: the fuzzer runs silent. */
int is_debug;

void log_warning(const char *fmt, ...)
{
	(void)fmt;
}

void log_error(const char *fmt, ...)
{
	(void)fmt;
}

void log_debug(const char *fmt, ...)
{
	(void)fmt;
}

/* The login steps a Login request's data segment can be read in. */
enum login_step {
	STEP_SECURITY,		/* AuthMethod and the names */
	STEP_CHAP_ALGORITHM,	/* CHAP_A: the target answers a challenge */
	STEP_CHAP_RESPONSE,	/* CHAP_N, CHAP_R, and CHAP_I/CHAP_C if mutual */
	STEP_OPERATIONAL,	/* the session keys */
	NR_LOGIN_STEPS,
};

/* The challenge the target sent before a STEP_CHAP_RESPONSE input. */
#define FUZZ_CHAP_ID	1
static uint8_t fuzz_challenge[CHAP_CHALLENGE_MAX];

/*
 * What a Login response's data segment must be: NUL-terminated key=value
 * entries back to back, inside the buffer, within the login's limit.
 */
static void check_response_text(const struct iscsi_connection *conn)
{
	const char *text = conn->rsp.data;
	size_t len = conn->rsp.datasize, at = 0, n;

	if (!len)
		return;
	if (len > (size_t)conn->rsp_buffer_size || len > INCOMING_BUFSIZE ||
	    text != conn->rsp_buffer)
		abort();
	while (at < len) {
		n = strnlen(&text[at], len - at);
		if (n == len - at || !memchr(&text[at], '=', n))
			abort();
		at += n + 1;
	}
}

/*
 * Whatever the initiator offered, every session key the target agreed to
 * holds a value it can act on: within the key's range, where 0 also
 * stands for "no limit" (MaxOutstandingUnexpectedPDUs) and for "reject"
 * (the marker intervals).
 */
static void check_session_params(const struct iscsi_connection *conn)
{
	int i;

	for (i = 0; session_keys[i].name; i++) {
		unsigned int val = conn->session_param[i].val;
		const struct iscsi_key *key = &session_keys[i];

		if (val == 0 && (i == ISCSI_PARAM_MAX_OUTST_PDU ||
				 i == ISCSI_PARAM_OFMARKINT ||
				 i == ISCSI_PARAM_IFMARKINT))
			continue;
		if (val < key->min || val > key->max)
			abort();
	}
}

/* Return the value of @key in the response, or NULL. */
static const char *response_value(const struct iscsi_connection *conn,
				  const char *key)
{
	const char *text = conn->rsp.data;
	size_t at = 0, klen = strlen(key);

	while (at < conn->rsp.datasize) {
		const char *entry = &text[at];

		if (!strncmp(entry, key, klen) && entry[klen] == '=')
			return &entry[klen + 1];
		at += strlen(entry) + 1;
	}
	return NULL;
}

static void run_step(struct iscsi_connection *conn, enum login_step step,
		     bool sha1)
{
	int res;

	switch (step) {
	case STEP_SECURITY:
		conn->state = STATE_SECURITY;
		text_scan_security(conn);
		/* Only what we offer can be chosen. */
		if (conn->auth_method != AUTH_UNKNOWN &&
		    conn->auth_method != AUTH_CHAP &&
		    conn->auth_method != AUTH_NONE)
			abort();
		break;
	case STEP_CHAP_ALGORITHM:
		conn->state = STATE_SECURITY_AUTH;
		conn->auth_method = AUTH_CHAP;
		conn->auth_state = CHAP_AUTH_STATE_START;
		res = cmnd_exec_auth_chap(conn);
		/* A challenge goes out exactly when an algorithm was agreed. */
		if (!res != (conn->auth_state == CHAP_AUTH_STATE_CHALLENGE) ||
		    (!res && (!response_value(conn, "CHAP_A") ||
			      !response_value(conn, "CHAP_I") ||
			      !response_value(conn, "CHAP_C"))))
			abort();
		break;
	case STEP_CHAP_RESPONSE:
		conn->state = STATE_SECURITY_AUTH;
		conn->auth_method = AUTH_CHAP;
		conn->auth_state = CHAP_AUTH_STATE_CHALLENGE;
		conn->auth.chap.digest_alg = sha1 ? CHAP_DIGEST_ALG_SHA1 :
						    CHAP_DIGEST_ALG_MD5;
		conn->auth.chap.id = FUZZ_CHAP_ID;
		conn->auth.chap.challenge_size = CHAP_CHALLENGE_MAX;
		conn->auth.chap.challenge = malloc(CHAP_CHALLENGE_MAX);
		memcpy(conn->auth.chap.challenge, fuzz_challenge,
		       CHAP_CHALLENGE_MAX);
		res = cmnd_exec_auth_chap(conn);
		/* The target answers a challenge only of an initiator that
		 * proved it knows the secret. */
		if (response_value(conn, "CHAP_R") &&
		    (res || conn->state != STATE_SECURITY_DONE))
			abort();
		break;
	case STEP_OPERATIONAL:
	default:
		conn->state = STATE_LOGIN;
		text_scan_login(conn);
		if (conn->state != STATE_EXIT) {
			text_check_param(conn);
			check_session_params(conn);
		}
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iscsi_connection *conn;
	size_t i;

	if (!size)
		return 0;
	for (i = 0; i < CHAP_CHALLENGE_MAX; i++)
		fuzz_challenge[i] = (uint8_t)i;
	conn = calloc(1, sizeof(*conn));
	conn->tid = 1;
	conn->auth_method = AUTH_UNKNOWN;
	conn->req.bhs.opcode = ISCSI_OP_LOGIN;
	param_set_defaults(conn->session_param, session_keys);
	conn->rsp_buffer = malloc(INCOMING_BUFSIZE);
	conn->rsp_buffer_size = INCOMING_BUFSIZE;
	/* Exactly the data segment: ASan sees any read past it. */
	conn->req.datasize = (unsigned int)(size - 1);
	conn->req.data = malloc(size - 1 ? size - 1 : 1);
	memcpy(conn->req.data, data + 1, size - 1);

	run_step(conn, (enum login_step)(data[0] % NR_LOGIN_STEPS),
		 data[0] & 0x80);
	check_response_text(conn);

	free(conn->auth.chap.challenge);
	free(conn->req.data);
	free(conn->rsp_buffer);
	free(conn);
	return 0;
}
