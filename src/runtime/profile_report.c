/* What the profiler recorded, as a summary table and as a Chrome trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/profile.h"
#include "util/err.h"

static int cmp_rows(const void *a, const void *b) {
  const profile_row *x = a, *y = b;
  if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
  return strcmp(x->label, y->label);
}

static smelt_status add_row(profile_summary *s, int *cap, const char *label, int64_t ns) {
  for (int i = 0; i < s->n_rows; i++)
    if (!strcmp(s->rows[i].label, label)) {
      s->rows[i].calls++;
      s->rows[i].total_ns += ns;
      return SMELT_OK;
    }
  if (s->n_rows == *cap) {
    int nc = *cap ? *cap * 2 : 32;
    profile_row *r = realloc(s->rows, sizeof *r * (size_t)nc);
    if (!r) return err_nomem("profile summary", sizeof *r * (size_t)nc);
    s->rows = r;
    *cap = nc;
  }
  s->rows[s->n_rows++] = (profile_row){label, 1, ns};
  return SMELT_OK;
}

smelt_status profiler_summarize(const profiler *p, bool by_name, profile_summary *out) {
  memset(out, 0, sizeof *out);
  size_t n;
  const profile_event *ev = profiler_events(p, &n);
  out->n_tracks = profiler_tracks(p);
  out->track_busy_ns = calloc((size_t)out->n_tracks + 1, sizeof *out->track_busy_ns);
  if (!out->track_busy_ns) return err_nomem("profile summary", sizeof(int64_t) * (size_t)out->n_tracks);
  int cap = 0;
  for (size_t i = 0; i < n; i++) {
    const profile_event *e = &ev[i];
    if (e->t1_ns < 0) continue; /* never closed: a run that failed midway */
    int64_t d = e->t1_ns - e->t0_ns;
    if (e->type == PROFILE_RUN) {
      out->runs++;
      out->run_ns += d;
    } else if (e->type == PROFILE_CHUNK) {
      if (e->track != 0) out->track_busy_ns[e->track] += d; /* track 0's chunks lie inside its steps */
    } else if (e->depth == 0) {
      out->steps_ns += d;
      out->track_busy_ns[e->track] += d;
      smelt_status st = add_row(out, &cap, by_name ? (*e->name ? e->name : "(unnamed)") : e->kind, d);
      if (st) {
        profile_summary_free(out);
        return st;
      }
    }
  }
  if (out->n_rows) qsort(out->rows, (size_t)out->n_rows, sizeof *out->rows, cmp_rows);
  out->coverage = out->run_ns > 0 ? (double)out->steps_ns / (double)out->run_ns : 0;
  return SMELT_OK;
}

void profile_summary_free(profile_summary *s) {
  free(s->rows);
  free(s->track_busy_ns);
  memset(s, 0, sizeof *s);
}

/* Opens a metadata event ("ph": "M") of thread tid, up to its args; the
 * caller writes the args and closes both objects. */
static void meta_event_begin(json_writer *w, const char *kind, long pid, int tid) {
  json_object_begin(w);
  json_kv_string(w, "name", kind);
  json_kv_string(w, "ph", "M");
  json_kv_int(w, "pid", pid);
  json_kv_int(w, "tid", tid);
  json_key(w, "args");
  json_object_begin(w);
}

static void thread_name_event(json_writer *w, long pid, int tid, const char *name, int sort) {
  meta_event_begin(w, "thread_name", pid, tid);
  json_kv_string(w, "name", name);
  json_object_end(w);
  json_object_end(w);
  meta_event_begin(w, "thread_sort_index", pid, tid);
  json_kv_int(w, "sort_index", sort);
  json_object_end(w);
  json_object_end(w);
}

static void complete_event(json_writer *w, long pid, const profile_event *e) {
  static const char *const cats[] = {"run", "step", "chunk"};
  json_object_begin(w);
  json_kv_string(w, "name", e->kind);
  json_kv_string(w, "cat", cats[e->type]);
  json_kv_string(w, "ph", "X");
  json_kv_number(w, "ts", (double)e->t0_ns / 1e3);
  json_kv_number(w, "dur", (double)(e->t1_ns - e->t0_ns) / 1e3);
  json_kv_int(w, "pid", pid);
  json_kv_int(w, "tid", e->track + 1); /* tid 0 confuses some viewers */
  json_key(w, "args");
  json_object_begin(w);
  json_kv_int(w, "run", e->run);
  if (e->type == PROFILE_STEP) {
    json_kv_string(w, "node", e->name);
    json_kv_int(w, "depth", e->depth);
  } else if (e->type == PROFILE_CHUNK) {
    json_kv_int(w, "begin", e->begin);
    json_kv_int(w, "end", e->end);
  }
  json_object_end(w);
  json_object_end(w);
}

void profiler_write_chrome(const profiler *p, json_writer *w, const char *process_label) {
  long pid = (long)getpid();
  size_t n;
  const profile_event *ev = profiler_events(p, &n);
  json_object_begin(w);
  json_key(w, "traceEvents");
  json_array_begin(w);
  json_object_begin(w);
  json_kv_string(w, "name", "process_name");
  json_kv_string(w, "ph", "M");
  json_kv_int(w, "pid", pid);
  json_kv_int(w, "tid", 0);
  json_key(w, "args");
  json_object_begin(w);
  json_kv_string(w, "name", process_label);
  json_object_end(w);
  json_object_end(w);
  for (int t = 0; t < profiler_tracks(p); t++) {
    char name[64];
    if (t == 0) snprintf(name, sizeof name, "graph thread");
    else snprintf(name, sizeof name, "pool worker %d", t);
    thread_name_event(w, pid, t + 1, name, t);
  }
  for (size_t i = 0; i < n; i++)
    if (ev[i].t1_ns >= 0) complete_event(w, pid, &ev[i]);
  json_array_end(w);
  json_kv_string(w, "displayTimeUnit", "ms");
}
