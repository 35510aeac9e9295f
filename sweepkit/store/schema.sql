-- sweepkit warehouse schema: the single source of the warehouse's tables and of the columns of its views.
--
-- Package data of sweepkit.store (declared in pyproject.toml), so an installed sweepkit needs no checkout.
-- Applied (idempotent) by every commit of a run; docs/warehouse.md explains the layout.
--
-- Tables in the DuckDB file: runs, run_files, warehouse_meta.
-- Views over Parquet (<root>/parquet/<table>/run_id=<id>/part-*.parquet): decode, serving, capacity,
-- trace_steps, ... one per table a run writes. A view lists only the files of committed runs.
--
-- Column contracts. A table named contract_<view> declares the view's columns, types and comments: while
-- no run has written <view> the view is this empty table, afterwards its comments are copied onto the
-- view, and a run whose batches lack a declared column (or carry an undeclared one) is refused.
-- To add a view: add its contract_<name> table and a comment on every column (unit, formula).

create table if not exists runs (
    run_id            varchar primary key,
    kind              varchar not null,
    grid_name         varchar not null,
    grid_toml         varchar not null,
    grid_sha256       varchar not null,
    sweepkit_version  varchar not null,
    started_at        timestamptz not null,
    ended_at          timestamptz not null,
    status            varchar not null,
    row_count         bigint not null,
    wall_s            double not null
);
comment on table runs is 'One row per committed run; a run''s Parquet rows are visible only once its row is here';
comment on column runs.run_id is 'Run id: UTC start time yyyymmddThhmmssfffZ plus 6 random hex digits (sorts by start)';
comment on column runs.kind is 'decode | serving | trace | validation | plan: which engine wrote the run';
comment on column runs.grid_name is 'The grid file''s name field';
comment on column runs.grid_toml is 'The grid file''s text, verbatim (re-run it with sweepkit run)';
comment on column runs.grid_sha256 is 'Hex SHA-256 of grid_toml (UTF-8); with sweepkit_version, the key for reusing a run';
comment on column runs.sweepkit_version is 'sweepkit.__version__ of the writer';
comment on column runs.started_at is 'When the run started (UTC)';
comment on column runs.ended_at is 'When the run committed (UTC)';
comment on column runs.status is 'committed (only committed runs get a row)';
comment on column runs.row_count is 'Rows written over all the run''s tables (decode: the product of the grid''s axis lengths)';
comment on column runs.wall_s is 's, wall-clock time from start to commit';

create table if not exists run_files (
    run_id      varchar not null,
    table_name  varchar not null,
    path        varchar not null,
    row_count   bigint not null,
    size_bytes  bigint not null,
    footer_sha256 varchar,
    content_sha256 varchar
);
alter table run_files add column if not exists footer_sha256 varchar;
alter table run_files add column if not exists content_sha256 varchar;
comment on table run_files is 'One row per Parquet file of a committed run; the views read exactly these files';
comment on column run_files.run_id is 'The run (runs.run_id)';
comment on column run_files.table_name is 'The view the file belongs to (decode, serving, ...)';
comment on column run_files.path is 'Path relative to the warehouse root: parquet/<table>/run_id=<id>/part-<writer>-<n>.parquet';
comment on column run_files.row_count is 'Rows in the file';
comment on column run_files.size_bytes is 'bytes, file size';
comment on column run_files.footer_sha256 is 'Hex SHA-256 of the file''s Parquet footer at commit (schema, row groups, statistics); readers compare it and size_bytes with the file (null: not recorded)';
comment on column run_files.content_sha256 is 'Hex SHA-256 of the whole file at commit; sweepkit verify compares it with every file, readers with the first 16 MiB of files (null: committed before content digests were recorded)';

create table if not exists warehouse_meta (
    key    varchar primary key,
    value  varchar not null
);
comment on table warehouse_meta is 'Key/value facts about the warehouse; root = the absolute folder the persisted views point into; feed_sha256 = the definition the feed views (v_*) were created from; schema_sha256 = the schema.sql text last applied';

