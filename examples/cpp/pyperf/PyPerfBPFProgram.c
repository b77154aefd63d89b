/* PyPerf's BPF program (compiled at run time by libbcc, headerless). */
int on_sample(struct bpf_perf_event_data *ctx) { return 0; }
