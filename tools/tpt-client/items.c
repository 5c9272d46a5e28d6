/* The list every kind of tpt-client record is kept in (client.h). */
#include "client.h"

#include <stdlib.h>
#include <string.h>

void *item_new(struct item **list, size_t size, const char *name)
{
	struct item *it = calloc(1, size);

	if (!it)
		return NULL;
	if (name && !(it->name = strdup(name))) {
		free(it);
		return NULL;
	}
	it->next = *list;
	*list = it;
	return it;
}

void *item_find(struct item *list, const char *name)
{
	struct item *it;

	for (it = list; it; it = it->next)
		if (it->name && !strcmp(it->name, name))
			return it;
	return NULL;
}

void item_delete(struct item **list, void *record)
{
	struct item *it = record, **pp;

	for (pp = list; *pp; pp = &(*pp)->next) {
		if (*pp == it) {
			*pp = it->next;
			break;
		}
	}
	free(it->name);
	free(it);
}

void item_delete_all(struct item **list)
{
	while (*list)
		item_delete(list, *list);
}
