/* Images of a model file's weights (see image.h). */
#include "onnx/image.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

#define IMAGE_MAGIC 0x3267616d69746c6dull /* "mltimag2" */
#define ALIGN 64

typedef struct image_head {
  uint64_t magic, file_id, n_copies, n_hashes;
} image_head;

typedef struct copy_rec {
  uint64_t file_off, nbytes, image_off;
} copy_rec;

static uint64_t round_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static const copy_rec *copies_of(const void *img) { return (const copy_rec *)((const image_head *)img + 1); }

static const onnx_image_hash_rec *hashes_of(const void *img) {
  return (const onnx_image_hash_rec *)(copies_of(img) + ((const image_head *)img)->n_copies);
}

bool onnx_image_valid(const void *img, size_t len, uint64_t file_id) {
  if (!img || len < sizeof(image_head)) return false;
  const image_head *h = img;
  if (h->magic != IMAGE_MAGIC || h->file_id != file_id) return false;
  uint64_t room = (len - sizeof *h) / sizeof(copy_rec);
  if (h->n_copies > room || h->n_hashes > (len - sizeof *h - h->n_copies * sizeof(copy_rec)) / sizeof(onnx_image_hash_rec))
    return false;
  const copy_rec *r = copies_of(img);
  uint64_t data_start = sizeof *h + h->n_copies * sizeof *r + h->n_hashes * sizeof(onnx_image_hash_rec);
  for (uint64_t i = 0; i < h->n_copies; i++) {
    if (i && r[i].file_off <= r[i - 1].file_off) return false;
    if (r[i].image_off % ALIGN || r[i].image_off < data_start || r[i].image_off > len ||
        r[i].nbytes > len - r[i].image_off)
      return false;
  }
  const onnx_image_hash_rec *hr = hashes_of(img);
  for (uint64_t i = 1; i < h->n_hashes; i++)
    if (hr[i].name_hash < hr[i - 1].name_hash) return false;
  return true;
}

const void *onnx_image_lookup(const void *img, uint64_t file_off, size_t nbytes) {
  const image_head *h = img;
  const copy_rec *r = copies_of(img);
  uint64_t lo = 0, hi = h->n_copies;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (r[mid].file_off < file_off) lo = mid + 1;
    else hi = mid;
  }
  if (lo == h->n_copies || r[lo].file_off != file_off || r[lo].nbytes != nbytes) return NULL;
  return (const uint8_t *)img + r[lo].image_off;
}

bool onnx_image_hash(const void *img, const char *name, size_t nbytes, uint64_t *hash) {
  const image_head *h = img;
  const onnx_image_hash_rec *r = hashes_of(img);
  uint64_t key = hash_str(name), lo = 0, hi = h->n_hashes;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (r[mid].name_hash < key) lo = mid + 1;
    else hi = mid;
  }
  for (; lo < h->n_hashes && r[lo].name_hash == key; lo++) /* equal name hashes: a name's own nbytes */
    if (r[lo].nbytes == nbytes) {
      *hash = r[lo].hash;
      return true;
    }
  return false;
}

void onnx_image_hash_rec_set(onnx_image_hash_rec *r, const char *name, size_t nbytes, uint64_t hash) {
  *r = (onnx_image_hash_rec){hash_str(name), nbytes, hash};
}

/* The copies an image holds: all of them (none when they could not all be
 * listed). */
static size_t n_copies(const onnx_model *m) { return m->n_copies > 0 ? (size_t)m->n_copies : 0; }

static int by_file_off(const void *a, const void *b) {
  const onnx_copy *x = a, *y = b;
  return x->file_off < y->file_off ? -1 : x->file_off > y->file_off;
}

static int by_name_hash(const void *a, const void *b) {
  const onnx_image_hash_rec *x = a, *y = b;
  return x->name_hash < y->name_hash ? -1 : x->name_hash > y->name_hash;
}

static const uint8_t zeros[ALIGN];

onnx_image_part *onnx_image_parts(const onnx_model *m, onnx_image_hash_rec *hashes, size_t n_hashes, int *n_parts) {
  /* the copies in file order, as a load looks them up (import order is file
   * order within a graph; a subgraph's initializers may come after its
   * parent's), each range once */
  size_t nc = n_copies(m);
  onnx_copy *sorted = malloc(sizeof *sorted * (nc ? nc : 1));
  if (!sorted) return NULL;
  if (nc) memcpy(sorted, m->copies, sizeof *sorted * nc);
  qsort(sorted, nc, sizeof *sorted, by_file_off);
  size_t kept = 0;
  for (size_t i = 0; i < nc; i++)
    if (!kept || sorted[i].file_off != sorted[kept - 1].file_off) sorted[kept++] = sorted[i];
  nc = kept;
  size_t at = sizeof(image_head) + nc * sizeof(copy_rec) + n_hashes * sizeof *hashes;
  uint64_t off = round_up(at);
  onnx_image_part *parts = malloc(sizeof *parts * (1 + 2 * nc));
  uint8_t *head = calloc(1, (size_t)off); /* the padding after the records: zeros */
  if (!parts || !head) {
    free(parts);
    free(head);
    free(sorted);
    return NULL;
  }
  image_head h = {IMAGE_MAGIC, m->file_id, nc, n_hashes};
  memcpy(head, &h, sizeof h);
  if (n_hashes) {
    qsort(hashes, n_hashes, sizeof *hashes, by_name_hash);
    memcpy(head + sizeof h + nc * sizeof(copy_rec), hashes, n_hashes * sizeof *hashes);
  }
  int n = 0;
  parts[n++] = (onnx_image_part){head, (size_t)off};
  for (size_t i = 0; i < nc; i++) {
    const onnx_copy *c = &sorted[i];
    copy_rec r = {c->file_off, c->nbytes, off};
    memcpy(head + sizeof h + i * sizeof r, &r, sizeof r);
    parts[n++] = (onnx_image_part){c->data, c->nbytes};
    uint64_t end = round_up(off + c->nbytes);
    if (end > off + c->nbytes) parts[n++] = (onnx_image_part){zeros, (size_t)(end - off - c->nbytes)};
    off = end;
  }
  free(sorted);
  *n_parts = n;
  return parts;
}

void onnx_image_parts_free(onnx_image_part *parts) {
  if (!parts) return;
  free((void *)parts[0].data);
  free(parts);
}
