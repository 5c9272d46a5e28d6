/* Parsers for the words users give the extended host's programs (the
 * nbdkit plugin's key=value parameters, tpt-dd's operands): sizes,
 * datamover endpoints, the direct mode.  Strict: a value is taken whole
 * or refused, never read in part.  Part of libtptinitiator, but not of
 * its API proper (tpt_initiator.h); fuzzed by test/fuzz/fuzz_init_args.c. */
#ifndef TPT_INIT_ARGS_H
#define TPT_INIT_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "initiator/tpt_initiator.h"

/* "N" or "N" with one suffix k, m, g (also K, M, G; powers of 1024).
 * 0, or -EINVAL for anything else, a sign included, or -ERANGE past
 * 2^64 - 1. */
int tpt_init_parse_size(const char *s, uint64_t *out);

/* "ADDR", "ADDR:PORT", "[IPV6]", "[IPV6]:PORT", ":PORT" or a bare IPv6
 * address; ADDR numeric (a name could block).  @addr gets the address
 * ("" when left to the library), @port 0 when none is given.  0 or
 * -EINVAL. */
int tpt_init_parse_endpoint(const char *s, char *addr, size_t addrlen,
			    uint16_t *port);

/* "auto", "on" or "off".  0 or -EINVAL. */
int tpt_init_parse_direct(const char *s, enum tpt_init_direct *out);

#endif
