/* kv_persist.h — colibri's KV persistence through colikv (drop-in for c/kv_persist.h).
 * The same functions, globals and [KV] messages as the .coli_kv version; each slot is
 * a conversation "<weights-id>/slot<N>" of one colikv store instead of a file.
 * Environment: COLIKV_STORE (a file or a postgresql:// URI; default <model folder>/colikv.db), COLIKV_SYNC=full|normal
 * (default full), COLIKV_MAX_BYTES (byte budget, LRU eviction; default unlimited),
 * COLIKV_WEIGHTS_ID (default: colikv_weights_id_from_dir of the model folder),
 * COLIKV_TENANT (the tenant whose conversations this engine sees, stores and adopts, created
 * if missing; default: the default tenant ""; engines of two tenants share no chunk and
 * never adopt each other's conversations), COLIKV_METRICS_FILE (a path ending in .prom: this
 * process's colikv counters, in Prometheus's text format, written there every KV_METRICS_PERIOD_S
 * seconds while the engine saves or loads, and at exit, by a rename, for node_exporter's textfile
 * collector; default: none).
 * A store error never stops the engine: it logs [KV] and runs without persistence.
 * A truncate that discards more than KV_KEEP_MIN tokens, or a start-over, first keeps
 * the conversation as the fork "<weights-id>/slot<N>/<n>", which kv_disk_adopt (called
 * by store-adopt.patch) can load back when that conversation returns on any slot.
 * Include after Model/KVState/Cfg are defined; requires now_s() and g_draft. */
#ifndef KV_PERSIST_H
#define KV_PERSIST_H

#include <colikv/colikv.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int g_kvsave=1;

#define KV_METRICS_PERIOD_S 5.0
static double g_colikv_metrics_at=-1;   /* monotonic seconds of the last metrics write */

/* Writes this process's counters to COLIKV_METRICS_FILE when the period has passed (always
 * with force): a temporary file beside it, then renamed over it, so that a scrape never reads
 * half a file. Best effort: a failure is logged and the engine goes on. */
static void kv_colikv_metrics(int force){
    const char *path=getenv("COLIKV_METRICS_FILE");
    if(!path || !*path) return;
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC,&ts);
    double now=(double)ts.tv_sec+ts.tv_nsec*1e-9;
    if(!force && g_colikv_metrics_at>=0 && now-g_colikv_metrics_at<KV_METRICS_PERIOD_S) return;
    g_colikv_metrics_at=now;
    char *buf=NULL; int64_t need=colikv_metrics_text(NULL,NULL,0), got=need;
    while(got>0){   /* counters move between the calls: until the text fits */
        char *b=(char*)realloc(buf,(size_t)need+4096); if(!b){ got=-1; break; }
        buf=b; need+=4096; got=colikv_metrics_text(NULL,buf,(size_t)need);
        if(got<=need) break;
        need=got; }
    if(got<0){ fprintf(stderr,"[KV] colikv: metrics not written: %s\n",colikv_strerror((int)got)); free(buf); return; }
    char tmp[4200]; snprintf(tmp,sizeof(tmp),"%s.%ld.tmp",path,(long)getpid());
    FILE *f=fopen(tmp,"w");
    int ok=f && fwrite(buf,1,(size_t)got-1,f)==(size_t)got-1;
    if(f && fclose(f)!=0) ok=0;
    if(!ok || rename(tmp,path)!=0){
        fprintf(stderr,"[KV] colikv: metrics not written to %s\n",path); remove(tmp); }
    free(buf);
}

static colikv_store *g_colikv;      /* opened on first use, closed at exit */
static int g_colikv_off;            /* the store could not be opened: no persistence */
static char g_colikv_wid[256];      /* the model's weights identity */

/* At exit: the turns still queued are committed first; a failed one is logged. */
static void kv_colikv_close(void){
    if(g_colikv && colikv_wait(g_colikv,NULL)!=COLIKV_OK)
        fprintf(stderr,"[KV] colikv: not saved: %s\n",colikv_errmsg(g_colikv));
    colikv_close(g_colikv); g_colikv=NULL;
    kv_colikv_metrics(1); }   /* the process's totals keep the closed store's counts */

