/* The datamover's libfabric set-up, for the datamover (iser/tpt_dm*.c)
 * and for tools/tpt-fi-rma-bench, which measures raw fi_write/fi_read
 * against the datamover over objects set up the same way:
 *
 *   fi_getinfo with the datamover's hints, delivery-complete writes
 *   where the provider offers them; the fabric, its EQ (fd wait object)
 *   and a listening passive endpoint; any number of domains of that
 *   fabric, each with its CQ (fd wait object); active endpoints bound to
 *   the EQ and their domain's CQ; memory registrations in a domain with
 *   keys the provider chooses or we request.
 *
 * Domains are what keeps one array's registrations from another's
 * peers (the datamover's scopes, iser/tpt_dm.h): an endpoint reaches
 * only MRs of its own domain (tcp looks keys up in its domain's MR map,
 * verbs gives each domain its own protection domain), and its CQ must
 * be of that domain too.  The EQ and the listener are the fabric's: a
 * connection request may be accepted into any domain.
 *
 * Internal to iser/ and that benchmark: the datamover's users see
 * iser/tpt_dm.h.  Functions return 0 or a negative errno, with the
 * detail in fab->errbuf. */
#ifndef TPT_ISER_DM_FABRIC_H
#define TPT_ISER_DM_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define TPT_DM_FI_VERSION FI_VERSION(1, 17)

struct tpt_dm_fabric {
	struct fi_info *hints;	/* pinned to info's fabric and domain,
				 * for connects */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_eq *eq;	/* connection events of every endpoint */
	struct fid_pep *pep;	/* NULL unless listening */
	uint16_t listen_port;

	/* fi_writemsg flags of a write that must have landed in the
	 * passive side's memory when it completes: FI_COMPLETION, and
	 * FI_DELIVERY_COMPLETE where the provider offers it. */
	uint64_t write_flags;

	/* MR keys we request, where the provider does not choose them */
	uint64_t mr_mode;
	uint64_t key_mask;	/* requested keys must fit mr_key_size */
	uint64_t key_counter;	/* requested keys: unique in the fabric,
				 * across its domains, by this */
	/* and unpredictable by these words from the kernel's CSPRNG */
#define TPT_DM_KEY_WORDS 64
	uint64_t key_random[TPT_DM_KEY_WORDS];
	unsigned int key_random_left;

	char errbuf[256];	/* the last failure, in words */
};

/* One access domain of the fabric and the CQ of its endpoints. */
struct tpt_dm_domain {
	struct fid_domain *domain;
	struct fid_cq *cq;	/* fd wait object */
};

/* What the datamover asks libfabric for: connected endpoints with RMA
 * both ways, the memory registration modes it honours, one thread per
 * domain.  NULL when out of memory. */
struct fi_info *tpt_dm_fabric_hints(const char *provider);

/* Sets up fab (zeroed by the caller) for provider: fi_getinfo, with
 * listen_addr (numeric) and listen_port (0: ephemeral) as the source
 * when listen_addr is given, then the fabric and EQ, and, with
 * listen_addr, a passive endpoint listening there (its port in
 * fab->listen_port).  tpt_dm_fabric_close() undoes it, also after a
 * failure. */
int tpt_dm_fabric_open(struct tpt_dm_fabric *fab, const char *provider,
		       const char *listen_addr, uint16_t listen_port);
/* Opens a domain of fab (dom zeroed by the caller) and its CQ.
 * tpt_dm_fabric_domain_close() undoes it, also after a failure. */
int tpt_dm_fabric_domain_open(struct tpt_dm_fabric *fab,
			      struct tpt_dm_domain *dom);
/* Endpoints and memory registrations of dom must be closed first. */
void tpt_dm_fabric_domain_close(struct tpt_dm_domain *dom);
/* fi_getinfo for connecting to addr:port (numeric: name resolution
 * would block) in fab's fabric; *info is the caller's to free. */
int tpt_dm_fabric_dest_info(struct tpt_dm_fabric *fab, const char *addr,
			    uint16_t port, struct fi_info **info);
/* An endpoint in dom for info (from tpt_dm_fabric_dest_info() or a
 * connection request, whichever domain of fab it is to live in) bound to
 * fab's EQ and dom's CQ and enabled, with context as its fid's
 * context. */
int tpt_dm_fabric_ep_open(struct tpt_dm_fabric *fab, struct tpt_dm_domain *dom,
			  struct fi_info *info, void *context,
			  struct fid_ep **ep);
/* Registers len bytes at addr in dom with FI_* access, under a key the
 * provider chooses or, where it does not, a fresh one of ours: unique
 * in fab and, where keys are 64 bits wide, unpredictable. */
int tpt_dm_fabric_mr_reg(struct tpt_dm_fabric *fab, struct tpt_dm_domain *dom,
			 void *addr, size_t len, uint64_t access,
			 void *context, struct fid_mr **mr);
/* The RMA address peers use for addr's first byte in a registration
 * starting there: addr itself for FI_MR_VIRT_ADDR providers (verbs),
 * 0 for offset-addressed ones (tcp). */
uint64_t tpt_dm_fabric_rma_base(const struct tpt_dm_fabric *fab,
				const void *addr);
/* Closes what tpt_dm_fabric_open() opened; endpoints and domains must
 * be closed first.  Only fab->errbuf stays usable. */
void tpt_dm_fabric_close(struct tpt_dm_fabric *fab);

/* libfabric return code (negative FI_E*) to negative errno. */
int tpt_dm_fabric_errno(ssize_t fi_ret);

#endif
