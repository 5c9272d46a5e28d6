/* Fuzz the extended host's parsers of user words (the nbdkit plugin's
 * parameters, tpt-dd's operands): initiator/tpt_init_args.c.
 *
 * Beyond "no crash, no overread": a size accepted is exactly its digits
 * times its suffix, with no wrap; an endpoint accepted has a numeric
 * address (or none) and a port in 1..65535 (or none), and written back
 * out it parses to the same; the address buffer is never overrun,
 * whatever its size. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/tpt_init_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_size(const char *s)
{
	unsigned __int128 v = 0;
	unsigned int shift = 0;
	uint64_t got;
	const char *p = s;
	int ret = tpt_init_parse_size(s, &got);

	if (ret)
		return;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned)(*p - '0');
	if (*p == 'k' || *p == 'K')
		shift = 10;
	else if (*p == 'm' || *p == 'M')
		shift = 20;
	else if (*p == 'g' || *p == 'G')
		shift = 30;
	if (p == s || (shift ? p[1] != 0 : *p != 0))
		abort();		/* accepted something not N[kmg] */
	v <<= shift;
	if (v > UINT64_MAX || (uint64_t)v != got)
		abort();
}

static void check_endpoint(const char *s, size_t addrlen)
{
	char addr[80], again[80], text[100];
	unsigned char bin[16];
	uint16_t port, port2;

	memset(addr, 0x5a, sizeof(addr));
	if (tpt_init_parse_endpoint(s, addr, addrlen, &port))
		goto guard;
	if (!memchr(addr, 0, addrlen))
		abort();
	if (addr[0] && inet_pton(AF_INET, addr, bin) != 1 &&
	    inet_pton(AF_INET6, addr, bin) != 1)
		abort();
	if (!addr[0] && !port)
		abort();		/* accepted nothing at all */
	snprintf(text, sizeof(text), strchr(addr, ':') ? "[%s]:%u" : "%s:%u",
		 addr, port);
	if (port && (tpt_init_parse_endpoint(text, again, sizeof(again),
					     &port2) ||
		     strcmp(again, addr) || port2 != port))
		abort();
guard:
	/* Nothing written past the buffer the caller named. */
	for (size_t i = addrlen; i < sizeof(addr); i++)
		if (addr[i] != 0x5a)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128];
	size_t addrlen;

	if (!size)
		return 0;
	/* First byte: the address buffer's size, 1..64. */
	addrlen = 1 + data[0] % 64;
	data++;
	size--;
	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = 0;
	check_size(s);
	check_endpoint(s, addrlen);
	{
		enum tpt_init_direct d;

		if (!tpt_init_parse_direct(s, &d) && strcmp(s, "auto") &&
		    strcmp(s, "on") && strcmp(s, "off"))
			abort();
	}
	return 0;
}