/* The store, opened on first use beside the slot files; NULL (logged once) if it cannot be. */
static colikv_store *kv_colikv(KVState *k){
    if(g_colikv || g_colikv_off) return g_colikv;
    char dir[2048]; snprintf(dir,sizeof(dir),"%s",k->disk_path);
    char *slash=strrchr(dir,'/'); if(slash) *slash=0; else snprintf(dir,sizeof(dir),".");
    const char *wid=getenv("COLIKV_WEIGHTS_ID");
    if(wid && *wid) snprintf(g_colikv_wid,sizeof(g_colikv_wid),"%s",wid);
    else if(colikv_weights_id_from_dir(dir,g_colikv_wid,sizeof(g_colikv_wid))!=COLIKV_OK){
        fprintf(stderr,"[KV] colikv: no weights identity (%s): running without persistence\n",g_colikv_wid);
        g_colikv_off=1; return NULL; }
    char path[2100]; const char *sp=getenv("COLIKV_STORE");
    if(sp && *sp) snprintf(path,sizeof(path),"%s",sp); else snprintf(path,sizeof(path),"%s/colikv.db",dir);
    colikv_options o={COLIKV_CREATE|COLIKV_PREFAULT_STAGING,0,0,0,NULL};
    const char *tenant=getenv("COLIKV_TENANT");
    if(tenant && *tenant){ o.flags|=COLIKV_TENANT; o.tenant=tenant; }
    const char *sync=getenv("COLIKV_SYNC");
    if(sync && !strcmp(sync,"normal")) o.flags|=COLIKV_SYNC_NORMAL;
    else if(sync && strcmp(sync,"full")) fprintf(stderr,"[KV] colikv: COLIKV_SYNC=%s is not full or normal: using full\n",sync);
    const char *mb=getenv("COLIKV_MAX_BYTES");
    if(mb && *mb){ char *end; long long v=strtoll(mb,&end,10);
        if(*end || v<0) fprintf(stderr,"[KV] colikv: COLIKV_MAX_BYTES=%s is not a byte count: no budget\n",mb);
        else o.max_store_bytes=v; }
    colikv_store *s=NULL;
    if(colikv_open_ex(path,&o,&s)!=COLIKV_OK){
        /* The message names the store (a postgresql:// URI without its password). */
        fprintf(stderr,"[KV] colikv: cannot open the store: %s: running without persistence\n",colikv_errmsg(s));
        colikv_close(s); g_colikv_off=1; return NULL; }
    g_colikv=s; atexit(kv_colikv_close);
    return s;
}

/* The slot number of disk_path: ".coli_kv" is 0, ".coli_kv.N" is N. */
static int kv_colikv_slot(KVState *k){
    const char *dot=strstr(k->disk_path,"/.coli_kv");
    return dot && dot[9]=='.' ? atoi(dot+10) : 0;
}

/* The slot's conversation id. */
static void kv_colikv_id(KVState *k, char *id, size_t cap){
    snprintf(id,cap,"%s/slot%d",g_colikv_wid,kv_colikv_slot(k));
}

/* The six .coli_kv header fields of the model, and its weights identity. */
static colikv_model kv_colikv_model(Model *m){
    Cfg *c=&m->c; int nic=0;
    if(m->has_dsa) for(int i=0;i<c->n_layers;i++) if(m->Ic && m->Ic[i]) nic++;
    colikv_model cm={c->n_layers,c->kv_lora,c->qk_rope,m->has_dsa?c->index_hd:0,nic,c->vocab,g_colikv_wid};
    return cm;
}

static int kv_disk_open(Model *m){ return kv_colikv(m->kv)!=NULL; }

#define KV_KEEP_MIN 8   /* a truncate discarding more tokens than this keeps them as a fork */

static int kv_colikv_exists(colikv_store *s, const char *id){
    colikv_info in; return colikv_conversation_info(s,id,&in)==COLIKV_OK;
}

/* Keeps the whole of conversation id as "<id>/<n>" before it is cut (1; 0 logged): a fork shares every
 * chunk, so it costs a row; the byte budget (COLIKV_MAX_BYTES) bounds what they hold.
 * n is the first free number after those taken (found by doubling, then bisecting, once
 * per slot and process); another process taking it meanwhile moves on to the next. */
static int kv_colikv_keep(colikv_store *s, KVState *k, const char *id, int64_t have){
    static int64_t next[512];
    int slot=kv_colikv_slot(k)&511;
    char dst[340];
    if(next[slot]<1){
        int64_t lo=0, hi=1;
        for(;;){ snprintf(dst,sizeof(dst),"%s/%lld",id,(long long)hi);
            if(!kv_colikv_exists(s,dst)) break; lo=hi; hi*=2; }
        while(hi-lo>1){ int64_t mid=lo+(hi-lo)/2; snprintf(dst,sizeof(dst),"%s/%lld",id,(long long)mid);
            if(kv_colikv_exists(s,dst)) lo=mid; else hi=mid; }
        next[slot]=hi;
    }
    for(int tries=0;tries<16;tries++){
        snprintf(dst,sizeof(dst),"%s/%lld",id,(long long)next[slot]++);
        int rc=colikv_fork(s,id,dst,-1);
        if(rc==COLIKV_OK){ fprintf(stderr,"[KV] colikv: kept %lld tokens of %s as %s\n",(long long)have,id,dst); return 1; }
        if(rc!=COLIKV_ERR_CONFLICT) break;
    }
    fprintf(stderr,"[KV] colikv: not kept: %s\n",colikv_errmsg(s));
    return 0;
}

