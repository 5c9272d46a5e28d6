/*
 * What the TPT and Baseline plan builders share: a plan is a list of
 * commands laid out with the step each belongs to, then sorted into
 * steps, each a run of consecutive commands that go out together.
 */
#ifndef TPT_CONTROLLER_PLAN_STEPS_H
#define TPT_CONTROLLER_PLAN_STEPS_H

#include <stddef.h>

struct plan_step { unsigned int first_cmd, nr_cmds; };

/*
 * Make room for one more element in *@array of @nr elements of @size
 * bytes, *@cap allocated: doubles the allocation when full.  0 or
 * -ENOMEM (the array is unchanged).
 */
int plan_grow(void **array, unsigned int nr, unsigned int *cap, size_t size);

/*
 * Sort the @nr elements of *@array (each @size bytes) into *@nr_steps
 * steps by @step_of[i], stably: within a step the elements keep the order
 * they were laid out in.  A step no element is in is dropped (it orders
 * nothing), and *@nr_steps becomes the number kept.  *@steps receives the
 * steps.  0 or -ENOMEM (nothing changed).
 */
int plan_sort_steps(void **array, unsigned int nr, size_t size,
		    const unsigned int *step_of, unsigned int *nr_steps,
		    struct plan_step **steps);

#endif
