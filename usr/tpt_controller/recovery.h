/*
 * What the recovery job engine (recovery.c) and the check and voting
 * resync it runs (check.c) share; the rest of the controller sees only
 * tpt_controller.h's recovery_*() calls.
 */
#ifndef TPT_CONTROLLER_RECOVERY_H
#define TPT_CONTROLLER_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct tpt_array;
struct tpt_span;
struct tpt_check_tally;

/* ---- recovery.c ---- */

/* Seconds since @since (CLOCK_MONOTONIC). */
double recovery_elapsed(const struct timespec *since);
/* Starts the job that recovers @position (RAID_PARITY_MEMBER: a resync,
 * or the check when recovery.check is set). */
void recovery_job_start(struct tpt_array *a, unsigned int position,
			bool catch_up);
/* Batch [@first, @first + @n), planned without @missing and rebuilding
 * the positions of @also too, has ended with @result. */
void recovery_batch_ended(struct tpt_array *a, uint64_t first, uint64_t n,
			  uint32_t missing, uint32_t also, int result);

/* ---- check.c ---- */

void recovery_check_end(struct tpt_array *a, const char *how, bool keep);
void recovery_check_count(struct tpt_array *a, const struct tpt_span *s,
			  struct tpt_check_tally *t);
void recovery_check_advance(struct tpt_array *a, uint64_t first,
			    uint64_t stripes,
			    const struct tpt_check_tally *found);
void recovery_check_unread(struct tpt_array *a, uint64_t first, uint64_t n,
			   struct tpt_check_tally *t);
void recovery_check_resume(struct tpt_array *a);
void recovery_tally_add(struct tpt_check_tally *a,
			const struct tpt_check_tally *b);
void recovery_vote_count(struct tpt_array *a, const struct tpt_span *s,
			 int *votes);
void recovery_vote_repair(struct tpt_array *a, uint64_t first, uint64_t n,
			  uint32_t missing, const int *votes);

#endif