-- decode: one row per grid point of a decode run (sweepkit.sweep.engine.iter_decode_chunks).
create table if not exists contract_decode (
    run_id                    varchar,
    device                    varchar,
    model                     varchar,
    draft                     varchar,
    tp                        integer,
    weight_format             varchar,
    kv_format                 varchar,
    compute_format            varchar,
    batch                     bigint,
    context                   bigint,
    gamma                     integer,
    alpha                     double,
    decay                     double,
    acceptance                varchar,
    tokens_per_pass           float,
    t_plain_pass_s            float,
    t_draft_s                 float,
    t_verify_pass_s           float,
    s_per_token_plain         float,
    s_per_token_spec          float,
    speedup                   float,
    plain_bound               varchar,
    verify_bound              varchar,
    energy_per_token_plain_j  float,
    energy_per_token_spec_j   float,
    draft_cost_ratio          float,
    kv_capacity_tokens        float,
    weight_bytes_per_device   float,
    fits_in_memory            boolean,
    tokens_per_pass_p10       float,
    tokens_per_pass_p50       float,
    tokens_per_pass_p90       float,
    s_per_token_spec_p10      float,
    s_per_token_spec_p50      float,
    s_per_token_spec_p90      float,
    speedup_p10               float,
    speedup_p50               float,
    speedup_p90               float,
    energy_per_token_spec_j_p10 float,
    energy_per_token_spec_j_p50 float,
    energy_per_token_spec_j_p90 float,
    share_spec_faster         float
);
-- A warehouse made before the acceptance columns gains them here (a no-op on a new one).
alter table contract_decode add column if not exists decay double;
alter table contract_decode add column if not exists acceptance varchar;
alter table contract_decode add column if not exists tokens_per_pass_p10 float;
alter table contract_decode add column if not exists tokens_per_pass_p50 float;
alter table contract_decode add column if not exists tokens_per_pass_p90 float;
alter table contract_decode add column if not exists s_per_token_spec_p10 float;
alter table contract_decode add column if not exists s_per_token_spec_p50 float;
alter table contract_decode add column if not exists s_per_token_spec_p90 float;
alter table contract_decode add column if not exists speedup_p10 float;
alter table contract_decode add column if not exists speedup_p50 float;
alter table contract_decode add column if not exists speedup_p90 float;
alter table contract_decode add column if not exists energy_per_token_spec_j_p10 float;
alter table contract_decode add column if not exists energy_per_token_spec_j_p50 float;
alter table contract_decode add column if not exists energy_per_token_spec_j_p90 float;
alter table contract_decode add column if not exists share_spec_faster float;
comment on column contract_decode.run_id is 'The run (runs.run_id), from the Hive partition folder run_id=<id>';
comment on column contract_decode.device is 'Accelerator, catalogue name (sweepkit devices)';
comment on column contract_decode.model is 'Target model, catalogue name (sweepkit models)';
comment on column contract_decode.draft is 'Draft: none, mtp (one extra target layer) or a catalogue model sharing the vocab';
comment on column contract_decode.tp is 'Tensor-parallel degree n (devices per instance)';
comment on column contract_decode.weight_format is 'Storage format of the weights (bf16, fp8, int8, int4, fp4)';
comment on column contract_decode.kv_format is 'Storage format of the KV cache';
comment on column contract_decode.compute_format is 'Compute format (sets the native FLOP/s multiple over bf16)';
comment on column contract_decode.batch is 'B, rows decoded together';
comment on column contract_decode.context is 'S, tokens cached per row (total context C = B S)';
comment on column contract_decode.gamma is 'gamma, draft tokens proposed per verify pass';
comment on column contract_decode.alpha is 'alpha_1, acceptance of the first drafted token, in [0, 1] (of every drafted token when acceptance = iid)';
comment on column contract_decode.decay is 'r, per-position acceptance alpha_i = alpha r^(i-1) (1 = iid); null for a named table';
comment on column contract_decode.acceptance is 'Acceptance model: iid, decaying, or a named per-position table (sweepkit/catalogue/acceptance.toml, with its source)';
comment on column contract_decode.tokens_per_pass is 'E, tokens per verify pass = 1 + sum_{k<=gamma} prod_{i<=k} alpha_i (iid: (1 - alpha^(gamma+1)) / (1 - alpha)); 1 without a draft';
comment on column contract_decode.t_plain_pass_s is 's, one plain decode pass of B rows (with the 0.5 ms pass overhead)';
comment on column contract_decode.t_draft_s is 's, the gamma sequential draft passes of one speculative step';
comment on column contract_decode.t_verify_pass_s is 's, one verify pass over gamma + 1 positions per row';
comment on column contract_decode.s_per_token_plain is 's per output token, plain = t_plain_pass_s / B';
comment on column contract_decode.s_per_token_spec is 's per output token, speculative = (t_verify_pass_s + t_draft_s) / (B E)';
comment on column contract_decode.speedup is 'x, s_per_token_plain / s_per_token_spec (below 1 speculation loses)';
comment on column contract_decode.plain_bound is 'What limits the plain pass: memory | compute | power';
comment on column contract_decode.verify_bound is 'What limits the verify pass: memory | compute | power';
comment on column contract_decode.energy_per_token_plain_j is 'J per output token, plain (dynamic + idle power over the pass)';
comment on column contract_decode.energy_per_token_spec_j is 'J per output token, speculative = (verify + draft energy) / (B E)';
comment on column contract_decode.draft_cost_ratio is 'c, one draft pass over one plain target pass (Leviathan Def. 3.7, measured on this hardware)';
comment on column contract_decode.kv_capacity_tokens is 'tokens, KV positions the instance holds = floor((HBM x tp x 0.9 - resident weight bytes) / KV bytes per token (target + draft)), >= 0';
comment on column contract_decode.weight_bytes_per_device is 'bytes, resident weights per device = (target + draft params) x weight bytes / tp';
comment on column contract_decode.fits_in_memory is 'B n_held(S + positions) <= kv_capacity_tokens and capacity > 0, positions = gamma + 1 with a draft, else 1; n_held(n) = n - kv_w / kv x max(n - (W + 1), 0) (windowed layers hold W + 1 positions; n without windows)';
comment on column contract_decode.tokens_per_pass_p10 is 'E, tokens per verify pass: p10 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.tokens_per_pass_p50 is 'E, tokens per verify pass: p50 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.tokens_per_pass_p90 is 'E, tokens per verify pass: p90 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.s_per_token_spec_p10 is 's per output token, speculative: p10 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.s_per_token_spec_p50 is 's per output token, speculative: p50 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.s_per_token_spec_p90 is 's per output token, speculative: p90 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.speedup_p10 is 'x, speed-up: p10 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.speedup_p50 is 'x, speed-up: p50 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.speedup_p90 is 'x, speed-up: p90 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.energy_per_token_spec_j_p10 is 'J per output token, speculative: p10 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.energy_per_token_spec_j_p50 is 'J per output token, speculative: p50 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.energy_per_token_spec_j_p90 is 'J per output token, speculative: p90 over the [bands] draws of the point (null without bands)';
comment on column contract_decode.share_spec_faster is 'Share of the [bands] draws in which speculative decoding is faster than plain (speed-up > 1), 0..1; null without bands';

