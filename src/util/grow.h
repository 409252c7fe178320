/* Growing arrays: the capacity doubling that vectors of pieces, ids and
 * offsets share. */
#ifndef SMELT_UTIL_GROW_H
#define SMELT_UTIL_GROW_H

#include <stddef.h>

/* Room for need elements of elem bytes in array v of *cap elements (NULL when
 * *cap is 0): the capacity doubles from first until it holds need.  Returns
 * the array, moved or not, with *cap updated; NULL with the error set
 * (err_nomem naming what), v and *cap unchanged and still valid. */
void *grow_array(void *v, size_t *cap, size_t need, size_t elem, size_t first, const char *what);

#endif