/* disk_nrec is what the slot knows the store holds of its history. After any failure it is
 * set to 0, "unknown": the next save then reads the store again (colikv_append_async checks
 * every stored token against the history) instead of trusting a count the failed call left. */
static void kv_disk_truncate(Model *m, int nrec){
    if(!g_kvsave) return;
    KVState *k=m->kv; colikv_store *s=kv_colikv(k);
    if(!s){ k->disk_nrec=0; return; }
    char id[300]; kv_colikv_id(k,id,sizeof(id));
    if(colikv_wait(s,id)!=COLIKV_OK) fprintf(stderr,"[KV] colikv: not saved: %s\n",colikv_errmsg(s));
    int64_t have=colikv_count(s,id);
    if(have<0){ fprintf(stderr,"[KV] colikv: not truncated: %s\n",colikv_errmsg(s)); k->disk_nrec=0; return; }
    if(have-nrec>KV_KEEP_MIN) kv_colikv_keep(s,k,id,have);
    if(nrec<have && colikv_truncate(s,id,nrec)!=COLIKV_OK){
        fprintf(stderr,"[KV] colikv: not truncated: %s\n",colikv_errmsg(s)); k->disk_nrec=0; return; }
    k->disk_nrec = nrec<have ? nrec : (int)have;
}

static void kv_disk_reset(Model *m){ kv_disk_truncate(m,0); }

/* The store holds other tokens than hist[0, len) (a diverged or longer tail): rewrites the slot in
 * one transaction by colikv_write. Stored tokens the slot did not load (a load or truncate that
 * failed, another process writing the slot) are never replaced unkept: they are first kept as a
 * fork, as a start-over keeps them, and when that fails nothing is written. */
static int kv_colikv_rewrite(colikv_store *s, KVState *k, const char *id, const colikv_model *cm,
                             const int *hist, int len, const float *const *ic, float **Lc, float **Rc){
    int64_t have=colikv_count(s,id);
    if(have<0) return (int)have;
    int64_t from=k->disk_nrec<have?k->disk_nrec:have; int kept=0;
    if(have>from){
        if(!kv_colikv_keep(s,k,id,have)){
            fprintf(stderr,"[KV] colikv: not replacing %lld stored tokens of %s this slot did not load\n",
                (long long)(have-from),id);
            return COLIKV_ERR_CONFLICT; }
        kept=1; }
    int rc=colikv_write(s,id,cm,(const int32_t*)hist,from,len,(const float *const*)Lc,(const float *const*)Rc,ic);
    if(rc==COLIKV_ERR_DIVERGED && from>0){   /* [0, from) changed too: those were not loaded either */
        if(!kept && !kv_colikv_keep(s,k,id,have)){
            fprintf(stderr,"[KV] colikv: not replacing the %lld stored tokens of %s, changed since this slot loaded them\n",
                (long long)have,id);
            return COLIKV_ERR_CONFLICT; }
        rc=colikv_write(s,id,cm,(const int32_t*)hist,0,len,(const float *const*)Lc,(const float *const*)Rc,ic); }
    return rc;
}

/* Hands [disk_nrec, len) to the store's background writer and returns once it is copied; a
 * stored tail that differs is rewritten by kv_colikv_rewrite. */
static void kv_disk_append(Model *m, const int *hist, int len){
    KVState *k=m->kv;
    if(!g_kvsave || len<=k->disk_nrec) return;
    colikv_store *s=kv_colikv(k); if(!s) return;
    char id[300]; kv_colikv_id(k,id,sizeof(id));
    colikv_model cm=kv_colikv_model(m);
    const float *const *ic=m->has_dsa?(const float *const*)m->Ic:NULL;
    int rc=colikv_append_async(s,id,&cm,(const int32_t*)hist,len,(const float *const*)m->Lc,
                               (const float *const*)m->Rc,ic);
    if(rc==COLIKV_ERR_DIVERGED || rc==COLIKV_ERR_INVALID)
        rc=kv_colikv_rewrite(s,k,id,&cm,hist,len,ic,m->Lc,m->Rc);
    if(rc!=COLIKV_OK){
        fprintf(stderr,"[KV] colikv: not saved: %s\n",colikv_errmsg(s));
        /* An earlier queued turn may have failed: the store keeps the last good one. */
        if(colikv_wait(s,id)!=COLIKV_OK) fprintf(stderr,"[KV] colikv: not saved: %s\n",colikv_errmsg(s));
        k->disk_nrec=0;   /* unknown: the next save reads the store again */
        kv_colikv_metrics(0);
        return; }
    k->disk_nrec=len;
    kv_colikv_metrics(0);
}