-- >>> trace_steps (written by sweepkit/store/trace_steps.py) >>>
-- trace_steps: one row per pass x request of a mechanism trace (sweepkit trace), plain and speculative.
create table if not exists contract_trace_steps (
    run_id           varchar,
    mode             varchar,
    device           varchar,
    model            varchar,
    draft            varchar,
    gamma            integer,
    alpha            double,
    seed             bigint,
    pass_index       integer,
    pass_kind        varchar,
    request          integer,
    prompt_tokens    integer,
    output_tokens    integer,
    arrival_s        double,
    batch            integer,
    context_tokens   bigint,
    drafted_tokens   integer,
    accepted_tokens  integer,
    rejected_tokens  integer,
    emitted_tokens   integer,
    target_token     varchar,
    tokens_done      integer,
    start_s          double,
    verify_start_s   double,
    end_s            double,
    bound            varchar,
    pass_energy_j    double
);
comment on column contract_trace_steps.run_id is 'The run (runs.run_id, kind trace)';
comment on column contract_trace_steps.mode is 'plain (no draft) | speculative: the same requests run twice';
comment on column contract_trace_steps.device is 'Accelerator, catalogue name';
comment on column contract_trace_steps.model is 'Target model, catalogue name';
comment on column contract_trace_steps.draft is 'Draft: none (plain mode), mtp or a draft model';
comment on column contract_trace_steps.gamma is 'gamma, drafted tokens per verify pass (0 in plain mode)';
comment on column contract_trace_steps.alpha is 'alpha, acceptance probability per drafted token (assumed, not measured)';
comment on column contract_trace_steps.seed is 'JAX PRNG seed of the acceptance draws';
comment on column contract_trace_steps.pass_index is 'Step number within the mode, from 0 (a prefill step or a decode/verify step)';
comment on column contract_trace_steps.pass_kind is 'prefill | decode (plain decode pass, or gamma draft passes + one verify pass)';
comment on column contract_trace_steps.request is 'Request number, from 0';
comment on column contract_trace_steps.prompt_tokens is 'tokens, the request''s prompt';
comment on column contract_trace_steps.output_tokens is 'tokens, the request''s output';
comment on column contract_trace_steps.arrival_s is 's, the request''s arrival time';
comment on column contract_trace_steps.batch is 'Rows in the step (prefill: requests admitted; decode: running rows)';
comment on column contract_trace_steps.context_tokens is 'tokens, cached context C priced (decode: prompt + decoded tokens over all rows; prefill: prompt tokens)';
comment on column contract_trace_steps.drafted_tokens is 'tokens the draft proposed for this row (gamma, 0 in plain mode and prefill)';
comment on column contract_trace_steps.accepted_tokens is 'k, drafted tokens accepted before the first rejection (as drawn, before the output cap)';
comment on column contract_trace_steps.rejected_tokens is 'drafted_tokens - accepted_tokens (discarded work)';
comment on column contract_trace_steps.emitted_tokens is 'tokens the row emitted = min(k + 1, remaining output) (prefill: the first token)';
comment on column contract_trace_steps.target_token is 'The target''s own token: first (prefill) | plain | correction (after a rejection) | bonus (all gamma accepted) | none (output cap reached)';
comment on column contract_trace_steps.tokens_done is 'tokens of output the request has after this step';
comment on column contract_trace_steps.start_s is 's, step start (draft passes start here)';
comment on column contract_trace_steps.verify_start_s is 's, draft passes end and the target pass starts (= start_s without a draft)';
comment on column contract_trace_steps.end_s is 's, step end = when the row''s tokens arrive';
comment on column contract_trace_steps.bound is 'What limits the target pass: memory | compute | power';
comment on column contract_trace_steps.pass_energy_j is 'J, energy of the whole step (all rows: target + draft passes, idle power included)';
-- <<< trace_steps <<<

