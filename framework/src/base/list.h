/* The one intrusive doubly linked list of the library: a link embedded in
 * each object, and a list of head and tail that is empty when zeroed, so
 * objects allocated with calloc or declared static need no set-up. Not
 * thread-safe: the owner of the list keeps it under its own lock.
 * sp__list_entry gives back the object a link is in. Also the reversal of
 * a singly linked stack (pushed newest first) into arrival order. */
#ifndef SP_BASE_LIST_H
#define SP_BASE_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sp__link {
    struct sp__link *prev, *next;
} sp__link_t;

typedef struct sp__list {
    sp__link_t *head, *tail;
} sp__list_t;

#define sp__list_entry(link, type, member) \
    ((type *)(void *)((char *)(link) - offsetof(type, member)))

static inline bool sp__list_empty(const sp__list_t *l)
{
    return !l->head;
}

static inline void sp__list_push_back(sp__list_t *l, sp__link_t *n)
{
    n->next = NULL;
    n->prev = l->tail;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
}

static inline void sp__list_push_front(sp__list_t *l, sp__link_t *n)
{
    n->prev = NULL;
    n->next = l->head;
    if (l->head)
        l->head->prev = n;
    else
        l->tail = n;
    l->head = n;
}

/* n must be in l. */
static inline void sp__list_remove(sp__list_t *l, sp__link_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

/* Reverse in place the NULL-terminated list `head` of `type` objects
 * linked by their `field`: a stack built by pushing becomes FIFO. */
#define SP__SLIST_REVERSE(type, head, field) \
    do {                                     \
        type *sp__rev = NULL;                \
        while (head) {                       \
            type *sp__next = (head)->field;  \
            (head)->field = sp__rev;         \
            sp__rev = (head);                \
            (head) = sp__next;               \
        }                                    \
        (head) = sp__rev;                    \
    } while (0)

#endif