static int kv_disk_load(Model *m, int *hist, int maxctx){
    if(!g_kvsave) return 0;
    KVState *k=m->kv; Cfg *c=&m->c;
    colikv_store *s=kv_colikv(k); if(!s) return 0;
    char id[300]; kv_colikv_id(k,id,sizeof(id));
    colikv_model cm=kv_colikv_model(m);
    colikv_info in;
    int rc=colikv_conversation_info(s,id,&in);
    k->disk_nrec=0;   /* nothing loaded yet: a failed load leaves the stored tokens to kv_colikv_rewrite */
    if(rc==COLIKV_ERR_NOT_FOUND) return 0;
    if(rc!=COLIKV_OK){ fprintf(stderr,"[KV] colikv: not resumed: %s\n",colikv_errmsg(s)); return 0; }
    int nrec=(int)in.tokens;
    if(nrec<1) return 0;
    if(nrec>=maxctx-8-g_draft){
        fprintf(stderr,"[KV] saved conversation (%d tokens) exceeds the context: starting over\n",nrec);
        kv_disk_truncate(m,0);   /* kept as a fork, then the slot starts from position 0 */
        return 0; }
    double t0=now_s();
    int64_t n=colikv_load(s,id,&cm,(int32_t*)hist,maxctx,m->Lc,m->Rc,m->has_dsa?m->Ic:NULL);
    if(n<0){ fprintf(stderr,"[KV] colikv: ignoring %s: %s\n",id,colikv_errmsg(s)); return 0; }
    nrec=(int)n;
    if(nrec>0){
        if(m->has_mtp) m->kv_start[c->n_layers]=-1;
        fprintf(stderr,"[KV] resumed conversation from disk: %d tokens in %.1fs (no re-prefill)\n",
            nrec, now_s()-t0);
    }
    k->disk_nrec=nrec;
    kv_colikv_metrics(0);
    return nrec;
}

/* Prefix adoption from the store (store-adopt.patch calls it in mux_submit): the slot holds
 * prompt[0, len); when a stored conversation of this model holds a longer prefix of
 * prompt[0, nt), its rows [len, that prefix) are loaded into the slot and their tokens into
 * hist, so their prefill is skipped. Returns the tokens the slot now holds (len when
 * nothing was adopted). The next kv_disk_append saves them to the slot's own conversation;
 * chunks equal to stored ones are shared, not stored again. */
static int kv_disk_adopt(Model *m, int *hist, int len, const int *prompt, int nt){
    if(!g_kvsave || nt<=len) return len;
    KVState *k=m->kv; colikv_store *s=kv_colikv(k); if(!s) return len;
    colikv_model cm=kv_colikv_model(m);
    char from[340];
    double t0=now_s();
    /* The longest prefix that can be loaded (a longer match may have been evicted), matched and
     * loaded in one read snapshot: another process rewriting it cannot slip another history in. */
    int64_t got=colikv_adopt(s,&cm,(const int32_t*)prompt,nt,len,from,sizeof(from),(int32_t*)hist,
                             m->Lc,m->Rc,m->has_dsa?m->Ic:NULL);
    if(got<0){ fprintf(stderr,"[KV] colikv: no adoption: %s\n",colikv_errmsg(s)); return len; }
    if(got<=len) return len;
    for(int i=len;i<got;i++) if(hist[i]!=prompt[i]){   /* colikv_adopt compared them: never trusted unchecked */
        fprintf(stderr,"[KV] colikv: no adoption from %s: token %d is %d, the prompt's is %d\n",from,i,hist[i],prompt[i]);
        return len; }
    if(m->has_mtp) m->kv_start[m->c.n_layers]=-1;   /* MTP rows are per-slot decode state */
    fprintf(stderr,"[KV] adopted %d tokens [%d,%d) from %s in %.3fs (prefill skipped)\n",
        (int)got-len,len,(int)got,from,now_s()-t0);
    return (int)got;
}

#endif /* KV_PERSIST_H */