-- >>> serving, capacity (written by sweepkit/serving/run.py) >>>
-- Definitions (docs/serving.md): TTFT = first token - arrival; TPOT = (finish - first token) / (output - 1);
-- ITL = gap before each token after the first (tokens of one verify pass after the first: 0). Latency
-- percentiles are over the steady set: completed requests sorted by arrival, first 10% dropped. Measured window:
-- requests sorted by arrival, first 10% dropped, arrivals after the last session start dropped. Attainment =
-- share of the window meeting TTFT <= SLO and (output < 2 or TPOT <= SLO). Capacity = the highest load with
-- attainment >= 0.9, to within the grid tolerance (default 5%).
create table if not exists contract_serving (
    run_id                 varchar,
    device                 varchar,
    lever                  varchar,
    workload               varchar,
    draft                  varchar,
    gamma                  integer,
    alpha                  double,
    load_per_s             double,
    load_unit              varchar,
    purpose                varchar,
    slo_attainment         double,
    requests               bigint,
    window_requests        bigint,
    completed              bigint,
    goodput_req_s          double,
    goodput_req_s_per_gpu  double,
    output_tok_s           double,
    output_tok_s_per_gpu   double,
    usd_per_mtok           double,
    energy_j               double,
    energy_per_token_j     double,
    horizon_s              double,
    ttft_p50_s             double,
    ttft_p90_s             double,
    ttft_p99_s             double,
    tpot_p50_s             double,
    tpot_p90_s             double,
    tpot_p99_s             double,
    itl_p50_s              double,
    itl_p90_s              double,
    itl_p99_s              double,
    steps                  double,
    mean_running_batch     double,
    tokens_per_pass        double,
    kv_mean_fraction       double,
    kv_peak_fraction       double,
    preemptions            double,
    recompute_tokens       double,
    swap_out_bytes         double,
    swap_in_bytes          double,
    prefix_hit_rate        double,
    kv_transfer_wait_s     double,
    kv_transfer_s          double,
    rejected               bigint,
    busy_fraction          double,
    stopped_early          boolean
);
comment on table contract_serving is 'One row per device x lever x workload x simulated load of a serving run';
comment on column contract_serving.run_id is 'The run (runs.run_id, kind serving)';
comment on column contract_serving.device is 'Accelerator, catalogue name';
comment on column contract_serving.lever is 'Lever name (levers.toml); baseline = no change';
comment on column contract_serving.workload is 'Workload name (workloads.toml)';
comment on column contract_serving.draft is 'Draft of the lever: none, mtp or a catalogue model';
comment on column contract_serving.gamma is 'gamma, drafted tokens per verify pass (0 without a draft)';
comment on column contract_serving.alpha is 'alpha, assumed acceptance per drafted token (0 without a draft)';
comment on column contract_serving.load_per_s is '1/s, offered load: sessions/s (multi-turn) or requests/s (single-turn); offline 1e6 = all at once';
comment on column contract_serving.load_unit is 'sessions/s | requests/s';
comment on column contract_serving.purpose is 'search (capacity-search candidate) | reference (the workload reference load) | saturated (offline run)';
comment on column contract_serving.slo_attainment is 'share of the measured window meeting TTFT <= ttft_slo and (output < 2 or TPOT <= tpot_slo), 0..1';
comment on column contract_serving.requests is 'requests that arrived in the run';
comment on column contract_serving.window_requests is 'requests in the measured window';
comment on column contract_serving.completed is 'requests finished (early-stopped loads finish fewer)';
comment on column contract_serving.goodput_req_s is 'req/s, (window requests - 1) / arrival span of the window; offline: completed / horizon';
comment on column contract_serving.goodput_req_s_per_gpu is 'req/s per GPU = goodput_req_s / GPUs';
comment on column contract_serving.output_tok_s is 'tokens/s, output tokens of window[:-1] / arrival span; offline: output tokens / horizon';
comment on column contract_serving.output_tok_s_per_gpu is 'tokens/s per GPU = output_tok_s / GPUs';
comment on column contract_serving.usd_per_mtok is 'USD per million output tokens = price_usd_per_gpu_hour x GPUs / 3600 / output_tok_s x 1e6 (illustrative prices)';
comment on column contract_serving.energy_j is 'J, idle_w x GPUs x horizon + dynamic energy of every pass (compute, HBM, TP all-reduce)';
comment on column contract_serving.energy_per_token_j is 'J per output token = energy_j / output tokens of all completed requests';
comment on column contract_serving.horizon_s is 's, time the last request finished';
comment on column contract_serving.ttft_p50_s is 's, median TTFT over the steady set (completed requests but the first 10% to arrive; TTFT = first token - arrival)';
comment on column contract_serving.ttft_p90_s is 's, 90th percentile TTFT over the steady set';
comment on column contract_serving.ttft_p99_s is 's, 99th percentile TTFT over the steady set';
comment on column contract_serving.tpot_p50_s is 's, median TPOT over steady-set requests with >= 2 tokens (TPOT = (finish - first token) / (output - 1))';
comment on column contract_serving.tpot_p90_s is 's, 90th percentile TPOT';
comment on column contract_serving.tpot_p99_s is 's, 99th percentile TPOT';
comment on column contract_serving.itl_p50_s is 's, median ITL over every token after the first of steady-set requests (extra tokens of a verify pass: 0); log histogram, +-0.5%';
comment on column contract_serving.itl_p90_s is 's, 90th percentile ITL';
comment on column contract_serving.itl_p99_s is 's, 99th percentile ITL';
comment on column contract_serving.steps is 'steps (prefill, decode or mixed; a decode step = gamma draft passes + one verify pass), all instances';
comment on column contract_serving.mean_running_batch is 'rows, time-average of running rows (prefilling or decoding) over busy time, per instance';
comment on column contract_serving.tokens_per_pass is 'tokens per decode row-pass = output tokens after the first / decode row-passes (1 without a draft)';
comment on column contract_serving.kv_mean_fraction is 'share of KV memory in use (private + prefix cache), time-average over busy time, 0..1';
comment on column contract_serving.kv_peak_fraction is 'share of KV memory in use at the fullest step boundary of any instance, 0..1';
comment on column contract_serving.preemptions is 'rows preempted (paged KV could not grow): recomputed or swapped out';
comment on column contract_serving.recompute_tokens is 'tokens, prompt + generated tokens of preempted rows to compute again';
comment on column contract_serving.swap_out_bytes is 'bytes swapped out to host memory (paged-swap)';
comment on column contract_serving.swap_in_bytes is 'bytes swapped back in (equals swap_out_bytes once every request finished)';
comment on column contract_serving.prefix_hit_rate is 'share of prompt tokens at first admission served from the prefix cache, 0..1';
comment on column contract_serving.kv_transfer_wait_s is 's, mean wait for the prefill -> decode KV link after the first token (disaggregated; 0 colocated)';
comment on column contract_serving.kv_transfer_s is 's, mean first token -> KV landed on the decode pool (link wait + 10 us + bytes / 50 GB/s; disaggregated; 0 colocated)';
comment on column contract_serving.rejected is 'requests that could never fit an empty instance (misses), with their later turns';
comment on column contract_serving.busy_fraction is 'share of instance-time spent in passes';
comment on column contract_serving.stopped_early is 'true: the run stopped once its misses made attainment < 0.9 certain (capacity-search candidates)';

