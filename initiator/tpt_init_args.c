/* Parsers for user-given words: see tpt_init_args.h. */
#include <errno.h>
#include <string.h>

#include "initiator/tpt_init_args.h"
#include "scsi/tpt_cdb.h"

int tpt_init_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case 'k': case 'K': shift = 10; s++; break;
	case 'm': case 'M': shift = 20; s++; break;
	case 'g': case 'G': shift = 30; s++; break;
	default: break;
	}
	if (*s)
		return -EINVAL;
	if (shift && v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
	uint64_t v;

	/* No suffixes here: "8k" is no port. */
	if (!*s || strspn(s, "0123456789") != strlen(s) ||
	    tpt_init_parse_size(s, &v) || !v || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int tpt_init_parse_endpoint(const char *s, char *addr, size_t addrlen,
			    uint16_t *port)
{
	const char *host = s, *colon, *end;
	size_t n;

	if (!s || !addrlen)
		return -EINVAL;
	*port = 0;
	addr[0] = 0;
	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		host = s + 1;
		n = (size_t)(end - host);
		if (end[1] == ':') {
			if (parse_port(end + 2, port))
				return -EINVAL;
		} else if (end[1]) {
			return -EINVAL;
		}
		if (!memchr(host, ':', n))
			return -EINVAL;	/* brackets are for IPv6 only */
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':')) {
			n = strlen(s);	/* a bare IPv6 address, no port */
		} else if (colon) {
			n = (size_t)(colon - s);
			if (parse_port(colon + 1, port))
				return -EINVAL;
		} else {
			n = strlen(s);
		}
	}
	if (n >= addrlen)
		return -EINVAL;
	memcpy(addr, host, n);
	addr[n] = 0;
	if (!n)
		return *port || *s == ':' ? 0 : -EINVAL;
	return tpt_addr_is_numeric(addr) ? 0 : -EINVAL;
}

int tpt_init_parse_direct(const char *s, enum tpt_init_direct *out)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "auto"))
		*out = TPT_INIT_DIRECT_AUTO;
	else if (!strcmp(s, "on"))
		*out = TPT_INIT_DIRECT_ON;
	else if (!strcmp(s, "off"))
		*out = TPT_INIT_DIRECT_OFF;
	else
		return -EINVAL;
	return 0;
}
