/* The datamover's libfabric set-up (tpt_dm_fabric.h).
 *
 * Keys: providers with FI_MR_PROV_KEY choose them; for the others (tcp)
 * we request them, unique per fabric (not only per domain, so a key of
 * one domain never names a registration of another) by a counter and,
 * where the key is wide enough, with random upper bits so that a peer
 * cannot predict the next buffer's key from one it has seen. */
#include "iser/tpt_dm_fabric.h"
#include "iser/tpt_dm_provider.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define DM_EQ_SIZE 256
/* Every posted chunk of every peer may complete before we read: a
 * hardware CQ must hold them all (256 peers at the default depth). */
#define DM_CQ_SIZE 4096
#define DM_KEY_RETRIES 8

static int fab_error(struct tpt_dm_fabric *fab, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fab_error(struct tpt_dm_fabric *fab, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fab->errbuf, sizeof(fab->errbuf), fmt, ap);
	va_end(ap);
	return err;
}

/* libfabric's own codes (FI_EOTHER and up) have no errno twin. */
int tpt_dm_fabric_errno(ssize_t fi_ret)
{
	int err = fi_ret < 0 ? (int)-fi_ret : (int)fi_ret;

	if (err == 0)
		return 0;
	if (err >= FI_ERRNO_OFFSET)
		return -EIO;
	return -err;
}

/* fab_error() for a failed libfabric call named what. */
static int fab_fi_error(struct tpt_dm_fabric *fab, const char *what, int ret)
{
	return fab_error(fab, tpt_dm_fabric_errno(ret), "%s: %s", what,
			 fi_strerror(-ret));
}

struct fi_info *tpt_dm_fabric_hints(const char *provider)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
		      FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_MSG;
	/* The memory registration modes we know how to honour: local
	 * descriptors, virtual addressing, allocated backing memory and
	 * provider-chosen keys (verbs needs all four, tcp none). */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	/* One thread touches the context at a time: the owner's loop. */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(provider);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return NULL;
	}
	return hints;
}

static int fab_getinfo(struct tpt_dm_fabric *fab, const char *provider,
		       const char *listen_addr, uint16_t listen_port)
{
	char service[8];
	const char *node = listen_addr, *svc = NULL;
	uint64_t flags = 0;
	int ret;

	if (node) {
		flags = FI_SOURCE | FI_NUMERICHOST;
		if (listen_port) {
			snprintf(service, sizeof(service), "%u", listen_port);
			svc = service;
		}
	}
	/* Ask for delivery-complete writes first: a Put_Data must have
	 * landed in the passive side's memory before its completion tells
	 * the target to answer the controller, or the host could see the
	 * SCSI status before the data. */
	fab->hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	ret = fi_getinfo(TPT_DM_FI_VERSION, node, svc, flags, fab->hints,
			 &fab->info);
	if (ret) {
		fab->hints->tx_attr->op_flags = 0;
		ret = fi_getinfo(TPT_DM_FI_VERSION, node, svc, flags,
				 fab->hints, &fab->info);
	}
	if (ret)
		return fab_error(fab, tpt_dm_fabric_errno(ret),
				 "fi_getinfo(%s, %s:%s): %s", provider,
				 node ? node : "-", svc ? svc : "0",
				 fi_strerror(-ret));
	fab->write_flags = FI_COMPLETION;
	if (fab->info->tx_attr->op_flags & FI_DELIVERY_COMPLETE)
		fab->write_flags |= FI_DELIVERY_COMPLETE;

	/* Connects must land in the same fabric and domain. */
	free(fab->hints->fabric_attr->name);
	fab->hints->fabric_attr->name = strdup(fab->info->fabric_attr->name);
	free(fab->hints->domain_attr->name);
	fab->hints->domain_attr->name = strdup(fab->info->domain_attr->name);
	if (!fab->hints->fabric_attr->name || !fab->hints->domain_attr->name)
		return fab_error(fab, -ENOMEM, "out of memory");
	fab->hints->tx_attr->op_flags = fab->info->tx_attr->op_flags &
					FI_DELIVERY_COMPLETE;
	return 0;
}

static int fab_open_eq(struct tpt_dm_fabric *fab)
{
	struct fi_eq_attr eq_attr = {
		.size = DM_EQ_SIZE,
		.wait_obj = FI_WAIT_FD,
	};
	int ret;

	ret = fi_eq_open(fab->fabric, &eq_attr, &fab->eq, NULL);
	if (ret)
		return fab_fi_error(fab, "fi_eq_open", ret);
	return 0;
}