create table if not exists contract_capacity (
    run_id                  varchar,
    device                  varchar,
    lever                   varchar,
    workload                varchar,
    draft                   varchar,
    gamma                   integer,
    alpha                   double,
    saturated               boolean,
    load_unit               varchar,
    capacity_per_s          double,
    reference_load_per_s    double,
    goodput_req_s           double,
    goodput_per_gpu_per_s   double,
    tokens_per_gpu_per_s    double,
    cost_per_mtok_usd       double,
    energy_per_token_j      double,
    attainment_at_capacity  double,
    tokens_per_pass         double,
    ttft_p50_s_at_ref       double,
    ttft_p90_s_at_ref       double,
    ttft_p99_s_at_ref       double,
    tpot_p50_s_at_ref       double,
    tpot_p90_s_at_ref       double,
    tpot_p99_s_at_ref       double,
    itl_p50_s_at_ref        double,
    itl_p90_s_at_ref        double,
    itl_p99_s_at_ref        double,
    attainment_at_ref       double
);
comment on table contract_capacity is 'One row per device x lever x workload of a serving run: capacity metrics at capacity, latencies at the reference load';
comment on column contract_capacity.run_id is 'The run (runs.run_id, kind serving)';
comment on column contract_capacity.device is 'Accelerator, catalogue name';
comment on column contract_capacity.lever is 'Lever name (levers.toml)';
comment on column contract_capacity.workload is 'Workload name (workloads.toml)';
comment on column contract_capacity.draft is 'Draft of the lever: none, mtp or a catalogue model';
comment on column contract_capacity.gamma is 'gamma, drafted tokens per verify pass';
comment on column contract_capacity.alpha is 'alpha, assumed acceptance per drafted token';
comment on column contract_capacity.saturated is 'true for offline workloads: one run with every request at t = 0; capacity metrics are its saturated throughput';
comment on column contract_capacity.load_unit is 'sessions/s | requests/s';
comment on column contract_capacity.capacity_per_s is '1/s, highest load with attainment >= 0.9, to within the grid tolerance (default 5%: doubling or halving from twice the reference load, then bisection); null when saturated';
comment on column contract_capacity.reference_load_per_s is '1/s, the workload reference load = 0.5 x the H100 baseline capacity (offline: 1e6), the same for every lever and device';
comment on column contract_capacity.goodput_req_s is 'req/s at capacity = (window requests - 1) / arrival span of the window; offline: completed / horizon when the saturated run meets the SLOs (attainment >= 0.9); 0 when no load meets the SLOs (capacity 0)';
comment on column contract_capacity.goodput_per_gpu_per_s is 'req/s per GPU at capacity = goodput_req_s / GPUs';
comment on column contract_capacity.tokens_per_gpu_per_s is 'output tokens/s per GPU at capacity (0 when capacity is 0)';
comment on column contract_capacity.cost_per_mtok_usd is 'USD per million output tokens at capacity = price x GPUs / 3600 / tokens/s x 1e6 (illustrative prices)';
comment on column contract_capacity.energy_per_token_j is 'J per output token at capacity = (idle_w x GPUs x horizon + dynamic pass energy) / output tokens of completed requests';
comment on column contract_capacity.attainment_at_capacity is 'SLO attainment of the run at capacity, >= 0.9';
comment on column contract_capacity.tokens_per_pass is 'tokens per decode pass per row at capacity (1 without a draft; E = (1 - alpha^(gamma+1)) / (1 - alpha) in expectation)';
comment on column contract_capacity.ttft_p50_s_at_ref is 's, median TTFT at the reference load';
comment on column contract_capacity.ttft_p90_s_at_ref is 's, 90th percentile TTFT at the reference load';
comment on column contract_capacity.ttft_p99_s_at_ref is 's, 99th percentile TTFT at the reference load';
comment on column contract_capacity.tpot_p50_s_at_ref is 's, median TPOT at the reference load';
comment on column contract_capacity.tpot_p90_s_at_ref is 's, 90th percentile TPOT at the reference load';
comment on column contract_capacity.tpot_p99_s_at_ref is 's, 99th percentile TPOT at the reference load';
comment on column contract_capacity.itl_p50_s_at_ref is 's, median ITL at the reference load';
comment on column contract_capacity.itl_p90_s_at_ref is 's, 90th percentile ITL at the reference load';
comment on column contract_capacity.itl_p99_s_at_ref is 's, 99th percentile ITL at the reference load';
comment on column contract_capacity.attainment_at_ref is 'SLO attainment at the reference load';
-- serving_draws: the draws of a serving grid's [serving.bands] (written by sweepkit/serving/draws.py).
-- Every column of capacity (same meaning, at the draw's capacity and the workload's reference load) plus
-- the draw: its number and the offset and factors it applied. No rows without bands.
create table if not exists contract_serving_draws (
    run_id                      varchar,
    device                      varchar,
    lever                       varchar,
    workload                    varchar,
    draft                       varchar,
    gamma                       integer,
    alpha                       double,
    saturated                   boolean,
    load_unit                   varchar,
    capacity_per_s              double,
    reference_load_per_s        double,
    goodput_req_s               double,
    goodput_per_gpu_per_s       double,
    tokens_per_gpu_per_s        double,
    cost_per_mtok_usd           double,
    energy_per_token_j          double,
    attainment_at_capacity      double,
    tokens_per_pass             double,
    ttft_p50_s_at_ref           double,
    ttft_p90_s_at_ref           double,
    ttft_p99_s_at_ref           double,
    tpot_p50_s_at_ref           double,
    tpot_p90_s_at_ref           double,
    tpot_p99_s_at_ref           double,
    itl_p50_s_at_ref            double,
    itl_p90_s_at_ref            double,
    itl_p99_s_at_ref            double,
    attainment_at_ref           double,
    draw                        integer,
    alpha_offset                double,
    price_factor                double,
    flops_efficiency_factor     double,
    bandwidth_efficiency_factor double,
    pass_overhead_s_factor      double,
    tdp_w_factor                double,
    idle_w_factor               double,
    energy_per_flop_j_factor    double,
    energy_per_hbm_byte_j_factor double,
    link_bytes_per_s_factor     double,
    link_latency_s_factor       double
);
comment on table contract_serving_draws is 'One row per device x lever x workload x draw of a serving run with [serving.bands]: the capacity table''s columns under the draw (docs/serving.md)';
comment on column contract_serving_draws.run_id is 'The run (runs.run_id, kind serving)';
comment on column contract_serving_draws.device is 'Accelerator, catalogue name';
comment on column contract_serving_draws.lever is 'Lever name (levers.toml)';
comment on column contract_serving_draws.workload is 'Workload name (workloads.toml)';
comment on column contract_serving_draws.draft is 'Draft of the lever: none, mtp or a catalogue model';
comment on column contract_serving_draws.gamma is 'gamma, drafted tokens per verify pass';
comment on column contract_serving_draws.alpha is 'alpha, assumed acceptance per drafted token';
comment on column contract_serving_draws.saturated is 'true for offline workloads: one run with every request at t = 0; capacity metrics are its saturated throughput';
comment on column contract_serving_draws.load_unit is 'sessions/s | requests/s';
comment on column contract_serving_draws.goodput_req_s is 'req/s at capacity = (window requests - 1) / arrival span of the window; offline: completed / horizon when the saturated run meets the SLOs (attainment >= 0.9); 0 when no load meets the SLOs (capacity 0)';
comment on column contract_serving_draws.goodput_per_gpu_per_s is 'req/s per GPU at capacity = goodput_req_s / GPUs';
comment on column contract_serving_draws.tokens_per_gpu_per_s is 'output tokens/s per GPU at capacity (0 when capacity is 0)';
comment on column contract_serving_draws.cost_per_mtok_usd is 'USD per million output tokens at capacity = price x GPUs / 3600 / tokens/s x 1e6 (illustrative prices)';
comment on column contract_serving_draws.energy_per_token_j is 'J per output token at capacity = (idle_w x GPUs x horizon + dynamic pass energy) / output tokens of completed requests';
comment on column contract_serving_draws.attainment_at_capacity is 'SLO attainment of the run at capacity, >= 0.9';
comment on column contract_serving_draws.tokens_per_pass is 'tokens per decode pass per row at capacity (1 without a draft; E = (1 - alpha^(gamma+1)) / (1 - alpha) in expectation)';
comment on column contract_serving_draws.ttft_p50_s_at_ref is 's, median TTFT at the reference load';
comment on column contract_serving_draws.ttft_p90_s_at_ref is 's, 90th percentile TTFT at the reference load';
comment on column contract_serving_draws.ttft_p99_s_at_ref is 's, 99th percentile TTFT at the reference load';
comment on column contract_serving_draws.tpot_p50_s_at_ref is 's, median TPOT at the reference load';
comment on column contract_serving_draws.tpot_p90_s_at_ref is 's, 90th percentile TPOT at the reference load';
comment on column contract_serving_draws.tpot_p99_s_at_ref is 's, 99th percentile TPOT at the reference load';
comment on column contract_serving_draws.itl_p50_s_at_ref is 's, median ITL at the reference load';
comment on column contract_serving_draws.itl_p90_s_at_ref is 's, 90th percentile ITL at the reference load';
comment on column contract_serving_draws.itl_p99_s_at_ref is 's, 99th percentile ITL at the reference load';
comment on column contract_serving_draws.attainment_at_ref is 'SLO attainment at the reference load';
comment on column contract_serving_draws.capacity_per_s is '1/s, the draw''s capacity: highest load with attainment >= 0.9, its search started from the point''s bracket; null when saturated';
comment on column contract_serving_draws.reference_load_per_s is '1/s, the point''s reference load (the draw does not move it)';
comment on column contract_serving_draws.draw is 'Draw number, 0..N-1 of the grid''s [serving.bands] (the same draw for every point: common random numbers)';
comment on column contract_serving_draws.alpha_offset is 'Added to every alpha_i of a speculative lever in this draw, clipped to [0, 1] (0 without an alpha band)';
comment on column contract_serving_draws.price_factor is 'Factor on the device''s price in this draw (1 without a price band); cost only';
comment on column contract_serving_draws.flops_efficiency_factor is 'Factor on the device''s flops_efficiency in this draw (1 when not banded)';
comment on column contract_serving_draws.bandwidth_efficiency_factor is 'Factor on the device''s bandwidth_efficiency in this draw (1 when not banded)';
comment on column contract_serving_draws.pass_overhead_s_factor is 'Factor on the cluster''s step overhead in this draw (1 when not banded)';
comment on column contract_serving_draws.tdp_w_factor is 'Factor on the device''s tdp_w in this draw (1 when not banded)';
comment on column contract_serving_draws.idle_w_factor is 'Factor on the device''s idle_w in this draw (1 when not banded)';
comment on column contract_serving_draws.energy_per_flop_j_factor is 'Factor on the device''s energy_per_flop_j in this draw (1 when not banded)';
comment on column contract_serving_draws.energy_per_hbm_byte_j_factor is 'Factor on the device''s energy_per_hbm_byte_j in this draw (1 when not banded)';
comment on column contract_serving_draws.link_bytes_per_s_factor is 'Factor on the device''s link_bytes_per_s in this draw (1 when not banded)';
comment on column contract_serving_draws.link_latency_s_factor is 'Factor on the device''s link_latency_s in this draw (1 when not banded)';
-- <<< serving, capacity <<<

