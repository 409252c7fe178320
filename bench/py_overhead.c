/* Python overhead, C side: times smelt_session_run on a model with inputs from
 * .pb/.npy files; prints min and median of N runs in us.  Pair with
 * bench/py_overhead.py (same arguments) to see what smelt.Session.run adds.
 *   cc -O2 -Iinclude bench/py_overhead.c build/libsmelt.a -lm -lpthread -ldl -o /tmp/crun
 *   /tmp/crun MODEL THREADS MODE N INPUT... */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "smelt.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  smelt_model*m; smelt_session*s; smelt_session_options o=smelt_session_options_default(); o.threads=atoi(argv[2]);
  smelt_mode_parse(argv[3],&o.mode);
  if(smelt_model_load(argv[1],&m)||smelt_session_create(m,&o,&s)){fprintf(stderr,"%s\n",smelt_last_error());return 1;}
  int n=argc-5, N=atoi(argv[4]); smelt_tensor in[8];
  for(int i=0;i<n;i++) if(smelt_tensor_load(argv[5+i],&in[i])){fprintf(stderr,"%s\n",smelt_last_error());return 1;}
  int no=smelt_model_num_outputs(m); double*t=malloc(N*sizeof*t);
  for(int k=0;k<N+20;k++){smelt_tensor out[8]={0}; double a=now(); if(smelt_session_run(s,in,n,out,no)){fprintf(stderr,"%s\n",smelt_last_error());return 1;} double b=now(); for(int j=0;j<no;j++) smelt_tensor_release(&out[j]); if(k>=20)t[k-20]=b-a;}
  qsort(t,N,sizeof*t,cmp); printf("C: min %.1f us median %.1f us\n",t[0],t[N/2]); return 0;}