static int fab_listen(struct tpt_dm_fabric *fab, const char *listen_addr,
		      uint16_t listen_port)
{
	struct sockaddr_storage name;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&name;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&name;
	size_t namelen = sizeof(name);
	int ret;

	ret = fi_passive_ep(fab->fabric, fab->info, &fab->pep, NULL);
	if (ret)
		return fab_fi_error(fab, "fi_passive_ep", ret);
	ret = fi_pep_bind(fab->pep, &fab->eq->fid, 0);
	if (ret)
		return fab_fi_error(fab, "fi_pep_bind", ret);
	ret = fi_listen(fab->pep);
	if (ret)
		return fab_error(fab, tpt_dm_fabric_errno(ret),
				 "fi_listen on %s:%u: %s", listen_addr,
				 listen_port, fi_strerror(-ret));
	ret = fi_getname(&fab->pep->fid, &name, &namelen);
	if (ret)
		return fab_fi_error(fab, "fi_getname", ret);
	if (name.ss_family == AF_INET)
		fab->listen_port = ntohs(sin->sin_port);
	else if (name.ss_family == AF_INET6)
		fab->listen_port = ntohs(sin6->sin6_port);
	else
		fab->listen_port = listen_port;
	return 0;
}

/* Random words for keys, from the kernel's CSPRNG (blocking only until
 * it is seeded, at boot): 0, or -errno. */