-- >>> validation (written by sweepkit/validation/store.py) >>>
-- validation: one row per measured point of a `sweepkit validate` run, with the cost model's value beside it.
create table if not exists contract_validation (
    run_id               varchar,
    source               varchar,
    url                  varchar,
    framework            varchar,
    device               varchar,
    model                varchar,
    tp                   integer,
    gpus                 integer,
    weight_format        varchar,
    kv_format            varchar,
    compute_format       varchar,
    batch                bigint,
    context_tokens       bigint,
    input_tokens         bigint,
    output_tokens        bigint,
    concurrency          bigint,
    draft                varchar,
    gamma                integer,
    metric               varchar,
    unit                 varchar,
    split                varchar,
    file_row             integer,
    setup                varchar,
    measured             double,
    modelled             double,
    error_pct            double,
    status               varchar,
    measurements_file    varchar,
    measurements_sha256  varchar,
    devices_file         varchar,
    pp                   integer,
    ep                   integer,
    dp                   integer,
    request_rate         double,
    percentile           varchar,
    scenario             varchar,
    lever                varchar,
    pair_id              varchar,
    model_as_written     varchar,
    device_as_written    varchar,
    file                 varchar,
    model_class          varchar,
    priced_by            varchar,
    lever_family         varchar,
    pair_status          varchar
);
alter table contract_validation add column if not exists pp integer;
alter table contract_validation add column if not exists ep integer;
alter table contract_validation add column if not exists dp integer;
alter table contract_validation add column if not exists request_rate double;
alter table contract_validation add column if not exists percentile varchar;
alter table contract_validation add column if not exists scenario varchar;
alter table contract_validation add column if not exists lever varchar;
alter table contract_validation add column if not exists pair_id varchar;
alter table contract_validation add column if not exists model_as_written varchar;
alter table contract_validation add column if not exists device_as_written varchar;
alter table contract_validation add column if not exists file varchar;
alter table contract_validation add column if not exists model_class varchar;
alter table contract_validation add column if not exists priced_by varchar;
alter table contract_validation add column if not exists lever_family varchar;
alter table contract_validation add column if not exists pair_status varchar;
comment on table contract_validation is 'One row per measured point of a validation run: measured against the cost model (docs/validation.md)';
comment on column contract_validation.run_id is 'The run (runs.run_id, kind validation)';
comment on column contract_validation.source is 'Where the measurement was published (paper, repository, result page)';
comment on column contract_validation.url is 'Public address of the source';
comment on column contract_validation.framework is 'Serving framework that measured it (vLLM, TensorRT-LLM, ...)';
comment on column contract_validation.device is 'Accelerator, catalogue name (or a devices file''s name)';
comment on column contract_validation.model is 'Model, catalogue name (as written when the catalogue lacks it)';
comment on column contract_validation.tp is 'Tensor-parallel degree of one instance';
comment on column contract_validation.gpus is 'GPUs of the measured system (throughput per system)';
comment on column contract_validation.weight_format is 'Weight storage format';
comment on column contract_validation.kv_format is 'KV-cache storage format';
comment on column contract_validation.compute_format is 'Compute format';
comment on column contract_validation.batch is 'B, rows of the measured decode step (null for serving metrics)';
comment on column contract_validation.context_tokens is 'S, cached tokens per row of the measured step';
comment on column contract_validation.input_tokens is 'tokens, prompt length of the measured requests';
comment on column contract_validation.output_tokens is 'tokens, output length of the measured requests';
comment on column contract_validation.concurrency is 'requests in flight of a latency measurement';
comment on column contract_validation.draft is 'Speculative draft method (none without speculation)';
comment on column contract_validation.gamma is 'gamma, drafted tokens per verify pass';
comment on column contract_validation.metric is 'step_time | decode_tok_s | max_output_throughput | output_throughput | total_throughput | ttft | tpot | itl | e2e_latency | speedup';
comment on column contract_validation.unit is 'Unit of measured and modelled, as in the measurement file (s, ms, us, tok/s, tok/s/gpu)';
comment on column contract_validation.split is 'train (used by sweepkit calibrate) | test | check (an independent check, never fitted)';
comment on column contract_validation.file_row is 'Data row of the measurement file, from 1 (the header is not counted)';
comment on column contract_validation.setup is 'Short description of the measured setup';
comment on column contract_validation.measured is 'The measured value, in unit';
comment on column contract_validation.modelled is 'The cost model''s value at the measured point, in unit; null when not modelled';
comment on column contract_validation.error_pct is '%, 100 x (modelled / measured - 1); null when not modelled';
comment on column contract_validation.status is 'modelled, or not modelled: why (unknown model X, a published speed-up, needs input_tokens and output_tokens, ...)';
comment on column contract_validation.measurements_file is 'The measurement file (sweepkit:public.csv for the packaged set)';
comment on column contract_validation.measurements_sha256 is 'Hex SHA-256 of the measurement file''s text';
comment on column contract_validation.devices_file is 'Devices file the run priced with (empty for the catalogue)';
comment on column contract_validation.pp is 'Pipeline-parallel degree of the measured system (1: none)';
comment on column contract_validation.ep is 'Expert-parallel degree of the measured system (1: none)';
comment on column contract_validation.dp is 'Data-parallel degree of the measured system (1: none)';
comment on column contract_validation.request_rate is 'requests/s, Poisson arrival rate of the measurement (inf: every request at t = 0; null: none)';
comment on column contract_validation.percentile is 'Latency statistic of a ttft / tpot / itl / e2e_latency row: mean, 50, 90 or 99 (null for other metrics)';
comment on column contract_validation.scenario is 'The benchmark''s load, as the source words it';
comment on column contract_validation.lever is 'Lever of a measured pair, ending :with or :without (empty: none)';
comment on column contract_validation.pair_id is 'Pair id(s) the row belongs to, separated by ; (a shared baseline names several)';
comment on column contract_validation.model_as_written is 'Model as the measurement names it (a Hugging Face id); model is its catalogue name';
comment on column contract_validation.device_as_written is 'Device as the measurement names it; device is its catalogue name';
comment on column contract_validation.file is 'The packaged or given file the row comes from (file_row counts in it)';
comment on column contract_validation.model_class is 'dense | moe (the catalogue model has routed experts) | unknown (not in the catalogue)';
comment on column contract_validation.priced_by is 'How the row was priced: cost model | steady state: PROFILE | serving engine: PROFILE or reference; empty when not modelled';
comment on column contract_validation.lever_family is 'On a lever pair''s :with row: what the pair changes (framework, layout, kv format, weight format, scheduler, async scheduling, speculative, prefix caching; joined by +)';
comment on column contract_validation.pair_status is 'On a lever pair''s :with row: expressed, or not expressed: which part the model cannot price and why (docs/validation.md)';
-- <<< validation <<<

-- >>> plan (written by sweepkit/plan/commit.py) >>>
create table if not exists contract_plan (
    run_id                  varchar,
    model                   varchar,
    workload                varchar,
    objective_name          varchar,
    frontier                boolean,
    device                  varchar,
    gpus                    integer,
    mode                    varchar,
    instances               integer,
    tp                      integer,
    pp                      integer,
    prefill_instances       integer,
    prefill_tp              integer,
    batching                varchar,
    token_budget            integer,
    batch_cap               integer,
    kv                      varchar,
    weight_format           varchar,
    kv_format               varchar,
    spec                    varchar,
    objective               double,
    bound                   double,
    capacity_per_s          double,
    tokens_per_gpu_per_s    double,
    goodput_per_gpu_per_s   double,
    ttft_p99_s              double,
    tpot_p99_s              double,
    cost_per_mtok_usd       double,
    energy_per_token_j      double,
    ttft_lb_s               double,
    tpot_lb_s               double,
    contributions           varchar,
    lever_toml              varchar,
    dp                      integer,
    ep                      integer
);
comment on table contract_plan is 'One row per simulated configuration of a plan (sweepkit plan), per workload: settings, screen bound, metrics at capacity';
comment on column contract_plan.run_id is 'The run (runs.run_id, kind plan)';
comment on column contract_plan.model is 'Served model, catalogue name';
comment on column contract_plan.workload is 'Workload name (workloads.toml)';
comment on column contract_plan.objective_name is 'tokens_per_gpu | tokens_per_usd: what the plan maximized';
comment on column contract_plan.frontier is 'true: on the Pareto frontier of (objective, TTFT p99, TPOT p99) of the simulated configurations';
comment on column contract_plan.device is 'Accelerator, catalogue name';
comment on column contract_plan.gpus is 'GPUs of the deployment';
comment on column contract_plan.mode is 'colocated | disagg';
comment on column contract_plan.instances is 'Instances (the decode pool when disaggregated)';
comment on column contract_plan.tp is 'Tensor-parallel degree of an instance (the decode pool when disaggregated)';
comment on column contract_plan.pp is 'Pipeline-parallel degree of an instance';
comment on column contract_plan.prefill_instances is 'Prefill-pool instances (0 colocated)';
comment on column contract_plan.prefill_tp is 'Tensor-parallel degree of a prefill-pool instance';
comment on column contract_plan.batching is 'prefill-priority | decode-priority | chunked';
comment on column contract_plan.token_budget is 'tokens, prompt tokens per step';
comment on column contract_plan.batch_cap is 'rows, running requests per instance';
comment on column contract_plan.kv is 'reserved | paged | paged+prefix (paged with prefix caching)';
comment on column contract_plan.weight_format is 'Weight format (and compute format where not bf16)';
comment on column contract_plan.kv_format is 'KV-cache format';
comment on column contract_plan.spec is 'none | DRAFT:GAMMA (speculative decoding, acceptance from the workload)';
comment on column contract_plan.objective is 'output tokens/s per GPU (tokens_per_gpu) or output tokens per USD (tokens_per_usd) at capacity';
comment on column contract_plan.bound is 'the screen''s upper bound of the objective';
comment on column contract_plan.capacity_per_s is '1/s, highest load meeting the SLO target (sessions or requests per second)';
comment on column contract_plan.tokens_per_gpu_per_s is 'output tokens/s per GPU at capacity';
comment on column contract_plan.goodput_per_gpu_per_s is '1/s per GPU, requests per second at capacity / GPUs';
comment on column contract_plan.ttft_p99_s is 's, 99th percentile time to first token at capacity';
comment on column contract_plan.tpot_p99_s is 's, 99th percentile time per output token at capacity';
comment on column contract_plan.cost_per_mtok_usd is 'USD per million output tokens at capacity (illustrative prices)';
comment on column contract_plan.energy_per_token_j is 'J per output token at capacity';
comment on column contract_plan.ttft_lb_s is 's, the screen''s TTFT lower bound';
comment on column contract_plan.tpot_lb_s is 's, the screen''s TPOT lower bound';
comment on column contract_plan.contributions is 'JSON: lever axis -> bound ratio against that axis at the baseline value';
comment on column contract_plan.lever_toml is 'The configuration as a [levers.<name>] table for sweepkit simulate';
comment on column contract_plan.dp is 'Attention data-parallel ranks of an instance (1: tensor parallelism alone; mixture-of-experts models)';
comment on column contract_plan.ep is 'Expert-parallel ranks of an instance (1: none; tp x dp where dp > 1)';
-- <<< plan <<<