static int fab_keys_refill(struct tpt_dm_fabric *fab)
{
	size_t want = sizeof(fab->key_random), got = 0;

	while (got < want) {
		ssize_t n = getrandom((uint8_t *)fab->key_random + got,
				      want - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	fab->key_random_left = TPT_DM_KEY_WORDS;
	return 0;
}

static uint64_t fab_key_random(struct tpt_dm_fabric *fab)
{
	/* A refill that fails (it cannot once the first has worked) leaves
	 * the words as they were: still unknown to any peer. */
	if (!fab->key_random_left && fab_keys_refill(fab))
		fab->key_random_left = TPT_DM_KEY_WORDS;
	return fab->key_random[--fab->key_random_left];
}

/*
 * Requested keys (STags) are a counter, so that no two live ones collide,
 * under random upper bits where the provider's keys are wide enough: an
 * STag seen on the wire tells nothing about the next or any other.
 * Without a CSPRNG the datamover does not start.
 */
static int fab_keys_init(struct tpt_dm_fabric *fab)
{
	size_t key_size = fab->info->domain_attr->mr_key_size;
	int ret;

	fab->mr_mode = (uint64_t)fab->info->domain_attr->mr_mode;
	if (!key_size || key_size >= sizeof(uint64_t))
		fab->key_mask = UINT64_MAX;
	else
		fab->key_mask = (1ULL << (8 * key_size)) - 1;
	ret = fab_keys_refill(fab);
	if (ret)
		return fab_error(fab, ret, "getrandom: %s: refusing to hand "
				 "out guessable STags", strerror(-ret));
	fab->key_counter = fab_key_random(fab);
	return 0;
}

int tpt_dm_fabric_open(struct tpt_dm_fabric *fab, const char *provider,
		       const char *listen_addr, uint16_t listen_port)
{
	int ret;

	tpt_dm_fabric_env();
	fab->hints = tpt_dm_fabric_hints(provider);
	if (!fab->hints)
		return fab_error(fab, -ENOMEM, "out of memory");
	ret = fab_getinfo(fab, provider, listen_addr, listen_port);
	if (ret)
		return ret;
	ret = fab_keys_init(fab);
	if (ret)
		return ret;
	ret = fi_fabric(fab->info->fabric_attr, &fab->fabric, NULL);
	if (ret)
		return fab_fi_error(fab, "fi_fabric", ret);
	ret = fab_open_eq(fab);
	if (ret || !listen_addr)
		return ret;
	return fab_listen(fab, listen_addr, listen_port);
}

int tpt_dm_fabric_domain_open(struct tpt_dm_fabric *fab,
			      struct tpt_dm_domain *dom)
{
	struct fi_cq_attr cq_attr = {
		.size = DM_CQ_SIZE,
		.format = FI_CQ_FORMAT_CONTEXT,
		.wait_obj = FI_WAIT_FD,
		.wait_cond = FI_CQ_COND_NONE,
	};
	int ret;

	ret = fi_domain(fab->fabric, fab->info, &dom->domain, NULL);
	if (ret)
		return fab_fi_error(fab, "fi_domain", ret);
	ret = fi_cq_open(dom->domain, &cq_attr, &dom->cq, NULL);
	if (ret)
		return fab_fi_error(fab, "fi_cq_open", ret);
	return 0;
}

void tpt_dm_fabric_domain_close(struct tpt_dm_domain *dom)
{
	if (dom->cq)
		fi_close(&dom->cq->fid);
	if (dom->domain)
		fi_close(&dom->domain->fid);
	dom->cq = NULL;
	dom->domain = NULL;
}

int tpt_dm_fabric_dest_info(struct tpt_dm_fabric *fab, const char *addr,
			    uint16_t port, struct fi_info **info)
{
	char service[8];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = fi_getinfo(TPT_DM_FI_VERSION, addr, service, FI_NUMERICHOST,
			 fab->hints, info);
	if (ret)
		return fab_error(fab, ret == -FI_ENODATA ? -EADDRNOTAVAIL :
				 tpt_dm_fabric_errno(ret), "connect %s:%u: %s",
				 addr, port, fi_strerror(-ret));
	return 0;
}

int tpt_dm_fabric_ep_open(struct tpt_dm_fabric *fab, struct tpt_dm_domain *dom,
			  struct fi_info *info, void *context,
			  struct fid_ep **ep)
{
	int ret;

	/* info may be a connection request's, whose domain attributes name
	 * the device, not one of our domains on it: the endpoint lives in
	 * dom all the same (fi_endpoint takes the domain to open it in). */
	ret = fi_endpoint(dom->domain, info, ep, context);
	if (ret) {
		*ep = NULL;
		return fab_fi_error(fab, "fi_endpoint", ret);
	}
	ret = fi_ep_bind(*ep, &fab->eq->fid, 0);
	if (!ret)
		ret = fi_ep_bind(*ep, &dom->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(*ep);
	if (ret) {
		fi_close(&(*ep)->fid);
		*ep = NULL;
		return fab_fi_error(fab, "endpoint setup", ret);
	}
	return 0;
}

static uint64_t fab_requested_key(struct tpt_dm_fabric *fab)
{
	static const uint64_t low32 = 0xffffffffULL;
	uint64_t key;

	fab->key_counter++;
	if (fab->key_mask == UINT64_MAX)
		key = (fab_key_random(fab) & ~low32) |
		      (fab->key_counter & low32);
	else
		key = fab->key_counter & fab->key_mask;
	/* 0 reads like "no key" in too many places. */
	return key ? key : fab_requested_key(fab);
}

int tpt_dm_fabric_mr_reg(struct tpt_dm_fabric *fab, struct tpt_dm_domain *dom,
			 void *addr, size_t len, uint64_t access,
			 void *context, struct fid_mr **mr)
{
	uint64_t key = 0;
	int ret, tries = 0;

	do {
		if (!(fab->mr_mode & FI_MR_PROV_KEY))
			key = fab_requested_key(fab);
		ret = fi_mr_reg(dom->domain, addr, len, access, 0, key, 0, mr,
				context);
	} while (ret == -FI_ENOKEY && ++tries < DM_KEY_RETRIES);
	if (ret) {
		*mr = NULL;
		return fab_error(fab, tpt_dm_fabric_errno(ret),
				 "fi_mr_reg %zu bytes: %s", len,
				 fi_strerror(-ret));
	}
	return 0;
}

uint64_t tpt_dm_fabric_rma_base(const struct tpt_dm_fabric *fab,
				const void *addr)
{
	if (fab->mr_mode & FI_MR_VIRT_ADDR)
		return (uint64_t)(uintptr_t)addr;
	return 0;
}

void tpt_dm_fabric_close(struct tpt_dm_fabric *fab)
{
	if (fab->pep)
		fi_close(&fab->pep->fid);
	if (fab->eq)
		fi_close(&fab->eq->fid);
	if (fab->fabric)
		fi_close(&fab->fabric->fid);
	if (fab->info)
		fi_freeinfo(fab->info);
	if (fab->hints)
		fi_freeinfo(fab->hints);
}
